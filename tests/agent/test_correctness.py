"""The correctness protocol rejects what it must: a program that writes half its output, one that
mutates an input, an input alias, NaN, and a result less accurate than the tolerance; and accepts
a correct one. (These run trusted candidates in this process; a candidate that hunts for the
reference's tensors is tests/agent/hacks' business: in its own process there are none to find.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agent.harness.backends import KirCandidate
from agent.harness.correctness import KirRun, PythonRun, check
from agent.tasks import load_task
from kir.parser import parse

SOFTMAX = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax"
SEED = (SOFTMAX / "seed.kir").read_text()


@pytest.fixture(scope="module")
def task():
    return load_task(SOFTMAX)


def kir(text: str, backend: str = "interp"):
    return KirRun(KirCandidate(parse(text), backend, {"BLOCK": 512}))


def rules(verdict) -> list[str]:
    return [d.rule for d in verdict.diagnostics]


def test_the_seed_program_is_correct(task):
    verdict = check(task, kir(SEED), "test", seeds=[1, 2])
    assert verdict.ok and verdict.seeds == [1, 2]
    assert 0 < verdict.max_error["y"] < 1


def test_a_program_that_writes_half_its_rows_is_rejected_at_its_output(task):
    half = SEED.replace("  row = program_id(0)\n", "  row = program_id(0) * 2\n").replace(
        "mask = cols < N", "mask = (cols < N) & (row < M)"
    )
    verdict = check(task, kir(half), "test", seeds=[1])
    assert not verdict.ok and rules(verdict) == ["harness.nan"]
    diag = verdict.diagnostics[0]
    assert diag.span.line == 4 and "NaN" in diag.message and diag.counterexample["seed"] == 1


def test_a_program_that_writes_its_input_is_rejected(task):
    mutating = SEED.replace(
        "  store(y[row, cols]", "  store(x[row, cols], cast<bf16>(v * 2.0), mask = mask)\n  store(y[row, cols]"
    )
    verdict = check(task, kir(mutating), "test", seeds=[1])
    assert not verdict.ok and rules(verdict) == ["harness.input-mutated"]


def test_a_slightly_wrong_program_is_a_mismatch(task):
    wrong = SEED.replace("e / sum(e, axis = 0)", "e / (sum(e, axis = 0) * 1.05)")
    verdict = check(task, kir(wrong), "test", seeds=[1])
    assert not verdict.ok and rules(verdict) == ["harness.mismatch"]
    assert verdict.diagnostics[0].counterexample["count"] > 0


def test_returning_an_input_is_rejected(task):
    verdict = check(task, PythonRun(lambda x: x), "test", seeds=[1])
    assert not verdict.ok and rules(verdict) == ["harness.alias"]


def test_nan_never_passes_even_where_the_tolerance_is_loose(task):
    def with_nan(x):
        y = torch.softmax(x.float(), -1).to(x.dtype)
        y[0, 0] = float("nan")
        return y

    verdict = check(task, PythonRun(with_nan), "test", seeds=[1])
    assert not verdict.ok and rules(verdict) == ["harness.nan"]


def test_a_python_candidate_as_accurate_as_pytorch_passes(task):
    verdict = check(task, PythonRun(lambda x: torch.softmax(x.float(), -1).to(x.dtype)), "test", rounds=2)
    assert verdict.ok and len(verdict.seeds) == 2 and verdict.seeds[0] != verdict.seeds[1]


def test_integer_outputs_are_poisoned_differently_on_each_round():
    from agent.harness.correctness import poisoned_like

    t = torch.zeros(3, dtype=torch.int64)
    assert poisoned_like(t, 0).tolist() != poisoned_like(t, 1).tolist()
    assert torch.isnan(poisoned_like(torch.zeros(2), 0)).all()


def test_an_argument_of_lower_rank_binds_the_contiguous_view_and_a_strided_tensor_is_refused():
    from types import SimpleNamespace

    from agent.harness.backends import bind
    from kir.diagnostics import KirError

    program = parse(
        """kernel k<BLOCK = 16>(w: global f32[C, C * KW], y: out global f32[C, C * KW])
  target sm_90 grid(1) warps(4)
{
  store(y[0, 0 : BLOCK], load(w[0, 0 : BLOCK]))
}
"""
    )
    w = torch.randn(4, 4, 7)
    y = torch.empty(4, 4, 7)
    plain = SimpleNamespace(name="plain", bind=None)
    tensors = bind(program, plain, [w], [y], None)
    assert tensors["w"].shape == (4, 28) and tensors["w"].data_ptr() == w.data_ptr()
    assert tensors["y"].data_ptr() == y.data_ptr()
    with pytest.raises(KirError, match="2 dimensions"):
        bind(program, plain, [w.transpose(1, 2)], [y], None)


def test_the_comparison_in_chunks_finds_the_worst_element_past_the_first_chunk(task, monkeypatch):
    import agent.harness.correctness as correctness

    monkeypatch.setattr(correctness, "COMPARE_CHUNK", 100)  # 8 x 300 outputs: 24 chunks

    def off_by_one_element(x):
        y = torch.softmax(x.float(), -1)
        y[5, 217] += 0.5
        return y.to(x.dtype)

    verdict = check(task, PythonRun(off_by_one_element), "test", seeds=[1])
    assert not verdict.ok and rules(verdict) == ["harness.mismatch"]
    assert "1 of 2400 elements" in verdict.diagnostics[0].message and "[5, 217]" in verdict.diagnostics[0].message
    good = check(task, PythonRun(lambda x: torch.softmax(x.float(), -1).to(x.dtype)), "test", seeds=[1])
    assert good.ok and max(good.max_error.values()) > 0
