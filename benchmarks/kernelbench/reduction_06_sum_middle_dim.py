"""Sum over the middle dim (dim=1) of a 3-D tensor."""

import torch
import torch.nn as nn

batch_size = 64
rows = 1024
cols = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, rows, cols)]


def get_init_inputs():
    return []
