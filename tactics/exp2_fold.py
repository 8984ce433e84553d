"""`exp2-fold`: exponentials in base 2, with log2(e) folded into the scale their arguments
already take.

    scale = rsqrt(cast<f32>(HD))                  scale = rsqrt(cast<f32>(HD)) * 1.4426950408889634
    s = dot<f32>(qt, trans(kt)) * scale     ->    s = dot<f32>(qt, trans(kt)) * scale
    m_new = maximum(m_i, max(s, axis = 1))        m_new = maximum(m_i, max(s, axis = 1))
    p = exp(s - m_new[:, None])                   p = exp2(s - m_new[:, None])
    alpha = exp(m_i - m_new)                      alpha = exp2(m_i - m_new)

The GPU's exponential is base 2 (`ex2.approx`): `exp(x)` is lowered as `ex2(x * log2(e))`, one
multiply per element before each exponential. Where the exponentials' arguments are all made
from values scaled once by a scalar (attention's 1 / sqrt(D)), log2(e) can go into that scalar,
computed once a program, and the multiplies go.

What is recognised: every `exp` of the kernel, and the values its argument is made from (its
*domain*), closed both ways: a value of the domain is made by `-`, `+`, `maximum`, `minimum`,
`max` or `min` along an axis, a broadcast, a transpose, a reshape, `where` (either branch) or a
loop's carried value from values of the domain; or it is the constant 0, -inf or inf; or it is
a *source*, `x * c` with c a float scalar computed outside every loop. Each use of a value of
the domain is another op of the domain or an `exp` (a value the fold leaves as it is, such as
a loop's start at -inf, may be used anywhere), and no source scales a value of the domain
again. Each op of the domain is positively
homogeneous (f(k a, k b) = k f(a, b) for k > 0) and the constants are unchanged when scaled, so
multiplying every source by log2(e) multiplies every value of the domain by log2(e), and
`exp(d) = exp2(d * log2(e))`. Refused where an argument is made otherwise (a loaded value, a
constant of another value, a product of two tiles) or a value of the domain is used otherwise
(stored, compared, added to a value of another unit): folding would change it.

Numerics: approximate. `c * log2(e)` rounds once, `x * (c log2(e))` rounds where `(x * c)` did,
and `exp2(y)` is not `exp(y / log2(e))` to the last bit: each exponent moves by about 2^-24 of
its size, far inside the tolerance of a bf16 or f32 task (the row max keeps the exponents <= 0).
f32 and f64 domains only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, Operation, SSAValue

from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp, KernelOp, YieldOp
from kir.dialect.tile import (
    BinaryOp,
    BroadcastOp,
    ConstOp,
    ExpandDimsOp,
    FullOp,
    ReduceOp,
    ReshapeOp,
    TransOp,
    UnaryOp,
    WhereOp,
    ZerosOp,
)
from kir.dialect.types import ScalarType, dtype_of
from kir.program import Program, set_span, span_of
from kir.spans import copy_source_notes
from tactics import _grid, ir
from tactics.base import Tactic, not_applicable
from tactics.registry import register

NAME = "exp2-fold"
LOG2E = 1.4426950408889634  # log2(e), the f64 nearest

_LINEAR = ("add", "sub", "maximum", "minimum")
_MOVES = ExpandDimsOp | BroadcastOp | TransOp | ReshapeOp


def exps(program: Program) -> list[UnaryOp]:
    """The `exp` ops of the kernel, in the order of the text."""
    return [op for op in program.kernel.walk() if isinstance(op, UnaryOp) and op.fn.data == "exp"]


class NotScaled(Exception):
    """A value of the domain made or used in a way that scaling would change."""

    def __init__(self, op: Operation | None, why: str):
        super().__init__(why)
        self.op, self.why = op, why


@dataclass
class Domain:
    """The values the exponentials' arguments are made from, and the sources among them."""

    values: set[SSAValue] = field(default_factory=set)
    sources: dict[BinaryOp, int] = field(default_factory=dict)  # `x * c` -> the index of c


