"""The gated activation of a SwiGLU MLP: silu(a) * b, elementwise on bf16 matrices."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(M, N), torch.randn(M, N)]


def get_init_inputs():
    return []
