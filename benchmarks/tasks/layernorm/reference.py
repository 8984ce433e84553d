"""LayerNorm over the last dimension of a bf16 matrix, with a weight and a bias (eps 1e-5)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192
EPS = 1e-5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), w, b, EPS)


def get_inputs():
    # A weight around 1 and a bias around 0, both with both signs among their elements.
    return [torch.randn(M, N), 1.0 + 0.5 * torch.randn(N), 0.5 * torch.randn(N)]


def get_init_inputs():
    return []
