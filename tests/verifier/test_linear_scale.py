"""Parse, print and check grow linearly with the length of a program (issue #18: a 29 KB program
took 66 s to parse and 157 s to check).

No clock is read: the tests count the Python-level calls (function calls and calls of C
functions, the profiler's `call` and `c_call` events) that parsing, printing and checking a
generated program make, and compare a program with one twice as long. Linear work doubles
(2.0); the quadratic spots this guards against (a walk of the whole block per statement, a
scan of every fact or every pair of stores per access, a block renumbered per value) gave
2.3-3.3 at these sizes. The counts are deterministic for a given program, so the bounds
cannot be tripped by a busy machine. Speed itself is `benchmarks/parse_check_scale.py`'s
business.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kir.parser import parse
from verifier import load_rules
from verifier.check import check_program
from verifier.symbolic import CACHE

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("parse_check_scale", ROOT / "benchmarks" / "parse_check_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


generate = _generator()


def calls(fn) -> tuple[int, object]:
    """How many calls `fn()` makes (Python functions and C functions), and its result."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return count, out


@pytest.fixture
def fresh_proofs(tmp_path, monkeypatch):
    """An empty proof cache for each program (answers from another size would save work)."""
    load_rules()
    check_program(parse(generate(2000)))  # the grammar and the solver loaded, untimed

    def reset(name: str) -> None:
        monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path / name))
        CACHE.reset()

    yield reset
    CACHE.reset()


def ratio(counts: list[int]) -> float:
    return counts[1] / counts[0]


def test_parsing_and_printing_twice_as_much_text_take_twice_the_calls(fresh_proofs):
    fresh_proofs("warm")
    parsed, printed = [], []
    for size in (16_000, 32_000):
        text = generate(size)
        n, program = calls(lambda text=text: parse(text))
        parsed.append(n)
        printed.append(calls(program.text)[0])
    assert ratio(parsed) < 2.2, parsed
    assert ratio(printed) < 2.2, printed


def test_checking_twice_as_much_text_takes_twice_the_calls(fresh_proofs):
    checked = []
    for size in (8_000, 16_000):
        fresh_proofs(str(size))
        program = parse(generate(size))
        n, diagnostics = calls(lambda program=program: check_program(program))
        assert diagnostics == [], [d.render() for d in diagnostics]  # the generated programs are valid
        checked.append(n)
    assert ratio(checked) < 2.3, checked


def test_long_runs_of_stores_need_few_proofs(fresh_proofs):
    """Stores to disjoint planes of one output (a long kernel's unrolled segments) are told
    apart without a solver: no pair of them is asked about, and their bounds claims differ
    only in the evidently in-bounds plane, so they are asked once."""
    from verifier.engine import verify

    fresh_proofs("proofs")
    program = parse(generate(16_000))
    stores = sum(1 for op in program.kernel.walk() if op.name.endswith("store"))
    assert stores > 50
    assert verify(program) == []
    assert CACHE.misses < 20, (CACHE.misses, stores)
