"""`dot-accumulate`: add to a matrix product inside it (`a + dot<f32>(x, y)` -> `dot<f32>(x,
y, a)`).

The tensor cores take an accumulator: `wgmma` and `mma` compute `d = a.b + c` with c in the
same registers as d. Written as a separate `+`, the product lands in fresh registers (for a
[128, 128] f32 tile, 64 more a thread under 8 warps) and a second pass adds them; folded in,
the accumulator is the product's own. Flash attention's rescaled accumulator is the case in
point: `acc = acc * alpha[:, None] + dot<f32>(p, v)` -> `acc = dot<f32>(p, v, acc * alpha[:,
None])`.

Offered for a `+` of a `dot` without an accumulator (used by nothing else) and a tile of the
product's type (not broadcast), in either order; `site` counts them in the order of the text.
The reference interpreter adds the accumulator to the f32 product once, as the `+` did, so its
results are bitwise the same; the tensor cores add it into their own sum, in another order:
numerics "reassociates".
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from kir.diagnostics import Diagnostic
from kir.dialect.tile import BinaryOp, DotOp
from kir.dialect.types import dtype_of
from kir.program import Program
from kir.spans import copy_source_notes
from tactics import ir
from tactics.base import IntRange, Param, Tactic
from tactics.registry import register

NAME = "dot-accumulate"


def _product(op: BinaryOp) -> tuple[DotOp, SSAValue] | None:
    """(the dot, the addend) when `op` adds a tile to a product without an accumulator."""
    if op.fn.data != "add":
        return None
    for dot_side, addend in ((op.rhs, op.lhs), (op.lhs, op.rhs)):
        dot = dot_side.owner
        if (
            isinstance(dot, DotOp)
            and dot.acc is None
            and dot_side.has_one_use()
            and addend.type == dot.res.type == op.res.type
            and dtype_of(op.res.type) in ("f32", "f64", "i32")
        ):
            return dot, addend
    return None


def sites(program: Program) -> list[BinaryOp]:
    """The additions the tactic folds into their product, in the order of the text."""
    return [op for op in program.kernel.walk() if isinstance(op, BinaryOp) and _product(op) is not None]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if sites(program):
        return []
    return ir.no_site(
        NAME, "no-sum", program, DotOp, "no product is added to a tile of its type", "the kernel has no dot",
        "the tactic folds a + dot<f32>(x, y) (a an f32, f64 or i32 tile of the product's shape) into dot<f32>(x, y, a)",
    )  # fmt: skip


_validate, _domains = ir.site_choice(NAME, "additions of a product", sites)


def _inline_tree(value: SSAValue, block: Block) -> list[Operation]:
    """The ops of `block` that the text writes inline as `value` (unnamed, used once), in
    their order."""
    tree: list[Operation] = []
    stack = [value]
    while stack:
        v = stack.pop()
        owner = v.owner
        if isinstance(owner, Operation) and owner.parent_block() is block and v.name_hint is None and v.has_one_use():
            tree.append(owner)
            stack.extend(owner.operands)
    return sorted(tree, key=lambda op: block.get_operation_index(op))


def _rewrite(program: Program, *, site: int) -> None:
    add = sites(program)[site]
    found = _product(add)
    assert found is not None
    dot, addend = found
    block = add.parent_block()
    assert block is not None
    fused = DotOp(dot.lhs, dot.rhs, dot.acc_dtype.data, addend)
    copy_source_notes(add, fused)
    fused.res.name_hint = add.res.name_hint
    block.insert_op_before(fused, add)
    add.res.replace_all_uses_with(fused.res)
    block.erase_op(add)
    dot_block = dot.parent_block()
    assert dot_block is not None
    dot_block.erase_op(dot)
    # the accumulator's expression is evaluated after the operands now, as the text reads
    for op in _inline_tree(addend, block):
        op.detach()
        block.insert_op_before(op, fused)


DOT_ACCUMULATE = register(
    Tactic(
        name=NAME,
        summary="a + dot(x, y) -> dot(x, y, a): the addend as the product's accumulator",
        explain=__doc__ or "",
        params=(Param("site", IntRange(0, 1023), 0, "which addition, counted from 0 in the order of the text"),),
        numerics="reassociates",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/causal_attention/seed.kir dot-accumulate",),
    )
)
