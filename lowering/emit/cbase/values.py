"""What the C++ generator binds KIR values to: register tiles in a layout, scalars, global
arguments, and who runs the code being written (`Instance`)."""

from __future__ import annotations

from dataclasses import dataclass

from kir import symexpr as sx
from kir.dialect import structure as st


@dataclass(frozen=True)
class Cyclic:
    """Thread `tid` of `threads` holds the elements e with e % threads == tid, in slot e / threads."""

    threads: int
    tid: str


@dataclass
class Tile:
    name: str
    dtype: str
    shape: tuple[int, ...]
    layout: object  # Cyclic, or a backend's own layout (the CUDA wgmma accumulator)
    lazy: bool = False  # a pure function of the index: recomputed where used, never stored


@dataclass
class Scalar:
    name: str
    dtype: str


@dataclass
class Instance:
    """Who runs the code being emitted: the whole CTA, or one unit (warp or warpgroup) of a
    role. `elect` is the condition of the one thread that performs the unit's single effects
    (an arrive, a TMA issue, a scalar store); `single` says the code runs on that thread only.
    Exchanges between the unit's threads go through its own scratch area (at `scratch_at`)
    and its own barrier (`unit_sync`)."""

    threads: int
    tid: str
    elect: str
    cta: bool  # the whole CTA
    unit_sync: str  # how the unit's threads synchronize among themselves
    single: bool = False
    role: st.RoleOp | None = None
    rank: str | None = None
    scratch_at: str = "0"  # C++: where the unit's scratch area starts (bytes past the base)


@dataclass
class GlobalArg:
    name: str  # C name
    dtype: str
    shape: tuple[sx.SymExpr, ...]
    strides: tuple[sx.SymExpr, ...]  # elements; row-major when not declared
