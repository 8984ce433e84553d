"""`smem-layout`: the swizzle of a shared buffer at the explicit level
(`smem(bf16[S, BM, BK])` -> `smem(bf16[S, BM, BK], swizzle = 128)`).

A swizzle of W bytes XORs the 16-byte chunk index of an element with its row index within each
8-row atom of W-byte rows. Rows of a tile read column-wise (a wgmma operand, an ldmatrix, a
transposed copy) then fall in different banks instead of one: without it, 8 rows of 128 bytes
read down a column are an 8-way bank conflict. The TMA writes and wgmma reads the same pattern
from the buffer's declared mode, so the choice is one attribute that every copy and read of the
buffer follows; the values stored and read back are the same whatever the pattern (the
reference interpreter indexes logically), so the result is bitwise equal.

The width must divide the buffer's rows (its innermost dimension in bytes, with the
parameters' values): the atom is W bytes of one row. Offered on NVIDIA targets, whose TMA and
matrix instructions define the four modes (0, 32, 64, 128 bytes).
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.rewriter import Rewriter

from kir.diagnostics import Diagnostic
from kir.dialect.explicit import SmemAllocOp
from kir.dialect.types import SmemType, smem
from kir.dtypes import DTYPES
from kir.program import Program
from tactics import ir
from tactics.base import Choice, IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "smem-layout"
SWIZZLES = (0, 32, 64, 128)
NVIDIA = ("sm_80", "sm_90")


def buffers(program: Program) -> list[SmemAllocOp]:
    """Every shared-memory allocation, in the order of the text."""
    return [op for op in program.kernel.walk() if isinstance(op, SmemAllocOp)]


def row_bytes(program: Program, op: SmemAllocOp) -> int | None:
    """The bytes of one row of the buffer (its innermost dimension) with the parameters'
    defaults, or None when it has fewer than two dimensions or a shape symbol sizes it."""
    t = op.res.type
    assert isinstance(t, SmemType)
    if len(t.shape.data) < 2:  # a swizzle permutes rows: a one-row buffer has none to permute
        return None
    try:
        inner = t.shape.data[-1].data.evaluate(program.params)
    except (KeyError, ZeroDivisionError):
        return None
    return inner * DTYPES[t.dtype.data].nbytes


def fitting(program: Program, op: SmemAllocOp) -> tuple[int, ...]:
    """The swizzle widths this buffer's rows admit (0, no swizzle, always)."""
    row = row_bytes(program, op)
    if row is None:
        return (0,)
    return tuple(w for w in SWIZZLES if w == 0 or row % w == 0)


def _check(program: Program, target: str) -> list[Diagnostic]:
    if target not in NVIDIA:
        return [
            not_applicable(
                NAME,
                "target",
                ir.clause(program, "target"),
                f"{target} has no swizzled shared-memory modes",
                "the modes are those of NVIDIA's TMA and matrix instructions (sm_80, sm_90)",
            )
        ]
    found = buffers(program)
    if not found:
        return [
            not_applicable(
                NAME,
                "no-smem",
                program.span(),
                "the kernel allocates no shared buffer",
                "the tactic works at the explicit level, on smem(...) buffers",
            )
        ]
    if all(len(fitting(program, op)) == 1 for op in found):
        return [
            not_applicable(
                NAME,
                "no-choice",
                ir.span(program, found[0]),
                "no shared buffer has rows of 32 bytes or more (with the parameters' values)",
                "a swizzle permutes 16-byte chunks within rows of 32, 64 or 128 bytes",
            )
        ]
    return []


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    found = buffers(program)
    index, width = int(values["buffer"]), int(values["swizzle"])
    if index >= len(found):
        return [
            Diagnostic(
                "tactic.smem-layout.buffer",
                "error",
                ir.span(program, found[-1]) if found else program.span(),
                f"tactic smem-layout: buffer = {index}, but the kernel allocates {len(found)} shared buffers",
                f"buffer is 0 .. {len(found) - 1}, in the order of the text",
            )
        ]
    op = found[index]
    if width not in fitting(program, op):
        row = row_bytes(program, op)
        rows = f"rows of {row} bytes" if row is not None else "fewer than two dimensions or a symbolic row"
        return [
            Diagnostic(
                "tactic.smem-layout.width",
                "error",
                ir.span(program, op),
                f"tactic smem-layout: a {width}-byte swizzle does not fit this buffer ({rows})",
                "widths that fit: " + ", ".join(str(w) for w in fitting(program, op)),
            )
        ]
    return []


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    found = buffers(program)
    choosable = [i for i, op in enumerate(found) if len(fitting(program, op)) > 1]
    widths = sorted({w for i in choosable for w in fitting(program, found[i])})
    return {"buffer": tuple(choosable), "swizzle": tuple(widths)}


def _rewrite(program: Program, *, buffer: int, swizzle: int) -> None:
    op = buffers(program)[buffer]
    t = op.res.type
    assert isinstance(t, SmemType)
    if t.swizzle.data != swizzle:
        Rewriter.replace_value_with_new_type(op.res, smem(t.dtype.data, [d.data for d in t.shape.data], swizzle))


SMEM_LAYOUT = register(
    Tactic(
        name=NAME,
        summary="set the swizzle of a shared buffer: smem(..., swizzle = 128)",
        explain=__doc__ or "",
        params=(
            Param("buffer", IntRange(0, 63), 0, "which shared buffer, counted from 0 in the order of the text"),
            Param("swizzle", Choice(SWIZZLES), 128, "the swizzle width in bytes (0: none)"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply examples/gemm_hopper_ws.kir smem-layout --param buffer=1 --param swizzle=64",),
    )
)
