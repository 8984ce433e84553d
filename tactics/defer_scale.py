"""`defer-scale`: multiply by a positive scale after a row max instead of before it, and inside
the subtraction that uses the scores (where it fuses into one FMA).

    s = dot<f32>(qt, trans(kt)) * scale           s = dot<f32>(qt, trans(kt))
    m_new = maximum(m_i, max(s, axis = 1))   ->   m_new = maximum(m_i, max(s, axis = 1) * scale)
    p = exp2(s - m_new[:, None])                  p = exp2(s * scale - m_new[:, None])

A product `x * c` (c a positive scalar) is taken apart: the values made from it by ops that
commute with a positive scale (a row `max` or `min`, `where` with 0 or an infinity on the other
side, broadcasts, transposes, reshapes) are computed from x, and where such a value is used by
anything else, it is multiplied by c there. A score used by a row max and by the exponent's
subtraction (flash attention's) then costs one FMA (`s * c - m`) instead of a multiply and a
subtraction: one instruction a score less, on the units the softmax is bound by (tuned
causal_attention's `max(s, axis = 1) * qk_scale` and `s * qk_scale - m_new[:, None]`).

Exact: rounding is monotone, so for c > 0 the max of the rounded products is the rounded product
of the max (bitwise, but for which of +0 and -0 a row's max picks), `where(m, x, -inf) * c` is
`where(m, x * c, -inf)` (-inf * c = -inf, 0 * c = 0), and a broadcast or transpose moves values
unchanged; each use outside that set reads `x' * c`, the value it read. c must be positive and
finite: a positive constant, a shape symbol or a parameter of positive value, their casts,
square roots, reciprocal square roots, sums, products and quotients (1 / sqrt(D) * log2(e)).
(On the GPU the compiler may fuse `s * c - m` into an FMA, which rounds once where the two
did: that is the point, and it is within any tolerance.)

Offered for a product of a float tile by such a scalar whose values reach a row max or min (the
multiplies saved); `site` counts them in the order of the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Block, Operation, SSAValue

from kir.diagnostics import Diagnostic
from kir.dialect.tile import (
    BinaryOp,
    BroadcastOp,
    CastOp,
    ConstOp,
    ExpandDimsOp,
    ReduceOp,
    ReshapeOp,
    SymValueOp,
    TransOp,
    UnaryOp,
    WhereOp,
)
from kir.dialect.types import ScalarType, TileType, dtype_of
from kir.dtypes import DTYPES
from kir.program import Program, set_span
from tactics import ir
from tactics.base import IntRange, Param, Tactic, not_applicable
from tactics.registry import register

NAME = "defer-scale"

_MOVES = ExpandDimsOp | BroadcastOp | TransOp | ReshapeOp


def positive(program: Program, v: SSAValue) -> bool:
    """Whether the scalar `v` is positive and finite by how it is made (see the docstring)."""
    op = v.owner
    if not isinstance(op, Operation) or not isinstance(v.type, ScalarType):
        return False
    if isinstance(op, ConstOp):
        n = op.number
        return not isinstance(n, bool) and 0 < n < float("inf")
    if isinstance(op, SymValueOp):
        name = op.symbol.data
        return name in program.kernel.shape_symbols or program.params.get(name, 0) > 0
    if isinstance(op, CastOp):
        return DTYPES[dtype_of(op.res.type)].bits >= 16 and positive(program, op.operand)
    if isinstance(op, UnaryOp):
        return op.fn.data in ("sqrt", "rsqrt") and positive(program, op.operand)
    if isinstance(op, BinaryOp):
        return op.fn.data in ("add", "mul", "div") and positive(program, op.lhs) and positive(program, op.rhs)
    return False


@dataclass
class Deferred:
    """One product `x * c` taken apart: the values made from it that commute with c, and the
    uses (op, operand index) that read one of them and multiply by c there."""

    product: BinaryOp
    scale: int  # the operand index of c
    region: list[SSAValue] = field(default_factory=list)
    uses: list[tuple[Operation, int]] = field(default_factory=list)

    @property
    def reduces(self) -> bool:
        return any(isinstance(v.owner, ReduceOp) for v in self.region)


def _commutes(user: Operation, index: int) -> bool:
    """Whether `user`'s result is its operand `index` scaled, when that operand is (by c > 0)."""
    if isinstance(user, ReduceOp):
        return user.fn.data in ("max", "min")
    if isinstance(user, _MOVES):
        return True
    if isinstance(user, WhereOp) and index > 0:
        other = user.operands[3 - index].owner
        return isinstance(other, ConstOp) and float(other.number) in (0.0, float("inf"), float("-inf"))
    return False


