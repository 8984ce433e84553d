"""What the lowering tests share: snapshots of emitted code, and the checks a pass's output must pass."""

from __future__ import annotations

import os
from pathlib import Path

from kir.check import check_program
from kir.interp import run as interp_run
from kir.parser import parse
from kir.program import same_ir


def check_snapshot(path: Path, text: str) -> None:
    """`text` is the snapshot at `path`; with KIR_UPDATE_SNAPSHOTS set, it becomes the snapshot."""
    if os.environ.get("KIR_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}: run with KIR_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"emitted source differs from {path}; KIR_UPDATE_SNAPSHOTS=1 to accept"


def kernel_part(source: str) -> str:
    """An emitted C++ kernel from its signature on (the helpers before it are checked once)."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('extern "C"'))
    return "\n".join(lines[start:]) + "\n"


def assert_clean(program, target: str = "sm_90"):
    """A pass's output verifies for `target` and round-trips through its text; the reparsed program."""
    errors = [d for d in check_program(program, target) if d.is_error]
    assert not errors, errors
    text = program.text()
    again = parse(text)
    assert same_ir(program, again)
    assert again.text() == text
    return again


def run(program, inputs, params=None):
    """Interpret `program` on copies of `inputs` (the interpreter writes its outputs in place)."""
    return interp_run(program, {k: v.copy() for k, v in inputs.items()}, params or {})
