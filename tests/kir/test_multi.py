"""Programs of several kernels (`kir.multi`): parsed in place and printed back, checked kernel by
kernel and across kernels (`multi.*`), costed as launches in order, and run correct on the CPU
backends against a task whose reference is one PyTorch op (a split mean-squared-error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.frontend.make import seed_task
from agent.pipeline import Candidate, evaluate
from agent.tasks import load_task
from costmodel.model import CostModel
from kir.diagnostics import KirError
from kir.parser import parse
from verifier.check import check_program

ROOT = Path(__file__).resolve().parents[2]

MSE = """\
# mean squared error in two launches: a partial sum per row, then the mean of the partials
scratch partial: f32[M]

kernel mse_rows<BLOCK = 64>(
    predictions: global f32[M, N],
    targets: global f32[M, N],
    partial: out global f32[M],
)
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  x1 = load(predictions[row, cols], mask = mask)
  x2 = load(targets[row, cols], mask = mask)
  store(partial[row], sum(where(mask, (x1 - x2) * (x1 - x2), 0.0), axis = 0))
}

kernel mse_total<RB = 32>(
    partial: global f32[M],
    y: out global f32[1],
    predictions: global f32[M, N],
)
  target sm_90 grid(1) warps(4)
{
  rows = arange(0, RB)
  total = 0.0
  for start in 0 .. M step RB {
    idx = start + rows
    p = load(partial[idx], mask = idx < M)
    total = total + sum(where(idx < M, p, 0.0), axis = 0)
  }
  store(y[0], total / (cast<f32>(M) * cast<f32>(N)))
}
"""


def rules(text: str) -> list[tuple[str, str, int]]:
    return [(d.rule, d.severity, d.span.line if d.span else 0) for d in check_program(parse(text, "m.kir"))]


def test_parse_print_round_trip_and_identity():
    p = parse(MSE, "m.kir")
    assert p.is_multi and [k.name for k in p.kernels()] == ["mse_rows", "mse_total"]
    assert [s.name for s in p.scratch] == ["partial"] and p.scratch[0].span.line == 2
    assert p.params == {"BLOCK": 64, "RB": 32}
    again = parse(p.text(), "m.kir")
    assert again.text() == p.text() and again.content_hash() == p.content_hash()
    assert p.text().startswith("# mean squared error")  # the file's first comment stays first
    # the spans are the file's: the second kernel starts on line 20, its store is on line 34
    from kir.program import span_of

    store = [op for op in p.stages[0].kernel.walk() if op.name == "kir.store"][0]
    assert p.stages[0].span().line == 20 and span_of(store).line == 34
    changed = parse(MSE.replace("RB = 32", "RB = 16"), "m.kir")
    assert changed.content_hash() != p.content_hash()


def test_with_params_sets_every_kernel_that_declares_the_name_and_clone_is_deep():
    p = parse(MSE, "m.kir")
    q = p.with_params(RB=16, BLOCK=128)
    assert q.params == {"BLOCK": 128, "RB": 16} and p.params == {"BLOCK": 64, "RB": 32}
    assert q.stages[0].kernel is not p.stages[0].kernel
    with pytest.raises(KeyError):
        p.with_params(NOPE=1)


def test_a_correct_program_checks_clean():
    assert [r for r in rules(MSE) if r[1] == "error"] == []


@pytest.mark.parametrize(
    "edit, rule, line",
    [
        # the reader launched before the writer: scratch read before any kernel writes it
        (lambda t: _swap(t), "multi.scratch-unwritten", None),
        (lambda t: t.replace("partial: global f32[M]", "partial: global f32[N]"), "multi.scratch", 21),
        (lambda t: t.replace("RB = 32", "BLOCK = 32").replace("RB", "BLOCK"), "multi.param", 20),
        (lambda t: t.replace("  target sm_90 grid(1)", "  target sm_80 grid(1)"), "multi.target", 25),
        (lambda t: t.replace("    predictions: global f32[M, N],\n)", "    predictions: global f32[N, M],\n)"),
         "multi.arg", 23),
        (lambda t: t.replace("scratch partial: f32[M]", "scratch partial: f32[M]\nscratch extra: f32[Q]"),
         "multi.scratch", 3),
    ],
)  # fmt: skip
def test_rules_across_kernels(edit, rule, line):
    found = rules(edit(MSE))
    hits = [r for r in found if r[0] == rule and r[1] == "error"]
    assert hits, found
    if line is not None:
        assert any(r[2] == line for r in hits), hits


def _swap(text: str) -> str:
    head, first, second = text.split("\nkernel ")
    return f"{head}\nkernel {second.rstrip()}\n\nkernel {first.rstrip()}\n"


@pytest.mark.parametrize(
    "text, rule, line",
    [
        ("scratch p f32[M]\n" + MSE, "syntax.scratch", 1),
        ("scratch p: q32[M]\n" + MSE, "syntax.scratch", 1),
        ("scratch p: f32[M,, ]\n" + MSE, "syntax.scratch", 1),
        ("scratch p: f32[]\n" + MSE, "syntax.scratch", 1),
        (MSE + "\nscratch late: f32[M]\n", "syntax.scratch", 37),
        # an error in the second kernel is located at its line in the file
        (MSE.replace("total = total + sum", "total = total + summ"), None, 32),
    ],
)
def test_bad_text_is_a_located_diagnostic(text, rule, line):
    with pytest.raises(KirError) as err:
        parse(text, "m.kir")
    d = err.value.diagnostics[0]
    assert d.span is not None and d.span.line == line, err.value.diagnostics
    if rule:
        assert d.rule == rule


def test_cost_is_the_launches_in_order():
    p = parse(MSE, "m.kir")
    shapes = {"M": 4096, "N": 64}
    model = CostModel()
    whole = model.predict(p, "sm_90", shapes=shapes)
    parts = [model.predict(k, "sm_90", shapes=shapes) for k in p.kernels()]
    assert whole.time_s == pytest.approx(sum(e.time_s for e in parts))
    assert whole.counts["kernels"] == 2
    assert any("kernel mse_total" in t.note for t in whole.breakdown)


@pytest.fixture(scope="module")
def mse_task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mse") / "task"
    seed_task(ROOT / "benchmarks" / "kernelbench" / "loss_01_mse.py", folder)
    return load_task(folder)


@pytest.mark.parametrize("backend", ["interp", "triton-interp", "mtia-sim"])
def test_runs_correct_on_the_cpu_backends(mse_task, backend):
    rec = evaluate(
        Candidate(MSE, (("BLOCK", 256),), "m.kir"), until="run", backend=backend, task=mse_task, preset="test",
        seeds=[1], timeout=600,
    )  # fmt: skip
    assert rec.ok, [d.message for d in rec.diagnostics]


def test_a_wrong_second_kernel_fails_the_check(mse_task):
    wrong = MSE.replace("store(y[0], total / (cast<f32>(M) * cast<f32>(N)))", "store(y[0], total / cast<f32>(M))")
    rec = evaluate(
        Candidate(wrong, (("BLOCK", 256),), "m.kir"), until="run", backend="interp", task=mse_task, preset="test",
        seeds=[1], timeout=600,
    )  # fmt: skip
    assert not rec.ok and rec.stage == "run"


def test_a_modelnew_launches_the_kernels_in_order_and_passes_the_check(mse_task, tmp_path):
    from agent.frontend.solution import write_solution
    from agent.harness.isolate import run_job

    prob = ROOT / "benchmarks" / "kernelbench" / "loss_01_mse.py"
    program = parse(MSE).with_params(BLOCK=256)
    good = write_solution(mse_task, program, prob, tmp_path / "good.py")
    text = good.read_text()
    assert "torch.empty((symbols['M'],), dtype=torch.float32" in text  # the scratch buffer
    assert text.index("mse_rows[(") < text.index("mse_total[(")
    job = {"task": str(mse_task.folder), "candidate": {"kind": "python", "file": str(good)}, "preset": "test"}
    record = run_job(job, timeout=300)
    assert record["ok"] and record["stage"] == "done", record
    wrong = parse(MSE.replace("cast<f32>(M) * cast<f32>(N)", "cast<f32>(M)")).with_params(BLOCK=256)
    bad = write_solution(mse_task, wrong, prob, tmp_path / "bad.py")
    record = run_job({**job, "candidate": {"kind": "python", "file": str(bad)}}, timeout=300)
    assert not record["ok"] and record["stage"] == "correctness", record


def test_a_tactic_rewrites_the_first_kernel_it_applies_to_and_keeps_the_others():
    import tactics

    p = parse(MSE, "m.kir")
    retile = tactics.get("retile")
    assert retile.focus(p) == 0
    child = retile.apply(p, param="BLOCK", value=128)
    assert child.is_multi and child.params == {"BLOCK": 128, "RB": 32}
    assert child.stages[0].text() == p.stages[0].text() and p.params["BLOCK"] == 64
    pipeline = tactics.get("pipeline")  # only the second kernel has a loop
    assert pipeline.focus(p) == 1 and not pipeline.precondition(p)
    piped = pipeline.apply(p, loop=0, stages=3)
    assert "pipeline(stages = 3)" in piped.stages[0].text() and piped.kernels()[0].text() == p.kernels()[0].text()
    assert [d for d in check_program(piped) if d.is_error] == []
    assert tactics.get("row-band").precondition(p) == []  # the rows kernel
