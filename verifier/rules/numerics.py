"""Numerics: programs that are well typed and in bounds but compute a poor or undefined answer.

- `numerics.low-precision-acc`: a sum of many terms accumulated in bf16/f16/fp8 (a `dot` or
  `wgmma` with a low-precision accumulator, or a loop-carried low-precision value updated by
  `+`);
- `numerics.low-precision-reduce`: a `sum`/`prod` (or `cumsum`/`cumprod`) over a long
  low-precision axis;
- `numerics.unshifted-exp`: a softmax whose `exp` is not shifted by the maximum;
- `numerics.int-overflow`: an i32 product that z3 shows can exceed the i32 range for shapes the
  `where` clause allows;
- `numerics.divide-by-zero`: an integer division or remainder by a value that can be zero, or a
  float division by a count of lanes (`sum(cast<f32>(keep))`) of a data-dependent condition.

They are warnings: the program has a meaning (the interpreter runs it and rounds as the
hardware would), but rarely the one intended.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import z3
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, ScalarType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from verifier.context import Context
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.symbolic import format_counterexample, readable

LOW_PRECISION = ("bf16", "f16", "f8e4m3", "f8e5m2")
MANTISSA_BITS = {"bf16": 8, "f16": 11, "f8e4m3": 4, "f8e5m2": 3}
LONG_REDUCTION = 256  # beyond this many terms a low-precision sum loses most of its digits


def _dtype(v: SSAValue) -> str | None:
    t = v.type
    return t.dtype.data if isinstance(t, ScalarType | TileType) else None


# ---- numerics.low-precision-acc ---------------------------------------------------------------------

_GEMM = """\
kernel gemm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global bf16[M, N])
  where M %% BM == 0, N %% BN == 0, K %% BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(%s[BM, BN])
  for k in 0 .. K / BK {
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<%s>(at, bt, acc)%s
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], %s)
}
"""


@rule(
    "numerics.low-precision-acc",
    family="numerics",
    severity="warning",
    summary="a long sum is accumulated in bf16, f16 or fp8",
    explanation="""
bf16 keeps 8 significant bits and f16 11: once an accumulator is 2^8 (2^11) times larger than
the terms added to it, each addition rounds most of the term away, and the error grows with
the number of terms. A `dot<bf16>` or a `wgmma` into a bf16/f16 accumulator rounds after every
K step; a loop that carries a bf16 value and adds to it (`acc = acc + x`) does the same across
iterations. Accumulate in f32 (`dot<f32>`, `zeros(f32[...])`) and cast once at the end:
tensor cores take bf16 inputs with an f32 accumulator at full speed.
""",
    bad=_GEMM % ("bf16", "bf16", "  # <-", "acc"),
    good=_GEMM % ("f32", "f32", "", "cast<bf16>(acc)"),
)
def check_low_precision_acc(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(tl.DotOp, ex.WgmmaOp):
        op = info.op
        acc = _dtype(op.res)
        if acc not in LOW_PRECISION:
            continue
        k = shape_of(op.lhs.type)[1] if isinstance(op, tl.DotOp) else None
        k_value = ctx.static(k) if k is not None else None
        steps = (
            f" over {k} = {k_value} products"
            if k_value is not None and str(k) != str(k_value)
            else (f" over {k} products" if k is not None else "")
        )
        looped = " and again in every iteration of the loop" if info.loops else ""
        edits, hint = f32_accumulator(ctx, op, ctx.current_rule.id)
        yield ctx.report(
            op,
            f"{op.name.removeprefix('kir.')} accumulates in {acc}{steps}{looped}: with {MANTISSA_BITS[acc]} significant "
            "bits, each step rounds away the low bits of the products",
            hint=hint,
            edits=edits,
        )
    for loop_info in ctx.ops(st.ForOp):
        loop = loop_info.op
        block = loop.body.block
        yielded = cast(st.YieldOp, block.last_op)  # a verified loop body ends with its yield
        for i, arg in enumerate(block.args[1:]):
            carried = _dtype(arg)
            if carried is None or carried not in LOW_PRECISION:
                continue
            update = yielded.values[i].owner
            if not (isinstance(update, tl.BinaryOp) and update.fn.data in ("add", "sub")):
                continue
            if arg not in (update.lhs, update.rhs):
                continue
            edits, hint = f32_accumulator(ctx, update, ctx.current_rule.id)
            yield ctx.report(
                update,
                f"`{arg.name_hint or 'the accumulator'}` is carried through the loop in {_dtype(arg)} and updated with "
                f"`{'+' if update.fn.data == 'add' else '-'}`: every iteration rounds the running sum to "
                f"{MANTISSA_BITS[carried]} significant bits",
                hint=hint,
                related=[(loop, "the loop")],
                edits=edits,
            )


def f32_accumulator(ctx: Context, op: Operation, rule_id: str) -> tuple[tuple[Edit, ...], str]:
    """The edits that carry the accumulation of `op` (a dot, a wgmma, or the `+` of a carried
    sum) in f32 and cast once where the sum leaves it, with their hint; ((), "") where they cannot
    be written out or do not remove the diagnostic of `rule_id` at `op`'s line."""
    span = ctx.span(op)
    low = _dtype(op.results[0])
    if span is None or low is None:
        return (), ""
    edits: list[Edit | None] = []
    said: list[str] = []
    if isinstance(op, tl.DotOp):
        edits.append(ctx.replace_in(op, f"dot<{low}>", "dot<f32>"))
        said.append("`dot<f32>`")
    acc = _accumulator_operand(op)
    final = op.results[0]
    if acc is not None:
        init = acc
        if isinstance(acc, BlockArgument) and isinstance(loop := acc.block.parent_op(), st.ForOp):
            init, final = loop.inits[acc.index - 1], loop.res[acc.index - 1]
            if cast(st.YieldOp, acc.block.last_op).values[acc.index - 1] is not op.results[0]:
                return (), ""
        if isinstance(init.owner, tl.ZerosOp):
            edits.append(ctx.replace_in(init.owner, f"zeros({low}[", "zeros(f32["))
            said.append("`zeros(f32[...])`")
        else:
            edits.append(
                _wrapped(ctx, ctx.span(init.owner) if isinstance(init.owner, Operation) else None, "cast<f32>")
            )
            said.append("the initial value cast to f32")
    if isinstance(op, tl.BinaryOp):
        term = op.rhs if op.lhs is acc else op.lhs
        narrowed = term.owner
        if isinstance(narrowed, tl.CastOp) and _dtype(narrowed.operand) == "f32":
            edits.append(_replaced(ctx, ctx.span(narrowed), ctx.text_of(ctx.operand_span(narrowed, narrowed.operand))))
            said.append("the term added in f32")
        else:
            edits.append(_wrapped(ctx, ctx.operand_span(op, term), "cast<f32>"))
            said.append("the term cast to f32")
    uses = [u.operation for u in final.uses if u.operation is not op]
    if not uses or any(isinstance(user, st.YieldOp) for user in uses):
        return (), ""
    edits += [_wrapped(ctx, ctx.operand_span(user, final), f"cast<{low}>") for user in uses]
    said.append(f"`cast<{low}>({final.name_hint or '...'})` where the sum is used")
    if any(e is None for e in edits):
        return (), ""
    made = first_fix(ctx, rule_id, span.line, [tuple(e for e in edits if e is not None)])
    if not made:
        return (), ""
    return made, f"accumulate in f32 and cast once at the end: {', '.join(said)}"


