"""The Triton backend: a tile-level KIR program becomes a Python module with one `@triton.jit`
kernel (and the few `@triton.jit` helpers it calls).

    from lowering import lower
    out = lower(program, "triton", {"BLOCK": 256})
    out.source          # the module text; out.entry names the kernel in it

The kernel's arguments are, in order: one pointer per tensor argument, one i32 scalar per shape
symbol (`Lowered.shape_symbols` order), then one `tl.constexpr` per compile-time parameter
(passed by keyword; `Lowered.options["constexprs"]` maps their Python names to values). The
launch grid is the KIR grid; `num_warps` comes from `warps(N)` (`warpgroups(N)` is 4N warps).

How KIR's meaning is kept (the reference interpreter defines it):

- **Dtypes are exact.** A value of KIR dtype T is a Triton value of dtype T. A literal, a
  parameter, a shape symbol or a loop variable is "loose" (a Python number or a constexpr at
  run time: Triton specializes an i32 argument equal to 1 into a constexpr, and the
  interpreter runs loops over Python ints); it is written bare next to a tensor partner, whose
  dtype it then takes (Triton's weak typing of scalars), and materialized with
  `tl.full((), v, dtype)` where it stands alone.
- **Narrow floats compute in f32.** KIR rounds every bf16/f16/fp8 result once from f32; the
  emitted code converts the operands to f32, computes there and converts back, which is that
  definition and what Triton's interpreter can run (it stores bf16 as raw 16-bit integers and
  has only the f32 conversions right). Data movement (load, store, where, reshape, ...) stays in
  the narrow dtype.
- **Integer `/` and `%`** are Triton's `//` and `%` on integers, which truncate toward zero as
  in C; a divisor that is not a known non-zero constant is guarded to give KIR's `x / 0 == -1`
  and `x % 0 == x`. Shifts by the width or more are guarded to give 0 (or the sign fill).
- **Float `/`** is `tl.div_rn` (IEEE) for f32 and `/` for f64; `sqrt` is `tl.sqrt_rn` for f32.
  The other transcendentals are Triton's (fast, a few ulp from numpy's).
- **NaN propagates** through `maximum`/`minimum` and the max/min reductions and scans
  (`propagate_nan=ALL`); argmax/argmin count NaN as the extreme value and break ties toward the
  lower index (`_kir_argmax`/`_kir_argmin` combine functions).
- **Casts**: float to integer truncates and saturates, NaN gives 0 (`_kir_float_to_int`);
  sources wider than f32 that round to a narrow float go through f32 rounded to odd
  (`_kir_f64_to_f32_odd`) so that they round once; f32 to fp8 E4M3 gives NaN past the range and
  to E5M2 gives infinity (the hardware conversion saturates instead).
- **Loads** with a mask always pass `other` (zero by default): Triton leaves masked lanes
  undefined without it. Atomics return 0 on masked-off lanes, as in KIR.
- **dot** is `tl.dot` with the accumulate dtype as `out_dtype` (`input_precision="ieee"` for
  f32 operands, since KIR's f32 dot is an f32 dot, not TF32); an f16/bf16 accumulator is
  accumulated in f32 and rounded once. K must be at least 16 (32 for 8-bit operands): tl.dot's
  rule on NVIDIA in Triton 3.6 (M and N may be small; Triton pads them).
- **topk** is k rounds of "take the best element not taken yet" (`_kir_topk`), which gives the
  sorted values with their indices, NaN first and ties by index, as KIR specifies; Triton's own
  `tl.topk` returns no indices and needs a power-of-two k.
- **gather** is `tl.gather(src, index, axis)` (an i1 source goes through i8). Triton leaves an
  index out of range undefined; KIR calls it an error, which the interpreter reports.

What differs, by the nature of the hardware: the order in which a reduction combines elements
(a float sum can differ in the last bits); sums, products and their scans of bf16/f16/fp8 add in
f32 and round once, where KIR rounds every partial result to the dtype (so they come out more
accurate than the interpreter's); which lane wins when a store or an atomic hits one element
several times, and in which order an atomic's lanes see each other; the transcendentals' last
bits. Tile dimensions must be powers of two known at compile time (Triton's rule); a program
that breaks that is refused with `lower.tile-shape`. Offsets are computed in i32 (i64 where an
index is i64), so a tensor of more than 2^31 elements needs i64 indices.

The generated code reads like hand-written Triton: one line per KIR statement, unnamed
intermediate values written inline into their single user (long ones get a `_tN` name), KIR
names kept (with a suffix where Python would otherwise rebind a live name), and a loop-carried
variable kept as one Python variable (Triton turns a name assigned in a loop body into a
loop-carried value, so names from outside a loop body are never reused inside it). Every line
records the KIR op it came from (`Lowered.line_spans`), which is how a compile error in
generated code is reported at the KIR op (`lowering.targets.triton.compile`).

Hints: `pipeline(stages = S)` becomes `tl.range(..., num_stages=S)`; `warp_specialize` becomes
`tl.range(..., warp_specialize=True)`, which Triton 3.6 applies where its automatic warp
specialization handles the loop and otherwise ignores (recorded in `Lowered.options["notes"]`).

The package: `writer.py` writes the kernel and the module around it, handing each op to its
handler in `elementwise.py`, `tiles.py`, `memory.py` or `control.py`; `naming.py` and
`liveness.py` decide the Python names and what is written inline; `values.py` holds the value
type, the literals and the static expressions; `tables.py` and `helpers.py` the names and the
`@triton.jit` helpers. What the Gluon backend writes alike is in `lowering.emit.pyexpr`.
"""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from kir.dialect import structure as st
from kir.program import Program, span_of
from lowering.emit.base import Emitter, Lowered, level_refusal
from lowering.emit.pyexpr import SIGNATURE_DTYPE

from .helpers import HELPERS
from .tables import TL_DTYPE
from .writer import HANDLERS, KernelWriter

__all__ = ["HANDLERS", "HELPERS", "SIGNATURE_DTYPE", "TL_DTYPE", "TritonEmitter"]


class TritonEmitter(Emitter):
    name = "triton"
    levels = ("tile",)

    def accepts(self, program: Program) -> list[Diagnostic]:
        refusals = level_refusal(program, self.name, self.levels)
        if refusals:
            return refusals
        out = []
        for op in program.kernel.walk():
            if op is program.kernel or isinstance(op, st.YieldOp):
                continue
            if type(op) not in HANDLERS:
                out.append(
                    Diagnostic(
                        "lower.unsupported",
                        "error",
                        span_of(op),
                        f"the Triton backend cannot lower `{op.name}`",
                        "lower this program with the gluon or cuda backend",
                    )
                )
        return out

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        lowered = KernelWriter(program, params).write()
        lowered.backend = self.name  # the target's name (a copy of the folder has its own)
        return lowered
