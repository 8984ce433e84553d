"""Checking a parsed program: each op's own verification, then every rule of the verifier.

`check_program` is what `kir check` and the candidate pipeline's verify stage run."""

from __future__ import annotations

from kir import multi
from kir.check import internal_error, unique_sorted, verify_ops
from kir.diagnostics import Diagnostic, KirError
from kir.parser import collections_paused
from kir.program import Program
from verifier.engine import verify


def check_program(program: Program, target: str | None = None) -> list[Diagnostic]:
    """Every diagnostic for a parsed program: op-level verification of each op, then the rules
    for `target` (the kernel's declared target when None). Sorted and without duplicates."""
    with collections_paused():
        return _check(program, target)


def _check(program: Program, target: str | None) -> list[Diagnostic]:
    if program.is_multi:  # each kernel as a program of its own, then the rules across them
        diags = multi.check(program)
        for k in program.kernels():
            diags += _check(k, target)
        return unique_sorted(diags)
    diags = verify_ops(program)
    if any(d.is_error for d in diags):
        return unique_sorted(diags)  # the rules assume well-formed IR
    effective = target if target is not None else program.kernel.target.data
    try:
        diags += verify(program, effective)
    except KirError as err:
        diags += err.diagnostics
    except Exception as err:  # the verifier's bug must not become the user's traceback
        diags.append(internal_error(err, program.file, "running the verifier"))
    return unique_sorted(diags)
