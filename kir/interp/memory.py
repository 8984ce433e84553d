"""Addressing: which elements an access touches, and reading and writing them.

One form serves global tensors and shared buffers. An access gives, per indexed dimension, a
point index (a scalar, or an index tile for a gather) or a slice `start : start + E`; a shared
buffer's unindexed trailing dimensions are taken whole. `Lanes` turns that into numpy index
arrays that broadcast to the access shape (open meshes for block accesses, so a 128x64 box
costs two small aranges, not a 8192-entry grid), plus the mask.

Choices:
- masked-off lanes are never read, written, bounds-checked or race-tracked;
- a store whose lanes hit one element several times (a gather with repeated indices) leaves
  the value of the last such lane in row-major lane order;
- atomics apply their lanes one at a time in row-major lane order and return the old values
  (masked-off lanes return 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from kir import symexpr as sx
from kir.dtypes import DType
from kir.interp import values as V
from kir.interp.errors import OutOfBounds, Unsupported


@dataclass
class Tensor:
    """A global tensor argument: a name and its (private copy of the) array."""

    name: str
    dtype: DType
    data: np.ndarray


class Lanes:
    """The elements one access touches. `idx[d]` broadcasts to `shape`; `mask` is None (every
    lane active) or a bool array of `shape`."""

    def __init__(
        self,
        mem_shape: tuple[int, ...],
        idx: list[np.ndarray],
        shape: tuple[int, ...],
        mask: np.ndarray | None,
        gather: bool,
    ):
        self.mem_shape = mem_shape
        self.idx = idx
        self.shape = shape
        self.mask = mask
        self.gather = gather

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def out_of_bounds(self) -> np.ndarray | None:
        """Active lanes whose index leaves the memory, as a bool array of `shape` (None when
        there are none)."""
        bad = None
        for ix, n in zip(self.idx, self.mem_shape, strict=True):
            b = (ix < 0) | (ix >= n)
            if np.any(b):
                b = np.broadcast_to(b, self.shape)
                bad = b if bad is None else (bad | b)
        if bad is None:
            return None
        if self.mask is not None:
            bad = bad & self.mask
        return bad if np.any(bad) else None

    def first(self, bad: np.ndarray) -> OutOfBounds:
        lane = (
            tuple(int(v) for v in np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), self.shape))
            if self.shape
            else ()
        )
        index = tuple(int(np.broadcast_to(ix, self.shape)[lane]) for ix in self.idx)
        return OutOfBounds(index, self.mem_shape, lane)

    def check(self) -> None:
        bad = self.out_of_bounds()
        if bad is not None:
            raise self.first(bad)

    def clamped(self) -> tuple[np.ndarray, ...]:
        """Indices with out-of-bounds entries replaced by 0 (safe to gather with; the lanes
        they belong to are masked off or filled separately)."""
        return tuple(np.where((ix < 0) | (ix >= n), 0, ix) for ix, n in zip(self.idx, self.mem_shape, strict=True))

    def active(self) -> tuple[np.ndarray, ...]:
        """The active lanes' indices, 1-D, in row-major lane order."""
        full = [np.broadcast_to(ix, self.shape) for ix in self.idx]
        if self.mask is None:
            return tuple(f.reshape(-1) for f in full)
        return tuple(f[self.mask] for f in full)

    def active_flat(self) -> np.ndarray:
        """Row-major linear addresses of the active lanes (repeats kept, lane order)."""
        return np.ravel_multi_index(self.active(), self.mem_shape).astype(np.int64)


def lanes(
    mem_shape: tuple[int, ...],
    dims: Sequence[sx.SymExpr | None],
    extents: Sequence[int | None],
    indices: Sequence[np.ndarray],
    mask: np.ndarray | None,
) -> Lanes:
    """`extents[d]` is the evaluated slice extent of dimension d (None for a point index)."""
    gather = any(np.ndim(v) > 0 for v in indices)
    rank = len(mem_shape)
    if gather:
        shape = np.broadcast_shapes(*[np.shape(v) for v in indices])
        idx = [np.asarray(v).astype(np.int64) for v in indices]
        if len(indices) < rank:
            raise Unsupported(
                "a gather must index every dimension of the buffer (its trailing dimensions are not part of the gather's shape)"
            )
    else:
        out_dims = [e for e in extents if e is not None] + list(mem_shape[len(indices) :])
        shape = tuple(out_dims)
        idx = []
        pos = 0
        nout = len(shape)
        for d in range(rank):
            if d < len(indices) and extents[d] is None:
                idx.append(np.asarray(int(indices[d]), dtype=np.int64))
                continue
            start = int(indices[d]) if d < len(indices) else 0
            extent = cast(int, extents[d]) if d < len(indices) else mem_shape[d]  # a point index was taken above
            r = np.arange(start, start + extent, dtype=np.int64)
            idx.append(r.reshape([-1 if i == pos else 1 for i in range(nout)]))
            pos += 1
    m = None
    if mask is not None:
        m = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
        if m.all():
            m = None
    return Lanes(tuple(mem_shape), idx, tuple(shape), m, gather)


