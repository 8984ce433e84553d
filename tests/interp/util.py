"""Helpers for interpreter tests: kernels are written in KIR text (dedented), run, and their
diagnostics inspected by rule and line."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kir.diagnostics import Diagnostic, KirError
from kir.interp import run
from kir.parser import parse
from kir.program import Program


def program(text: str) -> Program:
    return parse(textwrap.dedent(text).lstrip("\n"), file="t.kir")


def run_text(
    text: str, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None, **kw
) -> dict[str, np.ndarray]:
    return run(program(text), inputs, params, **kw)


def error_of(text: str, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None, **kw) -> Diagnostic:
    with pytest.raises(KirError) as err:
        run_text(text, inputs, params, **kw)
    (d,) = err.value.diagnostics
    assert d.severity == "error"
    return d


def line_of(text: str, fragment: str, nth: int = 0) -> int:
    """The 1-based line of the nth line containing `fragment`, in the dedented text."""
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    return [i + 1 for i, line in enumerate(lines) if fragment in line][nth]


def lines_of(d: Diagnostic) -> set[int]:
    return {d.span.line} | {r.span.line for r in d.related}
