"""`dataflow.masked-reduce`: a reduction over masked-off lanes that do not hold its identity.

What the masked-off lanes of a tile hold (its padding) is followed from the masked load through
casts, shape changes, arithmetic and `where(mask, x, y)` to each reduction. A `max` (`min`) is
also left alone when the lanes the mask keeps are provably at least (at most) the padding: the
absmax of a zero-padded row is the absmax of its data."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from xdsl.ir import BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from kir.dialect.types import TileType, dtype_of, shape_of
from verifier.context import Context
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.symbolic import format_counterexample, readable

# ---- dataflow.masked-reduce -------------------------------------------------------------------------------

_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf, "argmax": -math.inf, "argmin": math.inf}


@dataclass(frozen=True)
class Pad:
    """What the masked-off lanes of a tile hold, relative to the mask of the load they came
    from: a constant, `finite` (some finite value), `positive` (finite and > 0) or `unknown`;
    `varying[d]` says whether the mask can differ along dimension d."""

    mask: SSAValue
    load: Operation
    value: float | str
    varying: tuple[bool, ...]


def _pad_of(v: SSAValue, memo: dict) -> Pad | None:
    """The padding of `v` (None: `v` has no masked-off lanes that the analysis follows)."""
    if v in memo:
        return memo[v]
    memo[v] = None  # cycles (loop-carried values) are not followed
    memo[v] = out = _pad(v, memo)
    return out


def _pad(v: SSAValue, memo: dict) -> Pad | None:
    if isinstance(v, BlockArgument) or not isinstance(v.type, TileType):
        return None
    op = v.owner
    if isinstance(op, tl.LoadOp):
        if op.mask is None:
            return None
        value: float | str = memo.get(("other", op), 0.0)
        if op.other is not None:
            o = op.other.owner
            value = float(o.number) if isinstance(o, tl.ConstOp) else "unknown"
        shape, mshape = shape_of(v.type), shape_of(op.mask.type)
        k = len(shape) - len(mshape)
        varying = tuple(i >= k and sx.fold(mshape[i - k]).as_int() != 1 for i in range(len(shape)))
        return Pad(op.mask, op, value, varying)
    if isinstance(op, tl.CastOp | ex.ConvertLayoutOp):
        return _pad_of(op.operand, memo)
    if isinstance(op, tl.ExpandDimsOp):
        p = _pad_of(op.operand, memo)
        if p is None:
            return None
        widened = list(p.varying)
        widened.insert(op.axis.data, False)
        return Pad(p.mask, p.load, p.value, tuple(widened))
    if isinstance(op, tl.BroadcastOp):
        p = _pad_of(op.operand, memo)
        if p is None:
            return None
        n = len(shape_of(op.res.type))
        return Pad(p.mask, p.load, p.value, (False,) * (n - len(p.varying)) + p.varying)
    if isinstance(op, tl.UnaryOp):
        p = _pad_of(op.operand, memo)
        return None if p is None else Pad(p.mask, p.load, _unary_pad(op.fn.data, p.value), p.varying)
    if isinstance(op, tl.BinaryOp):
        a, b = _pad_of(op.lhs, memo), _pad_of(op.rhs, memo)
        if a is None and b is None:
            return None
        if a is not None and b is not None and a.mask is not b.mask:
            return None
        base = cast(Pad, a or b)  # one of them, at least, is known
        n = len(shape_of(op.res.type))
        varying = _merge_varying(n, a, b)
        value = _binary_pad(op.fn.data, _operand_pad(op.lhs, a), _operand_pad(op.rhs, b))
        return Pad(base.mask, base.load, value, varying)
    if isinstance(op, tl.WhereOp):
        a, b = _pad_of(op.lhs, memo), _pad_of(op.rhs, memo)
        cond = _through_shape(op.cond)
        for p in (a, b):
            if p is not None and cond is p.mask:
                # where(mask, x, y): the masked-off lanes take y
                n = len(shape_of(op.res.type))
                return Pad(p.mask, p.load, _operand_pad(op.rhs, b), _merge_varying(n, a, b))
        return None
    return None


def _through_shape(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, tl.ExpandDimsOp | tl.BroadcastOp):
        v = v.owner.operand
    return v


def _merge_varying(n: int, a: Pad | None, b: Pad | None) -> tuple[bool, ...]:
    out = [False] * n
    for p in (a, b):
        if p is not None:
            k = n - len(p.varying)
            for i, flag in enumerate(p.varying):
                out[k + i] = out[k + i] or flag
    return tuple(out)


def _operand_pad(v: SSAValue, p: Pad | None) -> float | str:
    """The value an operand has at the padded lanes: its padding, a constant, or data."""
    if p is not None:
        return p.value
    o = v.owner
    if isinstance(o, tl.ConstOp) and not isinstance(o.number, bool):
        return float(o.number)
    if isinstance(o, tl.FullOp) and isinstance(o.value.owner, tl.ConstOp):
        return float(o.value.owner.number)
    return "finite"  # data of the unmasked operand: assumed finite


def _unary_pad(fn: str, x: float | str) -> float | str:
    if isinstance(x, float):
        try:
            return {"neg": -x, "abs": abs(x), "exp": math.exp(x) if x < 709 else math.inf}.get(fn, "unknown")
        except (OverflowError, ValueError):
            return "unknown"
    if fn == "exp" and x in ("finite", "positive"):
        return "positive"
    if fn in ("neg", "abs") and x == "finite":
        return "finite"
    return "unknown"


def _binary_pad(fn: str, a: float | str, b: float | str) -> float | str:
    if isinstance(a, float) and isinstance(b, float):
        try:
            value = {
                "add": lambda: a + b,
                "sub": lambda: a - b,
                "mul": lambda: a * b,
                "maximum": lambda: max(a, b),
                "minimum": lambda: min(a, b),
            }[fn]()
        except (KeyError, ArithmeticError):
            return "unknown"
        return "unknown" if math.isnan(value) else value
    const, other = (a, b) if isinstance(a, float) else (b, a)
    if not isinstance(const, float):
        return (
            "finite"
            if fn in ("add", "sub", "mul") and a in ("finite", "positive") and b in ("finite", "positive")
            else "unknown"
        )
    if other not in ("finite", "positive"):
        return "unknown"
    if fn in ("add", "sub"):
        if math.isinf(const):
            return const if (fn == "add" or const is a) else -const
        return "finite"
    if fn == "mul":
        return 0.0 if const == 0.0 else ("finite" if math.isfinite(const) else "unknown")
    if fn == "maximum" and const == -math.inf or fn == "minimum" and const == math.inf:
        return other
    return "unknown"


@rule(
    "dataflow.masked-reduce",
    family="dataflow",
    severity="error",
    summary="a reduction includes masked-off lanes whose value is not the reduction's identity",
    explanation="""