def read(data: np.ndarray, ln: Lanes, other, d: DType, zero_out_of_bounds: bool = False) -> np.ndarray:
    """The values at the lanes; masked-off lanes (and, for TMA, out-of-bounds ones) take
    `other`. Unmasked out-of-bounds lanes raise `OutOfBounds` unless `zero_out_of_bounds`."""
    bad = ln.out_of_bounds()
    fill = V.of(other if other is not None else 0, d)
    if bad is not None and not zero_out_of_bounds:
        raise ln.first(bad)
    if ln.size == 0:
        return np.empty(ln.shape, dtype=d.numpy)
    if bad is None and ln.mask is None:
        return V.of(np.array(data[tuple(ln.idx)], copy=True), d)
    if any(n == 0 for n in ln.mem_shape):
        return np.broadcast_to(fill, ln.shape).copy()
    vals = data[ln.clamped()]
    keep = np.ones(ln.shape, dtype=bool) if ln.mask is None else ln.mask
    if bad is not None or zero_out_of_bounds:
        inb = np.ones(ln.shape, dtype=bool)
        for ix, n in zip(ln.idx, ln.mem_shape, strict=True):
            inb = inb & ((ix >= 0) & (ix < n))
        keep = keep & inb
    return V.of(np.where(keep, vals, fill), d)


def write(data: np.ndarray, ln: Lanes, value: np.ndarray, skip_out_of_bounds: bool = False) -> None:
    """Store `value` (broadcast to the lanes' shape) at the active lanes; repeated addresses
    keep the last lane's value."""
    bad = ln.out_of_bounds()
    if bad is not None and not skip_out_of_bounds:
        raise ln.first(bad)
    value = np.broadcast_to(value, ln.shape)
    if bad is None and ln.mask is None and not ln.gather:
        data[tuple(ln.idx)] = value
        return
    keep = np.ones(ln.shape, dtype=bool) if ln.mask is None else ln.mask
    if bad is not None:
        keep = keep & ~bad
    where = tuple(np.broadcast_to(ix, ln.shape)[keep] for ix in ln.idx)
    vals = value[keep]
    if ln.gather and vals.size > 1:
        flat = np.ravel_multi_index(where, ln.mem_shape)
        _, first_from_end = np.unique(flat[::-1], return_index=True)
        last = flat.size - 1 - first_from_end
        where = tuple(w[last] for w in where)
        vals = vals[last]
    data[where] = vals


_ATOMIC = {
    "add": lambda old, v, d: V.binary("add", old, v, d),
    "max": lambda old, v, d: V.binary("maximum", old, v, d),
    "min": lambda old, v, d: V.binary("minimum", old, v, d),
    "xchg": lambda old, v, d: v,
}


def atomic(fn: str, data: np.ndarray, ln: Lanes, value: np.ndarray, d: DType) -> np.ndarray:
    """Apply the lanes in row-major order and return the old values. Lanes are grouped into
    rounds by how many earlier lanes hit the same element, so each round is one vectorized
    read-modify-write over distinct elements."""
    ln.check()
    old = np.zeros(ln.shape, dtype=d.numpy)
    keep = np.ones(ln.shape, dtype=bool) if ln.mask is None else ln.mask
    where = tuple(np.broadcast_to(ix, ln.shape)[keep] for ix in ln.idx)
    vals = np.broadcast_to(value, ln.shape)[keep]
    if vals.size == 0:
        return old
    flat = np.ravel_multi_index(where, ln.mem_shape)
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    starts = np.r_[True, sorted_flat[1:] != sorted_flat[:-1]]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(flat.size), 0))
    rank = np.empty(flat.size, dtype=np.int64)
    rank[order] = np.arange(flat.size) - group_start
    olds = np.empty(flat.size, dtype=d.numpy)
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        at = tuple(w[sel] for w in where)
        before = np.array(data[at], copy=True)
        olds[sel] = before
        data[at] = _ATOMIC[fn](before, vals[sel], d)
    old[keep] = olds
    return old
