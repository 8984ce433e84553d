"""The explicit Hopper GEMM: single edits that break it are caught statically, at the edited
line, with a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verifier.harness import describe, diagnose

SOURCE = (Path(__file__).resolve().parents[2] / "examples" / "gemm_hopper_ws.kir").read_text()
LINES = SOURCE.splitlines()


def line_of(fragment: str) -> int:
    return next(i for i, text in enumerate(LINES, start=1) if fragment in text)


def errors(text: str):
    return [d for d in diagnose(text, "gemm.kir") if d.severity == "error"]


def test_the_example_is_clean():
    assert errors(SOURCE) == []


EDITS = {
    # the consumer's wait on `full` removed: the wgmma that follows moves up to its line
    "missing wait on full": (
        "      wait(full[s], parity = (k / S) % 2)\n",
        "",
        "sync.read-before-wait",
        line_of("wait(full[s]"),
    ),
    "wrong parity": ("parity = (k / S) % 2", "parity = (k / S + 1) % 2", "sync.parity", line_of("wait(full[s]")),
    "expect short by one tile": (
        "bytes = sizeof(as[s]) + sizeof(bs[s])",
        "bytes = sizeof(as[s])",
        "sync.expect-bytes",
        line_of("expect(full[s]"),
    ),
    "arrive count 1 for 2 consumers": (
        "empty = mbarrier(S, count = 2)",
        "empty = mbarrier(S, count = 1)",
        "sync.arrive-count",
        line_of("empty = mbarrier"),
    ),
    "box start out of bounds": (
        "grid(M / BM, N / BN)",
        "grid(M / BM + 1, N / BN)",
        "bounds.tma-box",
        line_of("tma.load(a["),
    ),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_single_edit_is_caught_at_the_edited_line(name):
    old, new, rule, line = EDITS[name]
    assert old in SOURCE
    found = errors(SOURCE.replace(old, new, 1))
    hits = [d for d in found if d.rule == rule and d.span.line == line]
    assert hits, f"expected {rule} at line {line}, got {describe(found)}"
    assert all(d.hint for d in hits)


def test_stage_count_that_overflows_shared_memory():
    found = errors(SOURCE.replace("S = 4>", "S = 8>"))
    smem = [d for d in found if d.rule == "resources.smem"]
    assert smem, describe(found)
    (d,) = smem
    param_line = line_of("kernel gemm_hopper_ws<")
    assert param_line in {d.span.line} | {r.span.line for r in d.related}
    assert "S = 7" in d.hint or "S" in d.hint