_SIGNS = {"add": "+", "sub": "-", "mul": "*"}


def _side_texts(ctx: Context, op: tl.BinaryOp) -> list[str] | None:
    """The texts of a binary op's two operands, where each is a name or an expression with a
    span of its own (a literal or a nested binary op, whose precedence would matter, gives None)."""
    out = []
    for side in (op.lhs, op.rhs):
        owner = side.owner
        if side.name_hint:
            out.append(side.name_hint)
        elif isinstance(owner, Operation) and not isinstance(owner, tl.BinaryOp) and (text := ctx.text_of(owner)):
            out.append(text)
        else:
            return None
    return out


def _accumulator_operand(op: Operation) -> SSAValue | None:
    """The running sum that `op` adds to: a dot's or wgmma's `acc`, the carried side of a `+`."""
    if isinstance(op, tl.DotOp | ex.WgmmaOp):
        return op.acc
    if isinstance(op, tl.BinaryOp):
        for side in (op.lhs, op.rhs):
            if isinstance(side, BlockArgument) and isinstance(side.block.parent_op(), st.ForOp):
                return side
    return None


def _wrapped(ctx: Context, span: Span | None, fn: str) -> Edit | None:
    """`span`'s text written as the argument of `fn`: `fn(text)`."""
    text = ctx.text_of(span)
    return _replaced(ctx, span, f"{fn}({text})" if text is not None else None)


def _replaced(ctx: Context, span: Span | None, text: str | None) -> Edit | None:
    return Edit(span, text) if span is not None and text is not None else None


# ---- numerics.low-precision-reduce ----------------------------------------------------------------------

_ROWSUM = """\
kernel rowsum<BLOCK = 1024>(x: global bf16[M, N], y: out global bf16[M])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  v = load(x[row, cols], mask = cols < N)
  store(y[row], %s)%s
}
"""


