"""`reciprocal`: divide once, multiply per element (`e / s` -> `e * (1.0 / s)`).

Where a float tile is divided by a value it is broadcast against (a row's sum, a scalar), the
division is done once per row and each element is multiplied by the reciprocal. An f32 `/` is
an IEEE division (on NVIDIA GPUs `div.rn`, a dozen instructions with a slow path), and a row of
thousands of elements pays it thousands of times. `x * (1 / s)` rounds twice where `x / s`
rounds once, so the result may differ in the last bit: numerics "approximate", offered where
the task's tolerance admits it.
"""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from kir.dialect.tile import BinaryOp, ConstOp
from kir.dialect.types import dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program, set_span, span_of
from tactics import ir
from tactics.base import IntRange, Param, Tactic, not_applicable
from tactics.registry import register

NAME = "reciprocal"


def _broadcast_divisor(op: BinaryOp) -> bool:
    """`x / s` with s a scalar or a tile of fewer elements than x, broadcast against it."""
    if not DTYPES[dtype_of(op.res.type)].is_float:
        return False
    divisor, result = shape_of(op.rhs.type), shape_of(op.res.type)
    if not result:
        return not divisor  # a scalar divided by a scalar: one division either way, still offered
    if not divisor:
        return True
    return len(divisor) == len(result) and any(
        d.as_int() == 1 and r.as_int() != 1 for d, r in zip(divisor, result, strict=True)
    )


def sites(program: Program) -> list[BinaryOp]:
    """The divisions the tactic can rewrite, in the order of the text."""
    return [
        op
        for op in program.kernel.walk()
        if isinstance(op, BinaryOp) and op.fn.data == "div" and _broadcast_divisor(op)
    ]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if sites(program):
        return []
    divisions = [op for op in program.kernel.walk() if isinstance(op, BinaryOp) and op.fn.data == "div"]
    return [
        not_applicable(
            NAME,
            "no-division",
            ir.span(program, divisions[0]) if divisions else program.span(),
            "no float division by a value broadcast against the dividend"
            if divisions
            else "the kernel divides nothing",
            "the tactic rewrites x / s where s is a scalar or a row value (s[:, None])",
        )
    ]


_validate, _domains = ir.site_choice("reciprocal", "such divisions", sites)


def _rewrite(program: Program, *, site: int) -> None:
    div = sites(program)[site]
    block = div.parent_block()
    assert block is not None  # a walked op is in a block
    dtype = dtype_of(div.res.type)
    one = ConstOp(1.0, dtype)
    inverse = BinaryOp("div", one.res, div.rhs)
    product = BinaryOp("mul", div.lhs, inverse.res)
    for new in (one, inverse, product):
        set_span(new, span_of(div))
        block.insert_op_before(new, div)
    div.res.replace_all_uses_with(product.res)
    block.erase_op(div)


RECIPROCAL = register(
    Tactic(
        name=NAME,
        summary="multiply by a reciprocal instead of dividing by a broadcast value",
        explain=__doc__ or "",
        params=(Param("site", IntRange(0, 1023), 0, "which division, counted from 0 in the order of the text"),),
        numerics="approximate",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/softmax/seed.kir reciprocal",),
    )
)