def _scale_operand(op: BinaryOp) -> int | None:
    """Which operand of `x * c` is the scale: a float scalar computed outside every loop."""
    for index in (1, 0):
        c = op.operands[index]
        owner = c.owner
        if (
            isinstance(c.type, ScalarType)
            and isinstance(owner, Operation)
            and isinstance(owner.parent_op(), KernelOp)
            and dtype_of(c.type) in ("f32", "f64")
        ):
            return index
    return None


def _carried(v: SSAValue) -> tuple[ForOp, int] | None:
    """(loop, i) when `v` is the loop's i-th carried value (its body's argument i + 1)."""
    if isinstance(v, BlockArgument):
        loop = v.block.parent_op()
        if isinstance(loop, ForOp) and v.index > 0:
            return loop, v.index - 1
    return None


def domain(program: Program) -> Domain:
    """The domain of the kernel's exponentials; `NotScaled` where it is not closed."""
    found = Domain()
    sinks = set(exps(program))
    made_from: dict[SSAValue, list[SSAValue]] = {}
    other_uses: dict[SSAValue, Operation] = {}
    todo = [op.operand for op in sinks]
    while todo:
        v = todo.pop()
        if v in found.values:
            continue
        found.values.add(v)
        made_from[v] = _made_from(v, found)
        todo += made_from[v]
        users, other = _used_by(v, sinks)
        todo += users
        if other is not None:
            other_uses[v] = other
    if not found.sources:
        raise NotScaled(None, "no value the exponentials' arguments are made from is scaled")
    # the values the fold changes: the sources and what is made from them (a constant, or a
    # loop's start at -inf, is the same scaled: its other uses do not matter)
    changed: set[SSAValue] = {source.res for source in found.sources}
    grew = True
    while grew:
        grew = False
        for v, parts in made_from.items():
            if v not in changed and any(p in changed for p in parts):
                changed.add(v)
                grew = True
    for source, index in found.sources.items():
        if source.operands[1 - index] in found.values:
            raise NotScaled(source, "a value of the exponents is scaled again: the fold would scale it twice")
    for v, user in other_uses.items():
        if v in changed:
            raise NotScaled(user, f"`{v.name_hint or 'an exponent'}` is used other than in an exponent")
    return found


def _made_from(v: SSAValue, found: Domain) -> list[SSAValue]:
    """The values of the domain that `v` is made from."""
    carried = _carried(v)
    if carried is not None:
        loop, i = carried
        last = loop.body.block.last_op
        assert isinstance(last, YieldOp)
        return [loop.inits[i], last.values[i], loop.res[i]]
    op = v.owner
    if isinstance(op, ForOp):
        return [op.body.block.args[1 + next(i for i, r in enumerate(op.res) if r is v)]]
    if not isinstance(op, Operation):
        raise NotScaled(None, f"`{v.name_hint or 'a value'}` is an argument of the kernel")
    if dtype_of(v.type) not in ("f32", "f64"):
        raise NotScaled(op, f"the exponent is {dtype_of(v.type)}; the fold is for f32 and f64")
    if isinstance(op, BinaryOp) and op.fn.data == "mul":
        scale = _scale_operand(op)
        if scale is None:
            raise NotScaled(op, "a product that is not a value times a scalar computed before the loops")
        found.sources[op] = scale
        return []
    if isinstance(op, BinaryOp) and op.fn.data in _LINEAR:
        return [op.lhs, op.rhs]
    if isinstance(op, ReduceOp) and op.fn.data in ("max", "min"):
        return [op.operand]
    if isinstance(op, _MOVES):
        return [op.operand]
    if isinstance(op, WhereOp):
        return [op.lhs, op.rhs]
    if isinstance(op, FullOp):
        return [op.value]
    if isinstance(op, ZerosOp):
        return []
    if isinstance(op, ConstOp) and op.number in (0.0, float("inf"), float("-inf")):
        return []
    what = f"the constant {op.value.data}" if isinstance(op, ConstOp) else f"`{op.name.removeprefix('kir.')}`"
    raise NotScaled(op, f"an exponent is made from {what}, which scaling would change")


