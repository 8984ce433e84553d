"""Checking a parsed program: each op's own verification, then every rule of the verifier.

`check_program` is what `kir check` and the candidate pipeline's verify stage run."""

from __future__ import annotations

from dataclasses import replace

from kir import multi
from kir.check import internal_error, unique_sorted, verify_ops
from kir.diagnostics import Diagnostic, KirError, apply_edits, moved_line
from kir.parser import collections_paused, parse
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


def read_fixes_held(text: str, file: str, diags: list[Diagnostic], target: str | None = None) -> list[Diagnostic]:
    """The diagnostics of a program that could not be read (`KirError` from `parse`), each fix
    checked by the rules too: the edited text is read and checked by every rule, and a hint whose
    edits leave the diagnostic, or bring an error on a line they write, is dropped with them. (The
    parser checks its fixes by reading the edited text again, without the rules: `kir/fixes.py`.
    Reading stops at the first error, so errors elsewhere in the edited program are others the
    reader had not reached.)"""
    out = []
    for d in diags:
        if d.edits and not _holds(text, file, d, target):
            d = replace(d, hint="", edits=())
        out.append(d)
    return out


def _holds(text: str, file: str, d: Diagnostic, target: str | None) -> bool:
    edited = apply_edits(text, d.edits)
    try:
        after = check_program(parse(edited, file=file), target)
    except KirError as err:
        after = err.diagnostics
    line = moved_line(d.span.line if d.span else 0, d.edits)
    written = {
        n
        for e in d.edits
        for start in [moved_line(e.span.line, [o for o in d.edits if o is not e])]
        for n in range(start, start + e.text.count("\n") + 1)
    }
    places = {(a.rule, a.span.line if a.span else 0) for a in after}
    return (d.rule, line) not in places and not any(a.is_error and a.span and a.span.line in written for a in after)
