"""`split-dot`: an f32 matrix product on the bf16 tensor cores, in three products (bf16x3).

KIR's `dot<f32>` of f32 tiles is an IEEE product (Triton's `input_precision="ieee"`): FMA on
the CUDA cores, an order of magnitude below the tensor cores. Each f32 operand is split into
two bf16 parts, v = hi + lo with hi = bf16(v) and lo = bf16(v - hi) (16 significant bits
together), and the product is taken as

    x.y ~ x_hi.y_hi + x_hi.y_lo + x_lo.y_hi        (f32 accumulation)

on bf16 inputs. The dropped x_lo.y_lo term and the split's residue are about 2^-16 |x_k y_k|
a product, so results change on purpose: numerics "approximate", for tasks whose tolerance
admits it (kmeans_assign's and knn_topk's comparison hooks accept a distance within 1e-4 of
the nearest's; their tuned programs carry this split, with the error argued in their
comments). Each operand is split where it is defined, so an operand loaded before a loop (the
queries, the points of a block) is split once, not every iteration.

Offered for a `dot<f32>` of two f32 tiles; `site` counts them in the order of the text.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, OpResult, SSAValue

from kir.diagnostics import Diagnostic, Span
from kir.dialect.tile import BinaryOp, CastOp, DotOp, TransOp
from kir.dialect.types import dtype_of
from kir.program import Program, set_span, span_of
from tactics import _grid, ir
from tactics.base import IntRange, Param, Tactic
from tactics.registry import register

NAME = "split-dot"


def sites(program: Program) -> list[DotOp]:
    """The f32 products of f32 tiles, in the order of the text."""
    return [
        op
        for op in program.kernel.walk()
        if isinstance(op, DotOp)
        and op.acc_dtype.data == "f32"
        and dtype_of(op.lhs.type) == "f32"
        and dtype_of(op.rhs.type) == "f32"
    ]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if sites(program):
        return []
    return ir.no_site(
        NAME, "no-f32-dot", program, DotOp, "no dot<f32> of two f32 tiles", "the kernel has no dot",
        "the split is for f32 operands; bf16 and f16 ones run on the tensor cores already",
    )  # fmt: skip


_validate, _domains = ir.site_choice("split-dot", "f32 dots of f32 tiles", sites)


class _After:
    """Inserts ops one after another, after an op (or at the start of a block)."""

    def __init__(self, block: Block, after: Operation | None, span: Span | None):
        self.block, self.after, self.span = block, after, span

    def __call__(self, op: Operation, name: str | None = None) -> SSAValue:
        set_span(op, self.span)
        if self.after is None:
            first = self.block.first_op
            if first is None:
                self.block.add_op(op)
            else:
                self.block.insert_op_before(op, first)
        else:
            self.block.insert_op_after(op, self.after)
        self.after = op
        if name is not None:
            op.results[0].name_hint = name
        return op.results[0]


def _split(value: SSAValue, span: Span | None, taken: set[str]) -> tuple[SSAValue, SSAValue]:
    """`value`'s bf16 parts (hi, lo), computed right where `value` is defined."""
    if isinstance(value, OpResult):
        block, after = value.owner.parent_block(), value.owner
    else:
        block, after = value.owner, None  # type: ignore[assignment]  # a block argument's block
    assert isinstance(block, Block)
    emit = _After(block, after, span)
    base = value.name_hint or "v"
    hi = emit(CastOp(value, "bf16"), _grid.fresh(f"{base}_hi", taken))
    back = emit(CastOp(hi, "f32"))
    lo = emit(CastOp(emit(BinaryOp("sub", value, back)), "bf16"), _grid.fresh(f"{base}_lo", taken))
    return hi, lo


def _parts(value: SSAValue, span: Span | None, taken: set[str]) -> tuple[SSAValue, SSAValue, TransOp | None]:
    """The bf16 parts of a dot's operand, and the transpose they are to go through. A
    transposed tile used by the dot alone is split before the transpose (the parts of
    `trans(ct)` are `trans(ct_hi)` and `trans(ct_lo)`), so the parts keep the tile's name and
    its split stays next to its load."""
    owner = value.owner
    if isinstance(owner, TransOp) and value.has_one_use():
        hi, lo = _split(owner.operand, span, taken)
        return hi, lo, owner
    hi, lo = _split(value, span, taken)
    return hi, lo, None


def _rewrite(program: Program, *, site: int) -> None:
    dot = sites(program)[site]
    block = dot.parent_block()
    assert block is not None
    span = span_of(dot)
    taken = _grid.taken_names(program)
    x_hi, x_lo, x_trans = _parts(dot.lhs, span, taken)
    y_hi, y_lo, y_trans = (x_hi, x_lo, x_trans) if dot.rhs is dot.lhs else _parts(dot.rhs, span, taken)

    def operand(part: SSAValue, trans: TransOp | None) -> SSAValue:
        if trans is None:
            return part
        flipped = TransOp(part)
        set_span(flipped, span_of(trans))
        block.insert_op_before(flipped, dot)
        return flipped.res

    # the three products are statements of one name, as `xc = dot<f32>(x_hi, y_lo, xc)`
    name = dot.res.name_hint or _grid.fresh("prod", taken)
    acc: SSAValue | None = dot.acc
    for (lhs, lt), (rhs, rt) in (
        ((x_hi, x_trans), (y_hi, y_trans)),
        ((x_hi, x_trans), (y_lo, y_trans)),
        ((x_lo, x_trans), (y_hi, y_trans)),
    ):
        product = DotOp(operand(lhs, lt), operand(rhs, rt), "f32", acc)
        set_span(product, span)
        block.insert_op_before(product, dot)
        product.res.name_hint = name
        acc = product.res
    assert acc is not None
    dot.res.replace_all_uses_with(acc)
    block.erase_op(dot)
    for trans in {x_trans, y_trans} - {None}:
        assert trans is not None and trans.parent is not None
        trans.parent.erase_op(trans)


SPLIT_DOT = register(
    Tactic(
        name=NAME,
        summary="an f32 dot as three bf16 tensor-core products (bf16x3: hi.hi + hi.lo + lo.hi)",
        explain=__doc__ or "",
        params=(Param("site", IntRange(0, 1023), 0, "which f32 dot, counted from 0 in the order of the text"),),
        numerics="approximate",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/kmeans_assign/seed.kir split-dot",),
    )
)
