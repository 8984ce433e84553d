"""A row-wise scale by a learned weight, small enough for the hack corpus: y = x * weight."""

import torch
import torch.nn as nn

M = 4
N = 16


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return [N]
