"""Embedding-bag sum (bf16 table, int64 indices): bag i is the sum of the table rows
idx[i, 0], ..., idx[i, L - 1] (torch.nn.functional.embedding_bag, mode="sum", fixed-length bags
given as a 2-D index tensor)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

R = 1024 * 1024  # table rows
D = 128  # embedding width
NB = 65536  # bags
L = 32  # rows per bag


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(idx, table, mode="sum")


def get_inputs():
    table = torch.randn(R, D)
    idx = torch.randint(0, R, (NB, L), dtype=torch.int64)
    return [table, idx]


def get_init_inputs():
    return []
