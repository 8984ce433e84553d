"""1-D convolution, stride 1, padding 3, no bias: y[b, o, l] = sum over i, t of
w[o, i, t] * x[b, i, l + t - 3] (x read as zero outside 0 .. L - 1), so L_out = L."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 32
C = 256
L = 4096
KW = 7


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, w, padding=KW // 2)


def get_inputs():
    return [torch.randn(B, C, L), torch.randn(C, C, KW)]


def get_init_inputs():
    return []
