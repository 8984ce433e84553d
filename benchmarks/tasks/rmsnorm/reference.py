"""RMSNorm over the last dimension of a bf16 matrix, with a weight (eps 1e-6):
y = x / sqrt(mean(x^2) + eps) * w."""

import torch
import torch.nn as nn

M = 8192
N = 8192
EPS = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


def get_inputs():
    return [torch.randn(M, N), 1.0 + 0.5 * torch.randn(N)]


def get_init_inputs():
    return []