def _used_by(v: SSAValue, sinks: set[UnaryOp]) -> tuple[list[SSAValue], Operation | None]:
    """The values of the domain that use `v`, and a use that leaves the domain (if any)."""
    out: list[SSAValue] = []
    other: Operation | None = None
    for use in v.uses:
        user = use.operation
        if user in sinks:
            continue
        if isinstance(user, YieldOp) and isinstance(user.parent_op(), ForOp):
            loop = user.parent_op()
            assert isinstance(loop, ForOp)
            out.append(loop.body.block.args[1 + use.index])
        elif isinstance(user, ForOp) and use.index >= 3:
            out.append(user.body.block.args[use.index - 2])
        elif (
            (isinstance(user, BinaryOp) and user.fn.data in _LINEAR)
            or (isinstance(user, ReduceOp) and user.fn.data in ("max", "min"))
            or isinstance(user, _MOVES | FullOp)
            or (isinstance(user, WhereOp) and use.index > 0)
        ):
            out.append(user.results[0])
        elif other is None:
            other = user
    return out, other


def _check(program: Program, target: str) -> list[Diagnostic]:
    found = exps(program)
    if not found:
        return [not_applicable(NAME, "no-exp", program.span(), "the kernel computes no exp")]
    try:
        domain(program)
    except NotScaled as err:
        where = err.op if err.op is not None else found[0]
        return [
            not_applicable(
                NAME,
                "not-scaled",
                ir.span(program, where),
                err.why,
                "the tactic folds log2(e) into a scalar that every exponent is scaled by "
                "(s = x * scale; exp(s - max(s))); the exponents' other values must be unchanged by scaling",
            )
        ]
    return []


def _rewrite(program: Program) -> None:
    found = domain(program)
    folded: dict[SSAValue, SSAValue] = {}
    taken = _grid.taken_names(program)
    for source, index in found.sources.items():
        scale = source.operands[index]
        if scale not in folded:
            folded[scale] = _fold(scale, found, taken)
        operands = list(source.operands)
        operands[index] = folded[scale]
        source.operands = operands
    for op in exps(program):
        new = UnaryOp("exp2", op.operand)
        copy_source_notes(op, new)
        new.res.name_hint = op.res.name_hint
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(new, op)
        op.res.replace_all_uses_with(new.res)
        block.erase_op(op)


def _fold(scale: SSAValue, found: Domain, taken: set[str]) -> SSAValue:
    """`scale * log2(e)`, computed where `scale` is. It takes the scale's name where the
    sources are the scale's only uses (`scale = rsqrt(...) * 1.44...`), else a new one."""
    op = scale.owner
    assert isinstance(op, Operation)
    block = op.parent_block()
    assert block is not None
    const = ConstOp(LOG2E, dtype_of(scale.type))
    product = BinaryOp("mul", scale, const.res)
    for new in (const, product):
        set_span(new, span_of(op))
    block.insert_op_after(const, op)
    block.insert_op_after(product, const)
    only_sources = all(use.operation in found.sources or use.operation is product for use in scale.uses)
    if only_sources:
        product.res.name_hint, scale.name_hint = scale.name_hint, None
    else:
        product.res.name_hint = _grid.fresh(f"{scale.name_hint or 'scale'}_log2e", taken)
    return product.res


EXP2_FOLD = register(
    Tactic(
        name=NAME,
        summary="exp(x) -> exp2(x), log2(e) folded into the scalar that scales every exponent",
        explain=__doc__ or "",
        params=(),
        numerics="approximate",
        check=_check,
        rewrite=_rewrite,
        examples=("kir tactics apply benchmarks/tasks/causal_attention/seed.kir exp2-fold",),
    )
)
