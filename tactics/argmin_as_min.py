"""`argmin-as-min`: an argmin (argmax) as the lowest lane that reaches the minimum (maximum).

    i = argmin(d, axis = 1)
->  lanes = arange(0, E)
    i = min(where(d == min(d, axis = 1)[:, None], lanes[None, :], E), axis = 1)

where E is the extent of the reduced axis. An argmin carries (value, index) pairs through one
reduction: on a GPU a tuple reduction, two values shuffled at every step of the tree and a
combine that breaks ties and orders NaN (KIR's `_kir_argmin` in Triton, a dozen instructions).
The rewrite takes the minimum with a plain reduction, compares every element with it and takes
the lowest matching lane with an integer one: two single-value reductions, cheaper than the
tuple one (the tuned k-means assignment's epilogue). Where the program already takes the
minimum of the same value along the same axis (`dmin = min(dist, axis = 1)` before the
argmin), that one is used; else it is computed just before. The lanes are an `arange` made
once, before the loops around the argmin.

Ties: argmin gives the lowest index among the elements equal to the minimum; the rewrite gives
the lowest lane whose element compares equal to it: the same index (-0.0 and 0.0 compare
equal in both). Integers and rows without NaN therefore give bitwise the same indices.

NaN: KIR's argmin counts NaN as the smallest value (argmax: the largest), so a row with a NaN
gives the index of its first NaN. The minimum of such a row is NaN (KIR's min and max propagate
NaN, and the lowerings keep that: Triton's `propagate_nan=ALL`, the C backends' `kir_fmin`), no
element compares equal to NaN, and the rewrite gives E, one past the last lane. The results
differ only on rows with a NaN, but they differ: numerics "approximate", offered where the
task's comparison admits it (an index compared by the distance it reaches, as kmeans_assign's
hook does, means nothing for NaN inputs either).

Offered for every argmin and argmax; `site` counts them in the order of the text.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from kir.diagnostics import Diagnostic
from kir.dialect.structure import KernelOp
from kir.dialect.tile import ArangeOp, ArgReduceOp, CompareOp, ExpandDimsOp, ReduceOp, WhereOp
from kir.dialect.types import shape_of
from kir.program import Program
from tactics import _grid, ir
from tactics.base import IntRange, Param, Tactic, not_applicable
from tactics.registry import register

NAME = "argmin-as-min"
REDUCTION = {"argmin": "min", "argmax": "max"}


def sites(program: Program) -> list[ArgReduceOp]:
    """The argmins and argmaxes, in the order of the text."""
    return [op for op in program.kernel.walk() if isinstance(op, ArgReduceOp)]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if sites(program):
        return []
    return [
        not_applicable(
            NAME,
            "no-argmin",
            program.span(),
            "the kernel takes no argmin or argmax",
            "the tactic rewrites argmin(x, axis = a) (or argmax) as a min over the lanes that reach min(x, axis = a)",
        )
    ]


_validate, _domains = ir.site_choice(NAME, "argmins and argmaxes", sites)


# ---- where the new ops go ----------------------------------------------------------------------


def _inline(op: Operation, block: Block | None) -> bool:
    """Whether the printer writes `op` inside the expression that uses it (one unnamed result
    used once, in `block`)."""
    if len(op.results) != 1 or op.results[0].name_hint is not None or not op.results[0].has_one_use():
        return False
    use = next(iter(op.results[0].uses))
    return op.parent_block() is block and use.operation.parent_block() is block


def _statement_start(op: Operation) -> Operation:
    """The first op of the statement `op` is written in: the ops of an expression come in the
    order the parser makes them, so a new statement goes before all of them."""
    block = op.parent_block()
    while _inline(op, block):
        op = next(iter(op.results[0].uses)).operation
    first, stack = op, [op]
    while stack:
        top = stack.pop()
        for v in top.operands:
            owner = v.owner
            if isinstance(owner, Operation) and _inline(owner, block):
                if owner.is_before_in_block(first):
                    first = owner
                stack.append(owner)
    return first


def _outside_loops(program: Program, op: Operation) -> Operation:
    """The op before which a value made of static extents alone is made once: the start of the
    statement of the kernel body that holds `op` (a loop, an `if`, or `op`'s own)."""
    top = op
    while not isinstance(top.parent_op(), KernelOp):
        parent = top.parent_op()
        assert parent is not None  # an op of the kernel is under the kernel
        top = parent
    return _statement_start(top)


def _dominates(a: Operation, b: Operation) -> bool:
    """Whether `a` comes before `b` on every path: in `b`'s block or one around it, before `b`
    (or the op that holds `b`)."""
    block = a.parent_block()
    inner: Operation | None = b
    while inner is not None and inner.parent_block() is not block:
        inner = inner.parent_op()
    return inner is not None and inner is not a and a.is_before_in_block(inner)


def _extreme(arg: ArgReduceOp) -> SSAValue | None:
    """An existing `min` (for argmin) or `max` of the same value along the same axis that is
    computed before the argmin on every path, else None."""
    fn = REDUCTION[arg.fn.data]
    for use in arg.operand.uses:
        op = use.operation
        if (
            isinstance(op, ReduceOp)
            and op.fn.data == fn
            and op.axis.data == arg.axis.data
            and op.operand is arg.operand
            and _dominates(op, arg)
        ):
            return op.res
    return None


# ---- the rewrite -------------------------------------------------------------------------------


def _rewrite(program: Program, *, site: int) -> None:
    arg = sites(program)[site]
    block = arg.parent_block()
    assert block is not None  # a walked op is in a block
    axis, value = arg.axis.data, arg.operand
    shape = shape_of(value.type)
    extent = shape[axis]
    span = ir.span(program, arg)

    hoisted = _outside_loops(program, arg)
    hoisted_block = hoisted.parent_block()
    assert hoisted_block is not None
    lanes = _grid.Emitter(hoisted_block, hoisted, span)(
        ArangeOp(0, extent), _grid.fresh("lanes", _grid.taken_names(program))
    )

    emit = _grid.Emitter(block, arg, span)  # the parser's order for the expression that replaces it
    best = _extreme(arg)
    if best is None:
        best = emit(ReduceOp(REDUCTION[arg.fn.data], value, axis))
    if len(shape) > 1:
        best = emit(ExpandDimsOp(best, axis))
    reaches = emit(CompareOp("eq", value, best))
    lane = lanes
    for i in range(len(shape)):
        if i != axis:
            lane = emit(ExpandDimsOp(lane, i))
    past = emit.static(extent)
    index = emit(ReduceOp("min", emit(WhereOp(reaches, lane, past)), axis))
    index.name_hint = arg.res.name_hint
    arg.res.replace_all_uses_with(index)
    block.erase_op(arg)


ARGMIN_AS_MIN = register(
    Tactic(
        name=NAME,
        summary="argmin (argmax) as the lowest lane that reaches the min (max): two plain reductions",
        explain=__doc__ or "",
        params=(
            Param("site", IntRange(0, 1023), 0, "which argmin or argmax, counted from 0 in the order of the text"),
        ),
        numerics="approximate",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/kmeans_assign/seed.kir argmin-as-min",),
    )
)
