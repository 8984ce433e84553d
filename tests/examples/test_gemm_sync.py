"""The explicit Hopper GEMM: each synchronization op is needed, and the interpreter says which.

Removing any `wait`, or giving an mbarrier an arrive count that does not match its arrivals,
must make the reference interpreter report a race or a deadlock, located at a line that the
broken synchronization leaves unprotected (the primary span or a related one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.parser import parse
from tests.examples.references import BF16

SOURCE = (Path(__file__).resolve().parents[2] / "examples" / "gemm_hopper_ws.kir").read_text()
LINES = SOURCE.splitlines()
PARAMS = {"BM": 64, "BN": 64, "BK": 32, "S": 2}  # 8 k-steps through a 2-stage ring


def line_of(fragment: str, nth: int = 0) -> int:
    hits = [i + 1 for i, line in enumerate(LINES) if fragment in line]
    return hits[nth]


def inputs():
    rng = np.random.default_rng(0)
    return {
        "a": rng.standard_normal((128, 256)).astype(BF16),
        "b": rng.standard_normal((256, 128)).astype(BF16),
    }


def run_text(text: str):
    from kir.interp import run

    return run(parse(text, file="gemm.kir"), inputs(), PARAMS)


def failure(text: str):
    with pytest.raises(KirError) as err:
        run_text(text)
    errors = [d for d in err.value.diagnostics if d.severity == "error"]
    assert errors, "no error diagnostic"
    return errors[0]


def drop_line(fragment: str) -> str:
    return "\n".join(line for line in LINES if fragment not in line) + "\n"


def lines_of(d) -> set[int]:
    return {d.span.line} | {r.span.line for r in d.related}


def test_unmodified_gemm_is_clean_and_correct():
    out = run_text(SOURCE)
    i = inputs()
    want = i["a"].astype(np.float64) @ i["b"].astype(np.float64)
    np.testing.assert_allclose(out["c"].astype(np.float64), want, rtol=2e-2, atol=1e-1)


MUTATIONS = {
    # the producer overwrites a stage the consumers may still read: its TMA writes are unordered
    "producer wait on empty": ("wait(empty[s]", ["tma.load(a[", "tma.load(b["]),
    # the consumers read a stage before its TMA bytes are known to have landed
    "consumer wait on full": ("wait(full[s]", ["acc = wgmma("]),
    # the consumers release a stage while their wgmma still reads it
    "wgmma.wait": ("wgmma.wait(0)", ["acc = wgmma(", "tma.load(a[", "tma.load(b["]),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_removing_a_wait_is_reported_at_the_unprotected_access(name):
    fragment, expected = MUTATIONS[name]
    d = failure(drop_line(fragment))
    assert d.rule in ("interp.race", "interp.deadlock"), d
    want = {line_of(e) - (1 if line_of(e) > line_of(fragment) else 0) for e in expected}
    assert lines_of(d) & want, f"{d.rule} at {d.span.line} (related {lines_of(d)}), expected one of {want}: {d.message}"
    assert d.hint


def test_too_few_expected_arrivals_let_the_producer_overrun_a_consumer():
    # count = 1 while two consumer warpgroups arrive: a phase ends after the first one
    d = failure(SOURCE.replace("empty = mbarrier(S, count = 2)", "empty = mbarrier(S, count = 1)"))
    assert d.rule == "interp.race"
    assert lines_of(d) & {line_of("acc = wgmma("), line_of("tma.load(a["), line_of("tma.load(b[")}


def test_too_many_expected_arrivals_deadlock_the_producer():
    d = failure(SOURCE.replace("empty = mbarrier(S, count = 2)", "empty = mbarrier(S, count = 3)"))
    assert d.rule == "interp.deadlock"
    assert d.span.line == line_of("wait(empty[s]")
    assert "arriv" in d.message or "arriv" in d.hint


def test_expect_bytes_short_by_one_tile_is_a_race():
    d = failure(SOURCE.replace("bytes = sizeof(as[s]) + sizeof(bs[s])", "bytes = sizeof(as[s])"))
    assert d.rule == "interp.race"
    assert lines_of(d) & {line_of("acc = wgmma("), line_of("tma.load(b[")}


def test_expect_bytes_over_deadlocks_the_consumers():
    d = failure(SOURCE.replace("bytes = sizeof(as[s]) + sizeof(bs[s])", "bytes = sizeof(as[s]) + sizeof(bs[s]) + 2"))
    assert d.rule == "interp.deadlock"
    assert d.span.line in (line_of("wait(full[s]"), line_of("wait(empty[s]"))


def test_wrong_parity_is_reported():
    d = failure(SOURCE.replace("parity = (k / S) % 2", "parity = (k / S + 1) % 2"))
    assert d.rule in ("interp.race", "interp.deadlock", "interp.uninitialized-read")
