"""Mean over the last dim of a 3-D tensor."""

import torch
import torch.nn as nn

batch_size = 64
rows = 512
dim = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, rows, dim)]


def get_init_inputs():
    return []
