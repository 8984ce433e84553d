"""Swish with a scalar beta plus one: x * sigmoid(beta * x) + 1."""

import torch
import torch.nn as nn

batch_size = 8192
dim = 2048
beta = 1.5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, beta):
        return x * torch.sigmoid(beta * x) + 1.0


def get_inputs():
    return [torch.randn(batch_size, dim), beta]


def get_init_inputs():
    return []
