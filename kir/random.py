"""KIR's random numbers for a task's reference: `rand` and `randint` as the ops compute them.

`rand(seed, offsets)` and `randint(seed, offsets)` in KIR are Philox4x32 with 10 rounds, keyed
by the seed and counting by the offsets, as Triton's `tl.rand` and `tl.randint` are, bit for bit:

- the seed is widened to 64 bits (sign-extended) and split into the key (low word, high word);
- the counter is (low word of the offset, high word of a 64-bit offset or 0, 0, 0);
- `randint` is the first word after ten rounds, a u32;
- `rand` reads that word as an i32 x, takes x or ~x (whichever is not negative), converts it to
  f32 (round to nearest) and multiplies by 4.6566127342e-10 in f32: uniform in [0, 1).

The reference interpreter computes the ops with these functions, so a reference that draws its
dropout mask as `rand(seed, offsets) > p` sees exactly the numbers the kernel drew:

    from kir.random import rand
    keep = torch.from_numpy(rand(seed, np.arange(n, dtype=np.int64))) >= p
"""

from __future__ import annotations

from typing import Any

import numpy as np

KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57
ROUNDS = 10
SCALE = np.float32(4.6566127342e-10)  # the largest x with (2^31 - 1) * x < 1 in f32
_M32 = np.uint64(0xFFFFFFFF)


def _ints(x: Any) -> np.ndarray:
    """Integers as a numpy array (a torch tensor, a list, a Python int)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"random offsets and seeds are integers, not {a.dtype}")
    return a


def randint(seed: Any, offsets: Any) -> np.ndarray:
    """The u32 of each offset (an integer array of any shape; 64-bit offsets count their high
    word too, 32-bit ones do not)."""
    off = _ints(offsets)
    s = int(_ints(seed).reshape(-1)[0]) if np.ndim(seed) else int(seed)
    s &= 0xFFFFFFFFFFFFFFFF  # sign-extended to 64 bits, then the two words
    k0, k1 = np.uint64(s & 0xFFFFFFFF), np.uint64(s >> 32)
    if off.dtype.itemsize == 8:  # the low and the high word
        u = off.astype(np.uint64) if off.dtype.kind == "u" else off.astype(np.int64).view(np.uint64)
        c0, c1 = u & _M32, u >> np.uint64(32)
    else:  # the offset's 32 bits, and 0
        c0 = off.astype(np.int64).view(np.uint64) & _M32
        c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    a, b = np.uint64(ROUND_A), np.uint64(ROUND_B)
    for _ in range(ROUNDS):
        p0, p2 = c0 * a, c2 * b  # exact: both factors are below 2^32
        c0, c1, c2, c3 = (
            ((p2 >> np.uint64(32)) ^ c1 ^ k0) & _M32,
            p2 & _M32,
            ((p0 >> np.uint64(32)) ^ c3 ^ k1) & _M32,
            p0 & _M32,
        )
        k0 = (k0 + np.uint64(KEY_A)) & _M32
        k1 = (k1 + np.uint64(KEY_B)) & _M32
    return c0.astype(np.uint32)


def uniform(bits: np.ndarray) -> np.ndarray:
    """u32 words as f32 in [0, 1), as `rand` maps them."""
    x = np.asarray(bits, dtype=np.uint32).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * SCALE


def rand(seed: Any, offsets: Any) -> np.ndarray:
    """The f32 in [0, 1) of each offset."""
    return uniform(randint(seed, offsets))