def _scale_of(program: Program, op: BinaryOp) -> int | None:
    if op.fn.data != "mul" or not isinstance(op.res.type, TileType) or not DTYPES[dtype_of(op.res.type)].is_float:
        return None
    for index in (1, 0):
        if isinstance(op.operands[1 - index].type, TileType) and positive(program, op.operands[index]):
            return index
    return None


def deferred(program: Program, op: BinaryOp) -> Deferred | None:
    scale = _scale_of(program, op)
    if scale is None:
        return None
    found = Deferred(op, scale)
    todo: list[SSAValue] = [op.res]
    while todo:
        v = todo.pop()
        if v in found.region:
            continue
        found.region.append(v)
        for use in v.uses:
            if _commutes(use.operation, use.index):
                todo.append(use.operation.results[0])
            else:
                found.uses.append((use.operation, use.index))
    return found


def sites(program: Program) -> list[Deferred]:
    """The products the tactic takes apart, in the order of the text."""
    out = []
    for op in program.kernel.walk():
        if isinstance(op, BinaryOp):
            found = deferred(program, op)
            if found is not None and found.reduces:
                out.append(found)
    return out


def _check(program: Program, target: str) -> list[Diagnostic]:
    if sites(program):
        return []
    scaled = [
        op
        for op in program.kernel.walk()
        if isinstance(op, BinaryOp) and (found := deferred(program, op)) is not None and not found.reduces
    ]
    return [
        not_applicable(
            NAME,
            "no-max",
            ir.span(program, scaled[0]) if scaled else program.span(),
            "no value of the scaled tile reaches a row max or min"
            if scaled
            else "no tile is scaled by a positive scalar",
            "the tactic moves `x * c` (c > 0) past max(x, axis) into the uses, where the multiply is per row "
            "or fuses into a subtraction",
        )
    ]


_validate, _domains = ir.site_choice(NAME, "scaled tiles whose values reach a row max", sites, lambda d: d.product)


def _inline_start(v: SSAValue, block: Block) -> Operation | None:
    """The first op of the expression the text writes inline as `v` in `block`, if any."""
    owner = v.owner
    if not (isinstance(owner, Operation) and owner.parent_block() is block and v.name_hint is None and v.has_one_use()):
        return None
    first = owner
    for operand in owner.operands:
        inner = _inline_start(operand, block)
        if inner is not None and inner.is_before_in_block(first):
            first = inner
    return first


def _position(user: Operation, index: int) -> Operation:
    """Where the parser would emit `r * c` written as operand `index` of `user`: before the
    later operands' expressions and the literals (which it emits last), else before `user`."""
    block = user.parent_block()
    assert block is not None
    first = user
    for j, v in enumerate(user.operands):
        if j == index:
            continue
        start = _inline_start(v, block)
        if start is not None and (j > index or isinstance(start, ConstOp)) and start.is_before_in_block(first):
            first = start
    return first


def _rewrite(program: Program, *, site: int) -> None:
    found = sites(program)[site]
    product = found.product
    c = product.operands[found.scale]
    x = product.operands[1 - found.scale]
    for user, index in found.uses:
        block = user.parent_block()
        assert block is not None
        scaled = BinaryOp("mul", user.operands[index], c)
        set_span(scaled, ir.span(program, user))
        block.insert_op_before(scaled, _position(user, index))
        operands = list(user.operands)
        operands[index] = scaled.res
        user.operands = operands
    if product.res.name_hint is not None and x.name_hint is None:
        x.name_hint = product.res.name_hint
    product.res.replace_all_uses_with(x)
    block = product.parent_block()
    assert block is not None
    block.erase_op(product)


DEFER_SCALE = register(
    Tactic(
        name=NAME,
        summary="x * c (c > 0) past the row max into its uses: max(x) * c, x * c - m (one FMA)",
        explain=__doc__ or "",
        params=(Param("site", IntRange(0, 1023), 0, "which scaled tile, counted from 0 in the order of the text"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/causal_attention/seed.kir defer-scale",),
    )
)
