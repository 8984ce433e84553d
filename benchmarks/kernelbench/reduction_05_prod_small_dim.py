"""Product over a small last dim of a 3-D tensor."""

import torch
import torch.nn as nn

batch_size = 256
dim = 4096
reduce_dim = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.prod(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, reduce_dim)]


def get_init_inputs():
    return []
