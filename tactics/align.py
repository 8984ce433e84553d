"""`align`: promise a tensor argument's base alignment (`x: global bf16[M, N]` ->
`x: global bf16[M, N] align(16)`), the language's vector-width hint.

A backend may issue a 16-byte vector access only where it knows the address is a multiple of
16; without `align(N)` only the element size is known. The Gluon backend declares pointers of
`align(16)` or more divisible by 16 (`tt.divisibility`), which lets its loads and stores of
contiguous runs become 128-bit accesses, and the TMA needs a 16-byte aligned base
(`resources.tma-align`). (Triton's own JIT assumes 16 bytes for every pointer, as a launch on
torch tensors does, so the Triton backend's code does not change.) The promise changes no value;
the harness's tensors are allocated whole, at 256-byte boundaries, so it holds for every
launch it makes.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.rewriter import Rewriter

from kir.diagnostics import Diagnostic
from kir.dialect.types import GlobalType, global_tensor
from kir.dtypes import DTYPES
from kir.names import suggest
from kir.program import Program
from tactics.base import Choice, Names, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "align"
ALIGNMENTS = (16, 32, 64, 128)


def _declared(t: GlobalType) -> int:
    return t.align.data or DTYPES[t.dtype.data].nbytes


def unaligned(program: Program) -> list[str]:
    """The tensor arguments declared with less than 16-byte alignment."""
    out = []
    for name, arg in program.kernel.args:
        assert isinstance(arg.type, GlobalType)
        if _declared(arg.type) < ALIGNMENTS[0]:
            out.append(name)
    return out


def _check(program: Program, target: str) -> list[Diagnostic]:
    if unaligned(program):
        return []
    return [
        not_applicable(
            NAME,
            "aligned",
            program.span(),
            "every tensor argument is declared 16-byte aligned already",
            "the tactic raises an argument's align(N) from its element size",
        )
    ]


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    arg = str(values["arg"])
    types = {n: v.type for n, v in program.kernel.args}
    names = list(types)
    if arg in names:
        t = types[arg]
        assert isinstance(t, GlobalType)
        if _declared(t) < int(values["bytes"]):
            return []
        return [
            Diagnostic(
                "tactic.align.aligned",
                "error",
                program.arg_spans.get(arg) or program.span(),
                f"tactic align: `{arg}` is declared {_declared(t)}-byte aligned already",
                "choose a larger alignment, or another argument",
            )
        ]
    return [
        Diagnostic(
            "tactic.align.arg",
            "error",
            program.span(),
            f"tactic align: kernel {program.name} has no argument {arg!r}",
            suggest(arg, names) or f"its arguments: {', '.join(names)}",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"arg": tuple(unaligned(program)), "bytes": (16,)}


def _rewrite(program: Program, *, arg: str, bytes: int) -> None:  # noqa: A002 - the parameter's name
    for name, value in program.kernel.args:
        if name == arg:
            t = value.type
            assert isinstance(t, GlobalType)
            new = global_tensor(
                t.dtype.data,
                [d.data for d in t.shape.data],
                strides=[s.data for s in t.strides.data],
                align=bytes,
                out=t.is_out,
            )
            Rewriter.replace_value_with_new_type(value, new)


ALIGN = register(
    Tactic(
        name=NAME,
        summary="promise a tensor argument's alignment: align(16)",
        explain=__doc__ or "",
        params=(
            Param("arg", Names("a tensor argument"), None, "the argument"),
            Param("bytes", Choice(ALIGNMENTS), 16, "its base alignment in bytes"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/softmax/seed.kir align --param arg=x",),
    )
)
