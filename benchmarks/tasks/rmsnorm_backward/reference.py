"""The backward pass of RMSNorm (y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps), eps 1e-6)
for bf16 x, w and the upstream gradient dy:

    dx = rstd * (dy * w) - x * rstd^3 * mean(dy * w * x)      (per row)
    dw = sum over rows of dy * x * rstd

written out explicitly (it is what autograd computes for that forward, and a formula that
torch.compile fuses). dw is returned as G partial sums in f32, one per block of M / G
consecutive rows: `dw_partial.sum(0)` is dw. Why partials: dw reduces over every row, so it
crosses programs, and a single kernel launch cannot combine programs' sums safely: atomics need
a zeroed accumulator, and the harness (rightly) hands kernels poisoned outputs, with no
zero-initialized workspace and no grid-wide barrier in KIR. The last [G, N] -> [N] sum is a
small (G * N * 4 bytes) reduction left to the caller, as fused RMSNorm backward kernels do.
"""

import torch
import torch.nn as nn

M = 8192
N = 8192
G = 256  # row blocks of dw_partial: M % G == 0
EPS = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor):
        rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
        g = dy * w
        dx = rstd * g - x * rstd.pow(3) * (g * x).mean(dim=-1, keepdim=True)
        dw_partial = (dy * x * rstd).reshape(G, -1, x.shape[-1]).sum(dim=1)
        return dx, dw_partial.float()


def get_inputs():
    return [torch.randn(M, N), 1.0 + 0.5 * torch.randn(N), torch.randn(M, N)]


def get_init_inputs():
    return []
