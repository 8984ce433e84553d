"""Hardtanh-style clamp of x to scalar [min_val, max_val] bounds."""

import torch
import torch.nn as nn

batch_size = 16384
dim = 1024
min_val = -0.5
max_val = 0.5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, min_val, max_val):
        return torch.clamp(x, min_val, max_val)


def get_inputs():
    return [torch.randn(batch_size, dim), min_val, max_val]


def get_init_inputs():
    return []
