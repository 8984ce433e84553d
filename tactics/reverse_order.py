"""`reverse-order`: launch a grid axis's tiles last first (`program_id(0)` -> `G0 - 1 -
program_id(0)`).

Programs are launched in the order of their ids, axis 0 fastest. Where the work per tile grows
with its index (causal attention: query block i visits i + 1 key blocks once the loop stops at
the diagonal) the heaviest tiles come last, and the last wave holds a few long programs while
the other SMs idle. Reversed, the heaviest start first and the short ones fill the tail (the
tuned causal_attention's `m0 = (S / BM - 1 - program_id(0)) * BM`). Each tile is still
computed by one program, by the same ops: exact.

Offered for a tile-level program with a loop in its body (a program whose tiles take long
enough for the order of the last wave to matter); `axis` is the grid axis reversed.
"""

from __future__ import annotations

from collections.abc import Mapping

from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.dialect.tile import BinaryOp, ProgramIdOp
from kir.program import Program
from tactics import _grid, ir
from tactics.base import IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "reverse-order"


def _axes(program: Program) -> list[int]:
    """The grid axes whose program id the body reads."""
    read = {op.axis.data for op in _grid.program_ids(program)}
    return [a for a in range(len(_grid.grid(program))) if a in read]


def _reversed(program: Program, axis: int) -> bool:
    """Whether the axis is reversed already: its every program id is only read as `X - it`
    (this tactic's `G - 1 - program_id(a)`, or a hand-written reversal); reversing it again
    would launch the tiles in their first order through two subtractions."""
    ids = [op for op in _grid.program_ids(program) if op.axis.data == axis]
    for op in ids:
        uses = list(op.res.uses)
        if len(uses) != 1 or not isinstance(uses[0].operation, BinaryOp):
            return False
        user = uses[0].operation
        if user.fn.data != "sub" or user.rhs != op.res:
            return False
    return bool(ids)


def _open_axes(program: Program) -> list[int]:
    return [a for a in _axes(program) if not _reversed(program, a)]


def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = _grid.explicit_reason(NAME, program)
    if explicit:
        return explicit
    refusals = (
        (
            not any(isinstance(op, ForOp) for op in program.kernel.body.block.ops),
            "no-loop",
            "the body has no loop: its programs are too short for the order of the last wave to matter",
        ),
        (not _axes(program), "no-program-id", "the body reads no program id: every program computes the same thing"),
        (
            not _open_axes(program),
            "reversed",
            "every axis whose program id the body reads is launched last first already",
        ),
    )
    for refused, code, message in refusals:
        if refused:
            return [not_applicable(NAME, code, ir.clause(program, "grid"), message)]
    return []


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    axes = _axes(program)
    if int(values["axis"]) in axes and _reversed(program, int(values["axis"])):
        return [
            Diagnostic(
                "tactic.reverse-order.axis",
                "error",
                ir.clause(program, "grid"),
                f"tactic reverse-order: axis {values['axis']} is launched last first already",
                "reverse another axis; reversing it again gives back the first order",
            )
        ]
    if int(values["axis"]) in axes:
        return []
    return [
        Diagnostic(
            "tactic.reverse-order.axis",
            "error",
            ir.clause(program, "grid"),
            f"tactic reverse-order: axis = {values['axis']}, but the body reads the program id of axes "
            + ", ".join(str(a) for a in axes),
            "reverse an axis whose program id the body reads",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"axis": tuple(_open_axes(program))}


def _rewrite(program: Program, *, axis: int) -> None:
    extent = _grid.grid(program)[axis]
    for op in _grid.program_ids(program):
        if op.axis.data != axis:
            continue
        block = op.parent_block()
        assert block is not None
        emit = _grid.Emitter(block, op, ir.span(program, op))
        # G - 1 - program_id(a), in the order the parser builds it
        last = emit.binary("sub", emit.static(extent), emit.const(1))
        fresh = ProgramIdOp(axis)
        emit(fresh)
        reversed_id = emit.binary("sub", last, fresh.res)
        op.res.replace_all_uses_with(reversed_id)
        block.erase_op(op)


REVERSE_ORDER = register(
    Tactic(
        name=NAME,
        summary="launch a grid axis's tiles last first (the heaviest causal tiles start first)",
        explain=__doc__ or "",
        params=(Param("axis", IntRange(0, 2), 0, "the grid axis to reverse"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        anchor=lambda program: ir.clause(program, "grid"),
        examples=("kir tactics apply benchmarks/tasks/causal_attention/seed.kir reverse-order --param axis=0",),
    )
)
