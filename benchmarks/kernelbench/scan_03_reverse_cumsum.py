"""Reverse (suffix) cumulative sum over the last dim."""

import torch
import torch.nn as nn

batch_size = 1024
length = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.flip(-1).cumsum(-1).flip(-1)


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return []
