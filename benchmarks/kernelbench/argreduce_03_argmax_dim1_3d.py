"""Argmax over dim=1 of a 3-D tensor."""

import torch
import torch.nn as nn

batch_size = 128
dim1 = 256
dim2 = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