@rule(
    "numerics.low-precision-reduce",
    family="numerics",
    severity="warning",
    summary=f"a sum or product over more than {LONG_REDUCTION} bf16/f16/fp8 elements is computed in that dtype",
    explanation=f"""
A reduction is computed in its tile's dtype: `sum(x, axis = 0)` over a bf16 tile adds in bf16,
rounding every partial sum to 8 significant bits. Over a few dozen elements that is close to
the rounding of the result anyway; over hundreds (more than {LONG_REDUCTION}) the error of the
partial sums dominates and the sum can lose every digit of the small terms. `prod`, `cumsum`
and `cumprod` behave the same. Cast to f32 first, `sum(cast<f32>(x), axis = 0)`, and cast the
result back if needed.
""",
    bad=_ROWSUM % ("sum(v, axis = 0)", "  # <-"),
    good=_ROWSUM % ("cast<bf16>(sum(cast<f32>(v), axis = 0))", ""),
)
def check_low_precision_reduce(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(tl.ReduceOp, tl.ScanOp):
        op = info.op
        fn = op.fn.data
        if fn not in ("sum", "prod", "cumsum", "cumprod"):
            continue
        dtype = _dtype(op.operand)
        if dtype not in LOW_PRECISION:
            continue
        axis_extent = shape_of(op.operand.type)[op.axis.data]
        n = ctx.static(axis_extent)
        if n is None or n <= LONG_REDUCTION:
            continue
        edits, hint = _f32_reduction(ctx, op, dtype)
        yield ctx.report(
            op,
            f"{fn} over {n} {dtype} elements (axis {op.axis.data}, extent {axis_extent}) accumulates in {dtype}: "
            f"the partial sums keep {MANTISSA_BITS[dtype]} significant bits, so the small terms are rounded away",
            hint=hint,
            edits=edits,
        )


def _f32_reduction(ctx: Context, op: tl.ReduceOp | tl.ScanOp, low: str) -> tuple[tuple[Edit, ...], str]:
    """The edits that reduce in f32: the operand cast to f32, the result cast back to `low`
    (or, where the result is cast to f32 right away, that cast dropped)."""
    span = ctx.span(op)
    reduced = ctx.text_of(op)
    operand = ctx.operand_span(op, op.operand)
    if span is None or reduced is None or operand is None:
        return (), ""
    text = ctx.text_of(operand)
    inner = op.operand.owner
    if isinstance(inner, tl.CastOp) and _dtype(inner.operand) == "f32" and text is not None:
        widened = ctx.text_of(ctx.operand_span(inner, inner.operand))  # a cast<low>(f32) undone
    elif isinstance(inner, tl.BinaryOp) and inner.fn.data in _SIGNS and (sides := _side_texts(ctx, inner)):
        # the terms widened before they are combined: `v * v` overflows f16 above 256
        widened = f" {_SIGNS[inner.fn.data]} ".join(f"cast<f32>({side})" for side in sides)
    else:
        widened = f"cast<f32>({text})"
    start, end = operand.col - span.col, operand.end_col - span.col
    f32 = f"{reduced[:start]}{widened}{reduced[end:]}"
    users = [u.operation for u in op.res.uses]
    outer = users[0] if len(users) == 1 else None
    if isinstance(outer, tl.CastOp) and _dtype(outer.res) == "f32" and ctx.text_of(outer) is not None:
        candidates = [_replaced(ctx, ctx.span(outer), f32)]
        said = f"`{f32}` in place of `{ctx.text_of(outer)}`"
    else:
        candidates = [_replaced(ctx, span, f"cast<{low}>({f32})")]
        said = f"`cast<{low}>({f32})`"
    made = first_fix(ctx, ctx.current_rule.id, span.line, candidates)
    return (made, f"reduce in f32: {said}") if made else ((), "")


# ---- numerics.unshifted-exp -------------------------------------------------------------------------------

_SOFTMAX = """\
kernel softmax<BLOCK = 1024>(x: global bf16[M, N], y: out global bf16[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = cast<f32>(load(x[row, cols], mask = mask, other = -inf))
  e = exp(%s)%s
  store(y[row, cols], cast<bf16>(e / sum(e, axis = 0)), mask = mask)
}
"""


@rule(
    "numerics.unshifted-exp",
    family="numerics",
    severity="warning",
    summary="a softmax or a log-sum-exp takes exp of values that are not shifted by their maximum",
    explanation="""
`exp(x)` overflows f32 for x > 88.7 (bf16 and f16 much earlier: f16 at 11.1), and the
softmax `exp(x) / sum(exp(x))` then gives inf / inf = NaN; for very negative x every term
underflows to 0 and the division is 0 / 0. Softmax is shift-invariant, so the standard form
subtracts the row maximum first: `e = exp(x - max(x, axis = 0))` keeps every exponent at most
0 and the largest term exactly 1. The verifier flags an `exp` whose result is divided by a
sum of itself, or whose sum is taken the `log` of (`log(sum(exp(x)))`, a log-sum-exp: write it
`m + log(sum(exp(x - m)))`), when its argument is not `something - max(...)` (or a running
maximum built with `maximum(...)`, as in online softmax).
""",
    bad=_SOFTMAX % ("v", "  # <-"),
    good=_SOFTMAX % ("v - max(v, axis = 0)", ""),
)
def check_unshifted_exp(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(tl.BinaryOp):
        div = info.op
        if div.fn.data not in ("div", "mul") or not DTYPES[dtype_of(div.res.type)].is_float:
            continue
        exp = _normalized_exp(div)
        if exp is None or _shifted_by_max(exp.operand):
            continue
        total = _normalizing_sum(div, exp)
        edits: tuple[Edit, ...] = ()
        if total is not None and (shift := _shift(ctx, exp, total.axis.data)) is not None:
            edits = first_fix(ctx, ctx.current_rule.id, _line(ctx, exp), [shift[0]])
        yield ctx.report(
            exp,
            f"{exp.fn.data} of a value not shifted by its maximum, then divided by the sum of the {exp.fn.data}s: "
            "large inputs overflow to inf and give NaN (inf / inf), very negative ones underflow to 0 / 0",
            hint=f"subtract the maximum first, which leaves the softmax unchanged: `{shift[1]}`"
            if edits and shift
            else "",
            related=[(div, "the normalization")],
            edits=edits,
        )
    for unary in ctx.ops(tl.UnaryOp):  # log-sum-exp: log(sum(exp(x))) without the shift
        log = unary.op
        if log.fn.data not in ("log", "log2"):
            continue
        exp = _summed_exp(log.operand, depth=6)
        if exp is None or _shifted_by_max(exp.operand):
            continue
        lse = _shifted_log_sum_exp(ctx, log, exp)
        yield ctx.report(
            exp,
            f"{exp.fn.data} of a value not shifted by its maximum, summed, then its {log.fn.data}: inputs above about "
            "88 overflow the sum to inf (a log-sum-exp of inf), and very negative ones underflow it to log(0) = -inf",
            hint=lse[1] if lse[0] else "",
            related=[(log, "the log")],
            edits=lse[0],
        )


def _line(ctx: Context, op: Operation) -> int:
    span = ctx.span(op)
    return span.line if span else 0


def _normalizing_sum(op: tl.BinaryOp, exp: tl.UnaryOp) -> tl.ReduceOp | None:
    """The sum that `op` divides `exp` by (`e / sum(e)`, or `e * (1 / sum(e))`)."""
    sides = [op.rhs] if op.fn.data == "div" else [op.lhs, op.rhs]
    for side in sides:
        recip = _through_plain(side).owner
        if op.fn.data == "mul" and isinstance(recip, tl.BinaryOp) and recip.fn.data == "div":
            side = recip.rhs
        if (total := _sum_of(side, exp.res)) is not None:
            return total
    return None


def _sum_of(v: SSAValue, e: SSAValue) -> tl.ReduceOp | None:
    """The sum reduction of `e` that `v` is (as `_is_sum_of` finds it), or None."""
    v = _through_plain(v)
    op = v.owner
    if isinstance(op, tl.ReduceOp) and op.fn.data == "sum":
        return op if _derives_from(op.operand, e, depth=6) else None
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("add", "mul"):
        return _sum_of(op.lhs, e) or _sum_of(op.rhs, e)
    return None


def _spread(axis: int, rank: int) -> str:
    """The indexing that puts back the axis a reduction removed (`[:, None]` for axis 1 of 2)."""
    if rank < 2:
        return ""
    return "[" + ", ".join("None" if i == axis else ":" for i in range(rank)) + "]"


def _shift(ctx: Context, exp: tl.UnaryOp, axis: int, by: str | None = None) -> tuple[Edit, str] | None:
    """The edit that subtracts the maximum along `axis` (or the value named `by`) from the
    argument of `exp`, with the new text of the exp."""
    arg = ctx.operand_span(exp, exp.operand)
    text = ctx.text_of(arg)
    if arg is None or text is None:
        return None
    plain = exp.operand.name_hint is not None or isinstance(exp.operand.owner, tl.LoadOp | tl.CastOp)
    term = text if plain else f"({text})"
    spread = _spread(axis, len(shape_of(exp.operand.type)))
    shifted = f"{term} - {by or f'max({text}, axis = {axis})'}{spread}"
    return Edit(arg, shifted), f"{exp.fn.data}({shifted})"


def _shifted_log_sum_exp(ctx: Context, log: tl.UnaryOp, exp: tl.UnaryOp) -> tuple[tuple[Edit, ...], str]:
    """`m = max(x, axis = a)` on a line of its own before the exp, the exp of `x - m`, and `m +`
    before the log; log2 goes with exp2 and log with exp."""
    total = _summed_reduce(log.operand, depth=6)
    exp_span, log_span, source = ctx.span(exp), ctx.span(log), ctx.program.source
    if total is None or exp_span is None or log_span is None or source is None:
        return (), ""
    if (log.fn.data == "log2") != (exp.fn.data == "exp2"):
        return (), ""
    taken = {v.name_hint for info in ctx.infos for v in info.op.results} | {n for n, _ in ctx.kernel.args}
    name = next((n for n in ("m", "row_max", "m_max") if n not in taken), None)
    arg = ctx.text_of(ctx.operand_span(exp, exp.operand))
    shift = _shift(ctx, exp, total.axis.data, by=name)
    if name is None or arg is None or shift is None:
        return (), ""
    line = source.splitlines()[exp_span.line - 1]
    indent = line[: len(line) - len(line.lstrip())]
    defined = f"{name} = max({arg}, axis = {total.axis.data})"
    edits = (
        Edit(Span(exp_span.line, 1, exp_span.line, 1, exp_span.file), f"{indent}{defined}\n"),
        shift[0],
        Edit(Span(log_span.line, log_span.col, log_span.line, log_span.col, log_span.file), f"{name} + "),
    )
    made = first_fix(ctx, ctx.current_rule.id, exp_span.line, [edits])
    taken_log, exp_text = ctx.text_of(log) or "", ctx.text_of(exp) or ""
    shown = taken_log.replace(exp_text, shift[1]) if taken_log.count(exp_text) == 1 else f"{log.fn.data}(...)"
    return made, f"shift by the maximum: `{defined}`, then `{name} + {shown}`"


def _summed_reduce(v: SSAValue, depth: int) -> tl.ReduceOp | None:
    """The sum reduction that `_summed_exp` goes through."""
    if depth == 0 or isinstance(v, BlockArgument):
        return None
    op = _through_plain(v).owner
    if isinstance(op, tl.ReduceOp) and op.fn.data == "sum":
        return op
    if isinstance(op, tl.BinaryOp) and op.fn.data == "add":
        return _summed_reduce(op.lhs, depth - 1) or _summed_reduce(op.rhs, depth - 1)
    return None


def _summed_exp(v: SSAValue, depth: int) -> tl.UnaryOp | None:
    """The exp whose values `v` sums: `sum(exp(x))`, through casts, `where`, adds of sums."""
    if depth == 0 or isinstance(v, BlockArgument):
        return None
    v = _through_plain(v)
    op = v.owner
    if isinstance(op, tl.ReduceOp) and op.fn.data == "sum":
        return _exp_in(op.operand, depth)
    if isinstance(op, tl.BinaryOp) and op.fn.data == "add":
        return _summed_exp(op.lhs, depth - 1) or _summed_exp(op.rhs, depth - 1)
    return None


def _exp_in(v: SSAValue, depth: int) -> tl.UnaryOp | None:
    if depth == 0 or isinstance(v, BlockArgument):
        return None
    v = _through_plain(v)
    op = v.owner
    if isinstance(op, tl.UnaryOp) and op.fn.data in ("exp", "exp2"):
        return op
    if isinstance(op, tl.WhereOp):
        return _exp_in(op.lhs, depth - 1) or _exp_in(op.rhs, depth - 1)
    return None


def _normalized_exp(op: tl.BinaryOp) -> tl.UnaryOp | None:
    """The exp that `op` normalizes by its sum: `e / sum(e)`, or `e * (1 / sum(e))`."""
    candidates = [(op.lhs, op.rhs)] if op.fn.data == "div" else [(op.lhs, op.rhs), (op.rhs, op.lhs)]
    for numer, denom in candidates:
        exp = _through_plain(numer).owner
        if not (isinstance(exp, tl.UnaryOp) and exp.fn.data in ("exp", "exp2")):
            continue
        if op.fn.data == "mul":
            recip = _through_plain(denom).owner
            if not (isinstance(recip, tl.BinaryOp) and recip.fn.data == "div"):
                continue
            denom = recip.rhs
        if _is_sum_of(denom, exp.res):
            return exp
    return None


def _through_plain(v: SSAValue) -> SSAValue:
    """Skip casts, broadcasts and new axes, which do not change the values."""
    while isinstance(v.owner, (tl.CastOp, tl.ExpandDimsOp, tl.BroadcastOp, ex.ConvertLayoutOp)):
        v = v.owner.operand
    return v


def _is_sum_of(v: SSAValue, e: SSAValue) -> bool:
    """`v` is a sum reduction of `e` (through casts, broadcasts, `where` and loop carries)."""
    v = _through_plain(v)
    op = v.owner
    if isinstance(op, tl.ReduceOp) and op.fn.data == "sum":
        return _derives_from(op.operand, e, depth=6)
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("add", "mul"):
        return _is_sum_of(op.lhs, e) or _is_sum_of(op.rhs, e)
    return False


def _derives_from(v: SSAValue, e: SSAValue, depth: int) -> bool:
    if v is e:
        return True
    if depth == 0 or isinstance(v, BlockArgument):
        return False
    op = v.owner
    if isinstance(op, tl.WhereOp):
        return _derives_from(op.lhs, e, depth - 1) or _derives_from(op.rhs, e, depth - 1)
    if isinstance(op, (tl.CastOp, tl.ExpandDimsOp, tl.BroadcastOp, ex.ConvertLayoutOp)):
        return _derives_from(op.operand, e, depth - 1)
    return False


def _shifted_by_max(v: SSAValue) -> bool:
    """`v` is `x - m` with `m` derived from a max reduction or a running `maximum` (or a
    scaled version of such a difference)."""
    v = _through_plain(v)
    op = v.owner
    if isinstance(op, tl.BinaryOp) and op.fn.data == "mul":
        return _shifted_by_max(op.lhs) or _shifted_by_max(op.rhs)
    if isinstance(op, tl.BinaryOp) and op.fn.data == "sub":
        return _is_maximum(op.rhs, depth=6)
    if isinstance(op, tl.WhereOp):
        return _shifted_by_max(op.lhs) and _shifted_by_max(op.rhs)
    return False


def _is_maximum(v: SSAValue, depth: int) -> bool:
    if depth == 0:
        return False
    v = _through_plain(v)
    if isinstance(v, BlockArgument):
        owner = v.block.parent_op()
        if isinstance(owner, st.ForOp) and v.index >= 1:
            return _is_maximum(cast(st.YieldOp, owner.body.block.last_op).values[v.index - 1], depth - 1)
        return False
    op = v.owner
    if isinstance(op, tl.ReduceOp) and op.fn.data == "max":
        return True
    if isinstance(op, tl.BinaryOp) and op.fn.data == "maximum":
        return True
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("mul", "add", "sub"):
        return _is_maximum(op.lhs, depth - 1) or _is_maximum(op.rhs, depth - 1)
    if isinstance(op, tl.WhereOp):
        return _is_maximum(op.lhs, depth - 1) and _is_maximum(op.rhs, depth - 1)
    if isinstance(op, st.ForOp):
        i = list(op.results).index(cast(OpResult, v))
        return _is_maximum(cast(st.YieldOp, op.body.block.last_op).values[i], depth - 1)
    return False


# ---- numerics.int-overflow --------------------------------------------------------------------------------

I32_MAX = 2**31 - 1
_LIMITS = {"i8": 2**7, "i16": 2**15, "i32": 2**31, "u8": 2**8, "u16": 2**16, "u32": 2**32}


@rule(
    "numerics.int-overflow",
    family="numerics",
    severity="warning",
    summary="an i32 product of index values can overflow for shapes the `where` clause allows",
    explanation="""
Program ids, aranges, loop variables and shape symbols are i32, and i32 arithmetic wraps.
A product of two run-time sizes, typically a flattened offset `row * N + col`, exceeds
2^31 - 1 once the tensor has more than 2^31 elements, even though each shape symbol fits:
the offset wraps negative and the kernel reads or writes the wrong place (and the bounds
check, done on the wrapped value, may pass). The verifier asks z3 for shape values, all at
most 2^31 - 1 and allowed by `where`, and program ids for which the product leaves the i32
range; products with a compile-time constant (`program_id(0) * BLOCK`) are bounded by the
grid and are not reported. Index in several dimensions (`x[row, cols]`), compute the offset
in i64 (`cast<i64>(row) * cast<i64>(N)`), or bound the shapes in `where`.
""",
    bad="""
kernel flatten<BLOCK = 256>(x: global f32[M, N], y: out global f32[M * N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  offs = row * N + cols  # <-
  store(y[offs], load(x[row, cols], mask = mask), mask = mask)
}
""",
    good="""
kernel flatten<BLOCK = 256>(x: global f32[M, N], y: out global f32[M * N])
  where N <= BLOCK, M * N < 2147483648
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  offs = row * N + cols
  store(y[offs], load(x[row, cols], mask = mask), mask = mask)
}
""",
)
def check_int_overflow(ctx: Context) -> Iterator[Diagnostic]:
    sym = ctx.symbolic
    bounded = [sym.names[n] <= I32_MAX for n in ctx.kernel.shape_symbols if n in sym.names]
    for info in ctx.ops(tl.BinaryOp):
        op = info.op
        if op.fn.data not in ("mul", "shl"):
            continue
        dtype = _dtype(op.res)
        if dtype not in _LIMITS:
            continue
        lanes = sym.lanes(shape_of(op.res.type), f"ovf{ctx.order[op]}")
        a, b = sym.at(op.lhs, lanes), sym.at(op.rhs, lanes)
        if a.tainted or b.tainted or z3.is_int_value(z3.simplify(a.expr)) or z3.is_int_value(z3.simplify(b.expr)):
            continue  # unknown, or scaled by a constant (bounded by the grid and the loops)
        term = sym.at(op.res, lanes)
        if term.tainted:
            continue
        limit = _LIMITS[dtype]
        low = 0 if DTYPES[dtype].kind == "uint" else -limit
        high = limit - 1
        claim = z3.And(term.expr >= low, term.expr <= high)
        # a division by zero inside the term is numerics.divide-by-zero's finding, not this one's
        nonzero = [d != 0 for d in _divisors(term.expr)]
        cex = sym.counterexample(claim, [*bounded, *nonzero], evaluate={"__value": term.expr})
        if cex is None or "unknown" in cex:
            continue
        value = cex.pop("__value")
        shown = readable({k: v for k, v in cex.items() if not k.startswith("lane")}, len(ctx.kernel.grid.data))
        edits, hint = _overflow_fix(ctx, op)
        yield ctx.report(
            op,
            f"this {dtype} product can leave the {dtype} range [{low}, {high}]: with {format_counterexample(shown)} "
            f"it is {value}, and {dtype} arithmetic wraps",
            hint=hint,
            counterexample={**shown, "value": value},
            edits=edits,
        )


def _overflow_fix(ctx: Context, op: tl.BinaryOp) -> tuple[tuple[Edit, ...], str]:
    """The product computed in i64 (its operands cast, and the other operand of each op that
    combines it with an i32 value), else a bound on the shapes in `where`: the element count of
    a tensor the kernel takes, below 2^31."""
    span = ctx.span(op)
    if span is None:
        return (), ""
    wide: list[Edit | None] = [_wrapped(ctx, ctx.operand_span(op, side), "cast<i64>") for side in (op.lhs, op.rhs)]
    widened = []
    for use in op.res.uses:
        user = use.operation
        if isinstance(user, tl.BinaryOp) and user.fn.data in _SIGNS:
            other = user.rhs if user.lhs is op.res else user.lhs
            wide.append(_wrapped(ctx, ctx.operand_span(user, other), "cast<i64>"))
            widened.append(_text(other))
    i64 = tuple(e for e in wide if e is not None) if all(wide) else None
    counts: list[str] = []
    for _, arg in ctx.kernel.args:
        dims = [str(d.data) for d in arg.type.shape.data] if isinstance(arg.type, GlobalType) else []
        count = " * ".join(d if d.isidentifier() or d.isdigit() or len(dims) == 1 else f"({d})" for d in dims)
        if count and not count.isidentifier() and not count.isdigit() and count not in counts:
            counts.append(count)
    wheres = [ctx.state_in_where(f"{count} < {I32_MAX + 1}") for count in counts[:3]]
    made = first_fix(ctx, ctx.current_rule.id, span.line, [i64, *wheres])
    if not made:
        return (), ""
    if made == i64:
        also = (
            f", and what it is combined with cast too: `cast<i64>({'`, `cast<i64>('.join(widened)})`" if widened else ""
        )
        return made, f"compute the offset in i64: `cast<i64>({_text(op.lhs)}) * cast<i64>({_text(op.rhs)})`{also}"
    bound = made[0].text.removeprefix(", ").removeprefix("where ").strip()
    return made, f"bound the shapes: add `{bound}` to the `where` clause"


def _text(v: SSAValue) -> str:
    if isinstance(v.owner, tl.SymValueOp):
        return v.owner.symbol.data
    return v.name_hint or "..."


def _divisors(e: z3.ExprRef) -> list[z3.ArithRef]:
    """The divisors of the integer divisions and remainders inside a term."""
    out: list[z3.ArithRef] = []
    seen: set[int] = set()
    stack = [e]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_app_of(t, z3.Z3_OP_IDIV) or z3.is_app_of(t, z3.Z3_OP_MOD):
            out.append(t.arg(1))
        stack += list(t.children())
    return out


# ---- numerics.divide-by-zero -------------------------------------------------------------------------------


@rule(
    "numerics.divide-by-zero",
    family="numerics",
    severity="warning",
    summary="an integer division or remainder by a value that can be zero, or a float division by an empty count",
    explanation="""
Integer `/` and `%` by zero are undefined on the hardware (a GPU returns garbage, a CPU traps);
the reference interpreter gives -1 and x, which hides it. A divisor computed from shape symbols
(`N - 1`, `K / BK`, `M % BM`) is zero for some shapes unless `where` excludes them. The
verifier asks z3 whether the divisor can be 0 under the `where` constraints, the grid and the
enclosing `if`s; a divisor loaded from memory is not judged. Guard the division, or state the
assumption in `where` (`where N >= 2`), which the interpreter then checks at launch.

A float division by a count of lanes, `sum(x) / sum(cast<f32>(keep))` (a masked mean), is 0 / 0
= NaN for a row where no lane is kept. When `keep` depends on data (a padding mask loaded from
memory), nothing rules that row out: divide by `maximum(count, 1.0)`.
""",
    bad="""
kernel ramp<BLOCK = 256>(y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  inc = 1000 / (N - 1)  # <-
  store(y[offs], cast<f32>(offs * inc), mask = mask)
}
""",
    good="""
kernel ramp<BLOCK = 256>(y: out global f32[N])
  where N >= 2
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  inc = 1000 / (N - 1)
  store(y[offs], cast<f32>(offs * inc), mask = mask)
}
""",
)
def check_divide_by_zero(ctx: Context) -> Iterator[Diagnostic]:
    yield from _empty_counts(ctx)
    sym = ctx.symbolic
    for info in ctx.ops(tl.BinaryOp):
        op = info.op
        if op.fn.data not in ("div", "rem") or DTYPES[dtype_of(op.res.type)].is_float:
            continue
        lanes = sym.lanes(shape_of(op.res.type), f"div{ctx.order[op]}")
        d = sym.at(op.rhs, lanes)
        if d.tainted:
            continue
        if z3.is_int_value(z3.simplify(d.expr)) and z3.simplify(d.expr).as_long() != 0:
            continue
        path = sym.path(op)
        assume = [] if path.tainted else [path.expr]
        cex = sym.counterexample(d.expr != 0, assume)
        if cex is None or "unknown" in cex:
            continue
        shown = readable({k: v for k, v in cex.items() if not k.startswith("lane")}, len(ctx.kernel.grid.data))
        sign = "/" if op.fn.data == "div" else "%"
        if z3.is_int_value(z3.simplify(d.expr)):
            what = "by the constant 0"
        elif shown:
            what = f"by a divisor that is 0 when {format_counterexample(shown)}"
        else:
            what = "by a divisor that can be 0"
        assumption = _nonzero_bound(ctx, d.expr, assume, cex)
        edits = first_fix(
            ctx, ctx.current_rule.id, _line(ctx, op), [ctx.state_in_where(assumption)] if assumption else []
        )
        yield ctx.report(
            op,
            f"integer `{sign}` {what}: undefined on the hardware (the interpreter gives "
            + ("-1" if sign == "/" else "the dividend")
            + ")",
            hint=f"state the assumption in `where`: `{assumption}`" if edits else "",
            counterexample=shown,
            edits=edits,
        )


def _nonzero_bound(ctx: Context, divisor: z3.ArithRef, assume: list, cex: dict) -> str | None:
    """`S >= n` for the one shape symbol S that the divisor's zeros depend on: the least n past
    every counterexample, found by raising the bound past each (a few rounds at most)."""
    sym = ctx.symbolic
    symbols = [n for n in ctx.kernel.shape_symbols if n in cex and n in sym.names]
    if len(symbols) != 1:
        return None
    name = symbols[0]
    for _ in range(8):
        if not isinstance(cex.get(name), int):
            return None
        bound = cex[name] + 1
        cex = sym.counterexample(divisor != 0, [*assume, sym.names[name] >= bound])
        if cex is None:
            return f"{name} >= {bound}"
        if "unknown" in cex or cex.get(name, bound) < bound:
            return None
    return None


def _empty_counts(ctx: Context) -> Iterator[Diagnostic]:
    """A float division by a count of lanes, `sum(cast<f32>(keep))`, whose condition depends on
    data (a padding mask loaded from memory): a row where no lane holds gives 0 / 0 = NaN."""
    sym = ctx.symbolic
    for info in ctx.ops(tl.BinaryOp):
        op = info.op
        if op.fn.data != "div" or not DTYPES[dtype_of(op.res.type)].is_float:
            continue
        count = _through_plain(op.rhs)
        reduce = count.owner
        if not (isinstance(reduce, tl.ReduceOp) and reduce.fn.data == "sum"):
            continue
        cond = _through_plain(reduce.operand)  # through the cast of the flags to a number
        if cond is reduce.operand or dtype_of(cond.type) != "i1":
            continue
        if any(isinstance(u.operation, tl.WhereOp) for u in op.res.uses):
            continue  # the quotient is chosen away where the count is 0 (or so it seems)
        lanes = sym.lanes(shape_of(cond.type), f"count{ctx.order[reduce]}")
        term = sym.at(cond, lanes)
        if not term.tainted:
            continue  # a condition on indices: whether it can be empty is the bounds rules' business
        name = count.name_hint or "the count"
        flag = cond.name_hint or "the condition"
        yield ctx.report(
            op,
            f"this division is by `{name}`, the number of lanes where `{flag}` holds, which is 0 when no lane does "
            f"(`{flag}` depends on {term.why}): 0 / 0 gives NaN for that row",
            hint=f"divide by maximum({name}, 1.0), or choose the result with where({name} > 0.0, ..., 0.0)",
            related=[(reduce, "the count")],
            edits=[ctx.replace_in(op, f"/ {name}", f"/ maximum({name}, 1.0)")],
        )
