"""Matrix multiplication with a transposed right operand, A @ B.T."""

import torch
import torch.nn as nn

m = 8192
k = 1024
n = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b.T)


def get_inputs():
    return [torch.randn(m, k), torch.randn(n, k)]


def get_init_inputs():
    return []
