"""Id hashing (int64): a multiplicative hash with a xor-shift, reduced into a table of 1,000,003
slots, as recommendation models hash sparse feature ids.

    h = x * 0x9E3779B97F4A7C15        # wrapping two's-complement int64 multiply
    h = h ^ (h >>> 29)                 # LOGICAL shift right: the top 29 bits come in as zeros
    out = h mod 1_000_003              # the non-negative remainder (Python / torch.remainder)

torch has no logical shift on int64, so `h >>> 29` is written `(h >> 29) & (2^35 - 1)` (the
arithmetic shift with the 29 sign-filled bits masked off).
"""

import torch
import torch.nn as nn

N = 16 * 1024 * 1024

GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)  # the 64-bit golden-ratio constant as a signed int64
SHIFT = 29
TABLE = 1_000_003


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * GOLDEN
        h = h ^ ((h >> SHIFT) & ((1 << (64 - SHIFT)) - 1))
        return torch.remainder(h, TABLE)


def get_inputs():
    # ids over the whole int64 range, both signs
    return [torch.randint(-(2**63), 2**63 - 1, (N,), dtype=torch.int64)]


def get_init_inputs():
    return []
