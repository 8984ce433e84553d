"""What the C++ emitters (CUDA and HIP) share: the table of names that differ between
the two languages, the element semantics of KIR as C++ expressions, and the code generator of
the tile level.

The CUDA and HIP emitters differ in a handful of names (the CTA barrier, the shared-memory
qualifier, the bf16 and fp8 type names and their conversion intrinsics, the runtime header),
which live in one `CDialect` table each; everything else is written once here.

How the tile level maps to C++ (correctness over speed; the hardware-explicit level is where
speed is decided):

- A **scalar** is one C++ variable, uniform across the threads of its instance (the CTA, or one
  warp or warpgroup of a role).
- A **tile** is a per-thread register array. In the default `Cyclic` layout, thread `t` of an
  instance of `T` threads holds the elements `e` (row-major linear index) with `e % T == t`, in
  slot `e / T`; every size is a compile-time constant, so the slot loops unroll and the arrays
  stay in registers.
- **Elementwise** ops are one unrolled loop over the slots. An operand of another shape or
  layout (broadcasting, `trans`) is either recomputed at the needed index, when it is a pure
  function of the index (`arange` and what is computed from it and from scalars), or exchanged
  through shared memory (write, barrier, read, barrier).
- **Reductions** run the interpreter's exact tree (element i with element i + n/2, level by
  level) in shared memory; scans run one thread per row; `argmin`/`argmax` carry the index
  through the tree; `topk` ranks every element of its row; `gather` stages its source in shared
  memory and each thread reads its elements at the index (a source the CTA defines at the top
  level is written there once, where it is defined, and read in place by every gather: a
  binary search's table); `dot` stages both operands in shared
  memory and each thread computes its own outputs.
- **Loads, stores, gathers and atomics** compute one address per element, with masks.

An op the generator cannot express raises `Unsupported`; `accepts()` turns that into a
`lower.unsupported` diagnostic at the op, so a program is refused rather than miscompiled.

The package: `dialect.py` (the table and `Unsupported`), `exprs.py` (element semantics and the
device helpers), `values.py` (tiles, scalars, instances), `kernel.py` (the generator and the
kernel around the body), whose handlers are in `slots.py` (slot loops and exchanges),
`elementwise.py`, `reductions.py`, `memory.py` and `control.py`; `emitter.py` holds `CEmitter`.
"""

from __future__ import annotations

from lowering.emit.cbase.dialect import _UNSIGNED_OF, NARROW_FLOATS, CDialect, Unsupported, _prod, c_types
from lowering.emit.cbase.emitter import CEmitter, unsupported_diagnostic
from lowering.emit.cbase.exprs import COMMON_HELPERS, CExprs
from lowering.emit.cbase.kernel import KernelGen, _product
from lowering.emit.cbase.values import Cyclic, GlobalArg, Instance, Scalar, Tile

__all__ = [
    "COMMON_HELPERS",
    "NARROW_FLOATS",
    "_UNSIGNED_OF",
    "CDialect",
    "CEmitter",
    "CExprs",
    "Cyclic",
    "GlobalArg",
    "Instance",
    "KernelGen",
    "Scalar",
    "Tile",
    "Unsupported",
    "_prod",
    "_product",
    "c_types",
    "unsupported_diagnostic",
]
