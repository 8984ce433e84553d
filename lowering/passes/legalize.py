"""Legalization for a target: what the target cannot do directly, rewritten into what it can.

    e = exp(x)                     # x: bf16[BM]   =>   e = cast<bf16>(exp(cast<f32>(x)))
    acc = dot<f32>(a, b, acc)      # a: [8, 32]    =>   acc = acc + sum(cast<f32>(a)[:, :, None] * cast<f32>(b)[None, :, :], axis = 1)

Rewrites (each new op has the span of the op it replaces):
- Transcendental math (`exp exp2 log log2 sqrt rsqrt erf sigmoid tanh sin cos`) on f16 or bf16 is
  computed in f32 and cast back: GPUs have no narrow-float transcendentals, and this is what the
  reference interpreter computes for them, so the result is bit-identical.
- A `dot` whose M, N or K is below the target's smallest matrix instruction (16 on NVIDIA and AMD,
  the engine's block on mtia-sim; Triton rejects smaller dots) becomes a broadcast multiply and a
  `sum` over K, in f32 for float operands (f64 for f64, i64 for integers), added to the
  accumulator and cast to the dot's dtype. The interpreter's `dot` rounds once, the sum rounds
  each level of its tree in f32: the results agree to f32 rounding (exactly for integers).

What the target lacks and no rewrite gives it is an error (`lower.legalize`) at the op, with a
hint: an explicit op whose feature the target table (kir/targets/*.toml) does not list (TMA,
wgmma, mbarriers, transaction counts, cp.async, async fences, register budgets), and a dtype the
target does not have. The program is returned with those ops as they were.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect.tile import BinaryOp, CastOp, DotOp, ExpandDimsOp, ReduceOp, UnaryOp
from kir.dialect.types import GlobalType, ScalarType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program, set_span, span_of
from kir.targets import spec
from lowering.passes import PassResult

RULE = "lower.legalize"

TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "sigmoid", "tanh", "sin", "cos")
NARROW_FLOATS = ("f16", "bf16")

# Explicit ops and the target feature (kir/targets/*.toml) each needs, with what to write instead.
FEATURES: tuple[tuple[type[Operation], str, str], ...] = (
    (ex.TmaLoadOp, "tma", "copy with cp.async (pipeline(stages = S)) or load the tiles"),
    (ex.TmaStoreOp, "tma", "store the tile with store(...)"),
    (ex.TmaStoreWaitOp, "tma", "drop it with the tma.store"),
    (ex.WgmmaOp, "wgmma", "multiply with dot<f32>(a, b, acc) at the tile level"),
    (ex.WgmmaWaitOp, "wgmma", "drop it with the wgmma"),
    (ex.MBarrierAllocOp, "mbarrier", "synchronize with barrier()"),
    (ex.ExpectOp, "mbarrier_tx", "count arrivals with arrive(...) instead of transaction bytes"),
    (ex.CpAsyncOp, "cp_async", "load the tile with load(...)"),
    (ex.FenceAsyncOp, "fence_async", "order shared-memory writes with barrier()"),
)


def smallest_mma(target: str) -> int:
    """The smallest M, N or K that the target's matrix unit takes (0: no matrix unit)."""
    s = spec(target)
    if s.vendor in ("nvidia", "amd"):
        return 16  # mma.sync / wgmma and MFMA tiles; Triton rejects smaller dots
    return min((min(shape) for shape in s.mma_shapes), default=0)


