"""Linear, then Dropout(p=0.1) (training mode), then softmax over the last dim."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 2048
out_features = 4096
dropout_p = 0.1


class Model(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        return torch.softmax(self.dropout(self.fc(x)), dim=-1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
