"""The accuracy measurement's scripts: the variant generator and the accuracy figures, on
synthetic numbers (the real ones come from the GPU)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kir.parser import parse
from verifier.check import check_program

ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


variants = load("costmodel_variants")
accuracy = load("costmodel_accuracy")


def test_with_warps_rewrites_the_launch_only():
    text = (ROOT / "benchmarks/tasks/softmax/tuned.kir").read_text()
    program = parse(text)
    new = variants.with_warps(program.text(), 8)
    again = parse(new)
    assert again.kernel.num_warps.data == 8
    assert again.kernel.grid == program.kernel.grid and again.params == program.params


@pytest.mark.parametrize("task", ["softmax", "gemm", "causal_attention"])
def test_candidates_are_many_and_mostly_valid(task):
    folder = ROOT / "benchmarks" / "tasks" / task
    meta = variants.task_meta(folder)
    shapes = meta["presets"]["bench"]
    seen, valid = set(), 0
    for _, label, text, params in variants.candidates(folder)[:14]:
        program = parse(text)
        key = (program.content_hash(), json.dumps(params, sort_keys=True))
        assert key not in seen or label != "base"
        seen.add(key)
        # never a parameter that sizes an argument or names a shape
        fixed = variants.fixed_params(program)
        base = {**program.params, **meta["programs"]["tuned"]["params"]["bench"]}
        if label != "base" and "warps" not in label:
            for name in fixed:
                if name in base and name in params and "," not in label:
                    assert params[name] == base.get(name, params[name]) or name not in label
        env = {**{k: v for k, v in shapes.items() if k not in program.params}, **params}
        if variants.where_holds(program, env) and not any(
            d.is_error for d in check_program(program.with_params(**params), "sm_90")
        ):
            valid += 1
    assert valid >= 8


def test_fixed_params_are_argument_sizes():
    program = parse((ROOT / "benchmarks/tasks/causal_attention/tuned.kir").read_text())
    assert variants.fixed_params(program) == {"HD"}


def test_time_job_shape():
    job = variants.time_job("softmax", [{"text": "kernel ...", "params": {"BLOCK": 8192}}], 2, 20)
    assert job["kind"] == "time" and job["time"] == {"sets": 2, "runs": 20, "peers": []}
    assert job["candidates"][0]["backend"] == "triton" and job["candidates"][0]["kind"] == "kir"


def test_rank_figures():
    assert accuracy.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert accuracy.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert accuracy.pairs_right([1, 2, 3], [1, 3, 2]) == pytest.approx(2 / 3)
    assert accuracy.median_abs_err([1.1, 2.0, 2.4], [1.0, 2.0, 3.0]) == pytest.approx(0.1)
    assert accuracy.ranks([5, 1, 5]) == [2.5, 1.0, 2.5]


def _synthetic(distort: dict[str, float]):
    """Variants of two tasks whose 'measured' times are the model's with a distorted chip."""
    from costmodel.model import measurement_raw

    rows = []
    for task, file, shapes, sweep in (
        ("softmax", "benchmarks/tasks/softmax/tuned.kir", {"M": 8192, "N": 8192}, [{"BLOCK": 8192}, {"BLOCK": 16384}]),
        ("gemm", "examples/gemm_hopper_ws.kir", {"M": 4096, "N": 4096, "K": 4096}, [{"S": s} for s in (2, 3, 4)]),
    ):
        text = (ROOT / file).read_text()
        for k, params in enumerate(sweep):
            for w, t in enumerate([text, variants.with_warps(parse(text).text(), 8) or text]):
                v = {"task": task, "id": f"{task}/{k}/{w}", "text": t, "params": params, "shapes": shapes}
                m = accuracy.measurement({**v, "measured_s": 1.0})
                v["measured_s"] = measurement_raw(m).time(distort)[0]
                rows.append(v)
    return rows


def test_accuracy_on_synthetic_measurements(tmp_path):
    # the overhead (launch, block overhead) is what both tasks have: what leave-one-task-out can
    # carry from one to the other (the scale is never fitted, calibration.py)
    rows = _synthetic({"dram": 1.2, "overhead": 1.3, "scale": 1.3})
    result = accuracy.evaluate(rows)
    assert {t["task"] for t in result["tasks"]} == {"softmax", "gemm"}
    for t in result["tasks"]:
        assert t["variants"] == len([r for r in rows if r["task"] == t["task"]])
        assert t["uncalibrated"]["median_abs_err"] > 0.2  # the distortion shows uncalibrated
    assert len(result["raw"]) == len(rows)
    assert all({"measured_s", "predicted_s", "calibrated_s"} <= set(r) for r in result["raw"])
    # leave-one-task-out: what is learned on the other task carries over
    assert result["summary"]["calibrated"]["median_abs_err"] < result["summary"]["uncalibrated"]["median_abs_err"]
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"gpu": "NVIDIA H200", "date": "2025-01-01", "variants": rows}))
    assert accuracy.main([str(measured), "--out", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "costmodel-accuracy-nvidia-h200-2025-01-01.json").read_text())
    assert {"gpu", "date", "tasks", "raw"} <= set(written)
    assert {"task", "variants", "pairs_right", "spearman", "median_abs_err"} <= set(written["tasks"][0])


def test_profile_task_names_a_program_and_overrides_its_parameters():
    from agent.tasks import load_task

    profile = load("profile_task")
    task = load_task(ROOT / "benchmarks" / "tasks" / "causal_attention")
    program, params = profile._program(task, "persistent:NSM=4,ST=3", "bench")
    assert program.kernel.sym_name.data == "causal_attention_persistent"
    assert params == {"BM": 128, "BN": 128, "HD": 128, "ST": 3, "NSM": 4}
    file = task.programs["seed"].file
    _, params = profile._program(task, f"{file}:BM=16", "bench")
    assert params == {"BM": 16}
