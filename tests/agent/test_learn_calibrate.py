"""Measurements -> calibration: real H200 measurements (three tasks of the committed variant
sweep) refit the factors and a learned correction, each gated leave-one-task-out; the kept
calibration is a file the cost model loads, applied to predictions made before compile only,
and `kir learn --retire` removes it. Store nodes with a GPU timing are measurements; mtia-sim's
and failed nodes are not."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from agent.learn import calibrate as lc
from agent.pipeline import Record
from agent.search.tree import EVALUATED, Move, Node
from agent.store import open_store
from agent.tasks import load_task
from costmodel import CostModel, calibration
from costmodel.model import measurement_raw
from kir.parser import parse, parse_file

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "benchmarks" / "results" / "costmodel-h200-2026-11-29-pooled" / "costmodel-measured.json"
TASKS = ("gemm", "silu_mul", "softmax")
runner = CliRunner()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> str:
    data = json.loads(SWEEP.read_text())
    rows = [v for v in data["variants"] if v["task"] in TASKS and v.get("measured_s")]
    picked = [v for t in TASKS for v in [r for r in rows if r["task"] == t][:14]]
    path = tmp_path_factory.mktemp("cal") / "sweep.json"
    path.write_text(json.dumps({"gpu": data["gpu"], "date": data["date"], "variants": picked}))
    return str(path)


@pytest.fixture(scope="module")
def fitted(sweep) -> lc.Fit:
    (f,) = lc.fit(lc.measurements([sweep]))
    return f


def test_the_gates_compare_out_of_sample_with_the_model_without(fitted):
    assert fitted.target == "sm_90" and fitted.measurements == 42 and set(fitted.tasks) == set(TASKS)
    s = fitted.summary
    for key in ("calibrated", "uncalibrated", "before_uncalibrated", "before_calibrated", "before_corrected"):
        assert 0.0 <= s[f"mean_pairs_right_{key}"] <= 1.0 and s[f"median_abs_err_{key}"] >= 0.0
    # each gate's verdict follows from its figures
    assert ("orders fewer pairs" in " ".join(fitted.reasons)) == (
        s["mean_pairs_right_calibrated"] < s["mean_pairs_right_uncalibrated"] - 1e-9
    )
    gained = s["mean_pairs_right_before_corrected"] >= s["mean_pairs_right_before_calibrated"] + lc.MIN_GAIN
    assert gained or fitted.correction is None
    assert (fitted.correction is not None) == (not fitted.correction_reasons)


def test_the_correction_is_data_read_back_exactly(fitted, sweep):
    m = lc.measurements([sweep])[0]
    raw = measurement_raw({**m.as_update(), "registers": None, "smem_bytes": None, "spills": None})
    corr = calibration.fit_correction([raw] * 3, [m.seconds] * 3)
    back = calibration.Correction.from_json(json.loads(json.dumps(corr.to_json())))
    assert back.factor(raw) == corr.factor(raw)
    # trained on one program's time: it moves the prediction toward it (shrunk by SHRINK)
    before = raw.time()[0]
    assert math.log(before * corr.factor(raw) / m.seconds) == pytest.approx(
        (1 - calibration.SHRINK * (1 - (1 - calibration.RATE) ** calibration.TREES)) * math.log(before / m.seconds),
        rel=0.05,
    )
    bad = corr.to_json()
    bad["trees"][0]["left"][0] = 99
    with pytest.raises(ValueError, match="outside the tree"):
        calibration.Correction.from_json(bad)
    with pytest.raises(ValueError, match="other features"):
        calibration.Correction.from_json({**corr.to_json(), "features": ["log_time"]})


def test_a_kept_calibration_applies_before_compile_only_and_retires(fitted, sweep, tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.ENV_DIR, str(tmp_path))
    m = lc.measurements([sweep])[0]
    f = lc.Fit(fitted.target, {"l2": 0.9}, 3, ["x"], correction=calibration.Correction(
        (calibration.Tree((-1,), (-1,), (0,), (-2.0,), (10.0,)),), rate=0.1, shrink=0.5,
    ))  # fmt: skip
    path = lc.keep(f, tmp_path)
    assert path.name == "h200.json" and set(calibration.learned()) == {f.id}
    program = parse(m.text)
    plain = CostModel().predict(program, "sm_90", m.params, m.shapes, with_hints=False)
    learned = CostModel.learned()
    before = learned.predict(program, "sm_90", m.params, m.shapes, with_hints=False)
    factors_only = CostModel({"h200": {"l2": 0.9}}).predict(program, "sm_90", m.params, m.shapes, with_hints=False)
    assert before.time_s == pytest.approx(factors_only.time_s * math.exp(0.5), rel=1e-9)
    assert before.uncalibrated_s == plain.uncalibrated_s

    class Report:
        registers, shared_bytes, spills = 128, 0, 0

    after = learned.predict(program, "sm_90", m.params, m.shapes, report=Report(), with_hints=False)
    reported = CostModel({"h200": {"l2": 0.9}}).predict(
        program, "sm_90", m.params, m.shapes, report=Report(), with_hints=False
    )
    assert after.time_s == reported.time_s  # the correction is for predictions before compile
    assert CostModel.load(path).learned_corrections["h200"] == f.correction
    # a file that does not read is left out, not an error
    (tmp_path / "broken.json").write_text("{not json")
    assert set(calibration.learned()) == {f.id}
    result = runner.invoke(app, ["learn", "--retire", f.id, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["retired"]["files"] == [str(path)] and not path.exists()
    result = runner.invoke(app, ["learn", "--retire", f.id])
    assert result.exit_code == 2 and f"no learned item '{f.id}'" in result.output


def test_store_nodes_with_a_gpu_timing_are_measurements(tmp_path):
    db = str(tmp_path / "s.sqlite")
    spec = load_task(ROOT / "benchmarks" / "tasks" / "softmax").programs["seed"]
    text = parse_file(str(spec.file)).with_params(**spec.params_for("bench")).text()
    with open_store(db) as store:
        sid = store.search("softmax-beam", "softmax", {"preset": "bench"})
        # a GPU timing; one of a CPU backend (never a GPU's time, whatever its record says); a failed one
        for i, (backend, ok, ms) in enumerate(
            [("triton", True, 0.5), ("mtia-sim", True, 0.45), ("triton", False, 0.4)]
        ):
            verdict = {"ok": ok, "metrics": {"ms": ms, "cycles": 1000}}
            record = Record(f"c{i}", "<x>", "run", ok, "run", target="sm_90", backend=backend, task="softmax",
                            verdict=verdict, report={"registers": 40, "shared_bytes": 0, "spills": 0})  # fmt: skip
            store.put(
                sid,
                Node(
                    i,
                    None if i == 0 else 0,
                    f"k{i}",
                    text + "\n" * i,
                    Move("seed", "seed"),
                    status=EVALUATED,
                    record=record,
                ),
            )
    (m,) = lc.measurements([db])
    assert (m.task, m.target, m.seconds, m.registers, m.smem_bytes) == ("softmax", "sm_90", 0.5e-3, 40, 0)
    assert m.shapes and m.source == "s.sqlite#softmax-beam"
    (f,) = lc.fit([m])
    assert not f.kept and "leaving one out needs 2" in f.reasons[0]
    (f,) = lc.fit([replace(m, text=parse_file(str(spec.file)).text())])  # BLOCK too small for the shapes
    assert f.skipped == 1 and not f.kept and "none of its 1 measurements could be counted" in f.reasons[0]


def test_kir_learn_calibrate_reports_and_writes(sweep, tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.ENV_DIR, str(tmp_path / "lib"))
    result = runner.invoke(app, ["learn", sweep, "--calibrate", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # the progress of the leave-one-out fits is on stderr
    (row,) = data["calibrations"]
    assert row["target"] == "sm_90" and row["file"] is None and not (tmp_path / "lib").exists()
    assert set(row["provenance"]["gate"]["tasks"]) == set(TASKS)
    for argv, words in (
        (["learn", "--retire", "x", sweep], "--retire with something to learn"),
        (["learn", "--calibrate"], "no store to learn from"),
        (["learn", str(tmp_path), "--calibrate"], "is not a file"),
    ):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and words in result.output, (argv, result.output)
    bad = tmp_path / "bad.json"
    bad.write_text('{"variants": [{"task": "x", "measured_s": 1.0}]}')  # no program
    result = runner.invoke(app, ["learn", str(bad), "--calibrate"])
    assert result.exit_code == 2 and "does not read" in result.output and "Traceback" not in result.output