A masked `load` gives its masked-off lanes `other` (0 when absent), and those lanes are still
part of the tile: a reduction over the tile includes them. They are harmless only when they
hold the reduction's identity: 0 for `sum`, 1 for `prod`, -inf for `max` and `argmax`, +inf
for `min` and `argmin`. The verifier follows the padding value through casts, arithmetic and
`where(mask, x, y)` from the load to each reduction along a dimension the mask varies in, and
reports a reduction whose padding is provably not its identity, when z3 shows the mask can be
false for some shape the `where` allows. The classic case is a softmax that loads with the
default `other` (0): the row maximum of an all-negative row becomes 0, and every padded lane
adds `exp(0 - max)` to the denominator.
""",
    bad="""
kernel softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask)
  e = exp(v - max(v, axis = 0))  # <-
  store(y[row, cols], e / sum(where(mask, e, 0.0), axis = 0), mask = mask)
}
""",
    good="""
kernel softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = -inf)
  e = exp(v - max(v, axis = 0))
  store(y[row, cols], e / sum(where(mask, e, 0.0), axis = 0), mask = mask)
}
""",
)
def check_masked_reduce(ctx: Context) -> Iterator[Diagnostic]:
    memo: dict = {}
    sym = ctx.symbolic
    for info in ctx.ops(tl.ReduceOp, tl.ArgReduceOp):
        op = info.op
        fn = op.fn.data
        identity = _IDENTITY.get(fn)
        if identity is None or not _is_float(op.operand):
            continue
        pad = _pad_of(op.operand, memo)
        axis = op.axis.data
        if pad is None or not pad.varying[axis] or not _not_identity(fn, pad.value):
            continue
        if _padding_never_wins(fn, pad, op.operand):
            continue
        lanes = sym.lanes(shape_of(pad.mask.type), f"pad{ctx.order[pad.load]}")
        m = sym.value(pad.mask, lanes)
        if m.tainted:
            continue
        cex = sym.counterexample(m.expr)
        if cex is None or "unknown" in cex:
            continue
        shown = readable({k: v for k, v in cex.items() if k in ctx.kernel.shape_symbols})
        held = _pad_text(pad.value)
        ident = {0.0: "0", 1.0: "1", -math.inf: "-inf", math.inf: "+inf"}[identity]
        other = ident if ident != "+inf" else "inf"
        fix = _other_edit(ctx, pad.load, other)
        reset = f"reset the masked lanes with where(mask, x, {other}) right before the {fn}"
        # the load's `other` is the padding here only when nothing in between changes it
        hint = f"give the load `other = {ident}` (the identity of {fn}), or {reset}" if fix is not None else ""
        if fix is None:
            # a padding that another reduction of the load needs may make this one right too
            # (`other = -inf` before `exp(v - max(v))` pads the `sum` of the exps with 0)
            padding = next((p for p in ("-inf", "0", "inf", "1") if _other_edit(ctx, pad.load, p) is not None), None)
            if padding is not None:
                fix = _other_edit(ctx, pad.load, padding)
                hint = f"give the load `other = {padding}`: its masked lanes then reach the {fn} as {ident}"
            else:
                fix = _reset_edit(ctx, op, pad.mask, other)
                hint = reset if fix is not None else ""
        yield ctx.report(
            op,
            f"{fn} along axis {axis} includes the lanes that the load's mask turns off (e.g. when "
            f"{format_counterexample(shown) or 'the mask is false'}); they hold {held}, not {fn}'s identity {ident}, "
            "so the result depends on the padding",
            hint=hint,
            related=[(pad.load, "the masked load")],
            counterexample=shown or None,
            edits=[fix],
        )


# ---- bounds of the kept lanes ---------------------------------------------------------------------

UNBOUNDED = (-math.inf, math.inf)


def _padding_never_wins(fn: str, pad: Pad, v: SSAValue) -> bool:
    """Whether a `max` (`min`) cannot pick the padding over the data: every lane the mask keeps
    is >= (<=) it. Ties do not matter to the value (they do to `argmax`, which is not judged).
    With every lane off the result is the padding instead of the identity; for data bounded by
    the padding that is as good an answer for no data."""
    if fn not in ("max", "min") or not isinstance(pad.value, float):
        return False
    lo, hi = _range(v, pad.mask, {})
    return lo >= pad.value if fn == "max" else hi <= pad.value


def _range(v: SSAValue, mask: SSAValue, memo: dict) -> tuple[float, float]:
    """Bounds (lo, hi) of the values of `v` at the lanes where `mask` holds, data taken as finite
    numbers of any sign: abs, exp, squares and sqrt are >= 0, maximum(x, c) >= c, and
    where(mask, x, y) is x there."""
    if v in memo:
        return memo[v]
    memo[v] = UNBOUNDED  # cycles (loop-carried values) are not followed
    memo[v] = out = _range_of(v, mask, memo)
    return out


def _range_of(v: SSAValue, mask: SSAValue, memo: dict) -> tuple[float, float]:
    op = v.owner
    if isinstance(op, tl.ConstOp) and not isinstance(op.number, bool):
        return float(op.number), float(op.number)
    if isinstance(op, tl.FullOp):
        return _range(op.value, mask, memo)
    if isinstance(op, tl.LoadOp):
        unsigned = dtype_of(v.type).startswith("u")
        return (0.0, math.inf) if unsigned else UNBOUNDED
    if isinstance(op, tl.ExpandDimsOp | tl.BroadcastOp | ex.ConvertLayoutOp):
        return _range(op.operand, mask, memo)
    if isinstance(op, tl.CastOp):
        # rounding and truncation toward zero keep the sign, not every other bound
        lo, hi = _range(op.operand, mask, memo)
        return (0.0 if lo >= 0 else -math.inf), (0.0 if hi <= 0 else math.inf)
    if isinstance(op, tl.UnaryOp):
        return _unary_range(op.fn.data, _range(op.operand, mask, memo))
    if isinstance(op, tl.BinaryOp):
        if op.fn.data == "mul" and op.lhs is op.rhs:
            lo, hi = _range(op.lhs, mask, memo)
            return (lo * lo if lo > 0 else hi * hi if hi < 0 else 0.0), max(lo * lo, hi * hi)
        return _binary_range(op.fn.data, _range(op.lhs, mask, memo), _range(op.rhs, mask, memo))
    if isinstance(op, tl.WhereOp):
        a = _range(op.lhs, mask, memo)
        if _through_shape(op.cond) is mask:
            return a  # the kept lanes take x
        b = _range(op.rhs, mask, memo)
        return min(a[0], b[0]), max(a[1], b[1])
    return UNBOUNDED


def _unary_range(fn: str, r: tuple[float, float]) -> tuple[float, float]:
    lo, hi = r
    if fn == "neg":
        return -hi, -lo
    if fn == "abs":
        return (lo if lo > 0 else -hi if hi < 0 else 0.0), max(-lo, hi)
    if fn in ("exp", "exp2", "sqrt", "rsqrt"):  # (exp underflows to 0)
        return 0.0, math.inf
    if fn in ("sigmoid",):
        return 0.0, 1.0
    if fn in ("tanh", "erf", "sin", "cos"):
        return -1.0, 1.0
    if fn in ("floor", "ceil"):
        return float(math.floor(lo) if math.isfinite(lo) else lo), float(math.ceil(hi) if math.isfinite(hi) else hi)
    return UNBOUNDED


def _binary_range(fn: str, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    if fn == "add":
        return a[0] + b[0], a[1] + b[1]
    if fn == "sub":
        return a[0] - b[1], a[1] - b[0]
    if fn == "maximum":
        return max(a[0], b[0]), max(a[1], b[1])
    if fn == "minimum":
        return min(a[0], b[0]), min(a[1], b[1])
    if fn == "mul":
        corners = [x * y for x in a for y in b]
        if not any(math.isnan(c) for c in corners):  # (0 * inf: no bound from the corners)
            return min(corners), max(corners)
    if fn in ("mul", "div") and a[0] >= 0 and b[0] >= 0:
        return 0.0, math.inf
    return UNBOUNDED


def _reset_edit(ctx: Context, op: tl.ReduceOp | tl.ArgReduceOp, mask: SSAValue, other: str) -> Edit | None:
    """The reduction's operand `x` made `where(mask, x, other)`, where the mask has a name, and
    checked (`first_fix`): the mask must be the one the lanes of `x` are padded under."""
    span, text = ctx.span(op), ctx.text_of(op)
    if span is None or text is None or not mask.name_hint or not text.startswith(f"{op.fn.data}("):
        return None
    start = len(op.fn.data) + 1
    depth, end = 0, start
    while end < len(text) and not (depth == 0 and text[end] in ",)"):
        depth += 1 if text[end] in "([" else -1 if text[end] in ")]" else 0
        end += 1
    operand = text[start:end].strip()
    value = "0.0" if other == "0" else "1.0" if other == "1" else other
    at = Span(span.line, span.col + start, span.line, span.col + end, span.file)
    found = first_fix(
        ctx, "dataflow.masked-reduce", span.line, [Edit(at, f"where({mask.name_hint}, {operand}, {value})")]
    )
    return found[0] if found else None


def _other_edit(ctx: Context, load: Operation, other: str) -> Edit | None:
    """The hint as an edit: `other = ...` given to a masked load that has none, inserted before
    its closing paren; only where, with that padding, no reduction the load reaches is wrong any
    more (a padding of -inf that also reaches a `sum` trades one error for another)."""
    assert isinstance(load, tl.LoadOp)
    span = ctx.span(load)
    lines = (ctx.program.source or "").splitlines()
    if load.other is not None or span is None or not 1 <= span.end_line <= len(lines):
        return None
    if lines[span.end_line - 1][span.end_col - 2 : span.end_col - 1] != ")":
        return None
    memo: dict = {("other", load): float(other)}
    for info in ctx.ops(tl.ReduceOp, tl.ArgReduceOp):
        op = info.op
        pad = _pad_of(op.operand, memo)
        if pad is None or pad.load is not load or not pad.varying[op.axis.data] or not _is_float(op.operand):
            continue
        if (
            op.fn.data in _IDENTITY
            and _not_identity(op.fn.data, pad.value)
            and not _padding_never_wins(op.fn.data, pad, op.operand)
        ):
            return None
    at = Span(span.end_line, span.end_col - 1, span.end_line, span.end_col - 1, span.file)
    return Edit(at, f", other = {other}")


def _is_float(v: SSAValue) -> bool:
    return dtype_of(v.type) not in tl.INT_DTYPES and dtype_of(v.type) != "i1"


def _not_identity(fn: str, value: float | str) -> bool:
    identity = _IDENTITY[fn]
    if isinstance(value, float):
        return value != identity
    if value == "positive":
        return fn in ("sum", "max", "min", "argmax", "argmin")
    if value == "finite":
        return fn in ("max", "min", "argmax", "argmin")
    return False


def _pad_text(value: float | str) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "-inf" if value < 0 else "+inf"
        return f"{value:g}"
    return {"finite": "finite values", "positive": "positive values"}.get(value, "some value")
