"""BatchNorm1d over (batch, features), using batch statistics in train mode."""

import torch
import torch.nn as nn

batch_size = 8192
features = 2048


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.BatchNorm1d(features)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
