"""Rectangular matrix multiplication of an (M, K) by a (K, N) matrix."""

import torch
import torch.nn as nn

m = 4096
k = 2048
n = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