@dataclass(frozen=True)
class LegalizePass:
    """Rewrite what `target` cannot do into what it can; report what it cannot do at all."""

    target: str = "sm_90"

    def apply(self, program: Program) -> PassResult:
        out = program.clone()
        diagnostics: list[Diagnostic] = []
        tspec = spec(self.target)
        min_dot = smallest_mma(self.target)
        for op in list(out.kernel.walk()):
            if isinstance(op, UnaryOp) and op.fn.data in TRANSCENDENTAL and dtype_of(op.res.type) in NARROW_FLOATS:
                _promote(op)
            elif isinstance(op, DotOp) and min_dot and _small(op, out.params, min_dot):
                _unroll_dot(op)
        for op in out.kernel.walk():
            diagnostics += self._lacks(op, tspec)
        return PassResult(out, diagnostics)

    def _lacks(self, op: Operation, tspec) -> list[Diagnostic]:
        out = []
        for kind, feature, hint in FEATURES:
            if isinstance(op, kind) and not tspec.has(feature):
                out.append(
                    Diagnostic(RULE, "error", span_of(op), f"{self.target} has no {feature} for `{op.name}`", hint)
                )
        if isinstance(op, st.RoleOp) and op.regs.data and not tspec.has("setmaxnreg"):
            out.append(
                Diagnostic(
                    RULE,
                    "error",
                    span_of(op),
                    f"{self.target} cannot give roles register budgets (no setmaxnreg)",
                    "drop regs(...) from the role",
                )
            )
        types = [v.type for v in op.results] + [
            a.type for r in op.regions for b in r.blocks for a in b.args if isinstance(op, st.KernelOp)
        ]
        for t in types:
            if isinstance(t, ScalarType | TileType | GlobalType | SmemType) and dtype_of(t) not in (
                tspec.dtypes | tspec.convert_dtypes
            ):
                wider = "f32" if DTYPES[dtype_of(t)].is_float else "i32"
                out.append(
                    Diagnostic(
                        RULE,
                        "error",
                        span_of(op),
                        f"{self.target} has no {dtype_of(t)} ({t})",
                        f"use {wider}, which the target has (cast<{wider}>(...))",
                    )
                )
                break
        return out


def _small(dot: DotOp, params: dict[str, int], least: int) -> bool:
    (m, k), n = shape_of(dot.lhs.type), shape_of(dot.rhs.type)[1]
    for d in (m, n, k):
        try:
            if sx.fold(d).evaluate(params) < least:
                return True
        except KeyError:
            continue  # a shape symbol: the verifier's resources.dot-shape says more
    return False


def _insert(block: Block, before: Operation, op: Operation, span) -> SSAValue:
    set_span(op, span)
    block.insert_op_before(op, before)
    return op.results[0]


def _replace(old: Operation, new: SSAValue) -> None:
    new.name_hint, old.results[0].name_hint = old.results[0].name_hint, None
    old.results[0].replace_all_uses_with(new)
    block = old.parent_block()
    assert block is not None
    block.erase_op(old)


def _promote(op: UnaryOp) -> None:
    """`fn(x)` on f16/bf16 as `cast<dt>(fn(cast<f32>(x)))`."""
    block, span, dt = op.parent_block(), span_of(op), dtype_of(op.res.type)
    assert block is not None
    wide = _insert(block, op, CastOp(op.operand, "f32"), span)
    value = _insert(block, op, UnaryOp(op.fn.data, wide), span)
    _replace(op, _insert(block, op, CastOp(value, dt), span))


def _unroll_dot(dot: DotOp) -> None:
    """`dot<T>(a, b, acc)` as `acc + sum(a[:, :, None] * b[None, :, :], axis = 1)`, computed in
    f32 (f64, i64) and cast to T."""
    block, span = dot.parent_block(), span_of(dot)
    assert block is not None
    out_dt, in_dt = dtype_of(dot.res.type), dtype_of(dot.lhs.type)
    wide = "f64" if "f64" in (out_dt, in_dt) else "f32" if DTYPES[in_dt].is_float else "i64"

    def cast(v: SSAValue, at: Operation) -> SSAValue:
        return v if dtype_of(v.type) == wide else _insert(block, at, CastOp(v, wide), span)

    def operand(v: SSAValue, axis: int) -> SSAValue:
        # right after the operand is made (a load written inside the dot): the order in which
        # the parser builds `cast<f32>(load(...))[:, :, None] * ...`, so the text stays inline
        owner = v.owner
        at = owner.next_op if isinstance(owner, Operation) and owner.parent_block() is block else dot
        assert at is not None
        return _insert(block, at, ExpandDimsOp(cast(v, at), axis), span)

    acc = cast(dot.acc, dot) if dot.acc is not None else None
    a = operand(dot.lhs, 2)
    b = operand(dot.rhs, 0)
    total = _insert(block, dot, ReduceOp("sum", _insert(block, dot, BinaryOp("mul", a, b), span), 1), span)
    if acc is not None:
        total = _insert(block, dot, BinaryOp("add", acc, total), span)
    if wide != out_dt:
        total = _insert(block, dot, CastOp(total, out_dt), span)
    _replace(dot, total)
