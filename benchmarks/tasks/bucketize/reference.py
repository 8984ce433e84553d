"""Bucketize (torch.bucketize, right=False): for each value, the index of the first boundary
that is >= it, i.e. the number of boundaries strictly below it, over sorted boundaries."""

import torch
import torch.nn as nn

N = 16 * 1024 * 1024
B = 1023  # boundaries: 1024 buckets


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, boundaries: torch.Tensor) -> torch.Tensor:
        return torch.bucketize(x, boundaries, right=False)


def get_inputs():
    x = torch.randn(N)
    boundaries = torch.sort(torch.randn(B)).values  # sorted, as bucketize requires
    return [x, boundaries]


def get_init_inputs():
    return []
