"""Causal scaled-dot-product attention: o = softmax(q k^T / sqrt(D) + causal mask) v, with q, k
and v of shape [B, H, S, D] (query i attends to keys 0..i)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 8
H = 16
S = 4096
D = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=D**-0.5)


def get_inputs():
    return [torch.randn(B, H, S, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)]


def get_init_inputs():
    return []
