"""The cost model's mtia-sim accuracy: predicted time against the simulator's cycles, per task,
over variants of the task's programs (tile parameters swept; the mtia programs also with their
two-slot DMA ring single-buffered, `cp.async.wait(0)` in place of `wait(1)`).

    python benchmarks/mtia_costmodel.py [--out benchmarks/results/mtia-sim] [--jobs 2] [--tasks softmax gemm]

Each variant runs once on the simulator (`lowering.targets.mtia_sim.runtime`: cycles are deterministic) and
is predicted by the candidate pipeline's cost stage (`agent.pipeline.evaluate(..., until="cost",
target="mtia-sim")`: verified, then costed; a refusal is the variant's error); simulated time is
cycles / clock (1 GHz). Figures per task: Spearman rank correlation, the share of variant pairs
ordered right, the median absolute error (relative, and in microseconds). Shapes (`SHAPES`) are
small enough that a variant simulates in seconds (the simulator computes every product on the
host) and still fill the 64 PEs for most tilings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from costmodel_accuracy import pairs_right, spearman  # noqa: E402

DATE = "2026-11-29"
CLOCK_HZ = 1e9
SINGLE = ("cp.async.wait(1)", "cp.async.wait(0)")  # the DMA ring single-buffered

SHAPES = {
    "softmax": {"M": 1024, "N": 2048},
    "gemm": {"M": 512, "N": 512, "K": 512},
    "kmeans_assign": {"P": 2048, "C": 1024, "D": 128},
    "rmsnorm": {"M": 1024, "N": 2048},
    "layernorm": {"M": 1024, "N": 2048},
    "silu_mul": {"M": 1024, "N": 2048},
}

# (program, parameters, single-buffered)
VARIANTS: dict[str, list[tuple[str, dict[str, int], bool]]] = {
    "softmax": [
        *[("seed", {"BLOCK": b}, False) for b in (2048, 4096, 8192)],
        *[("mtia", {"BLOCK": 2048, "R": r}, False) for r in (1, 2, 4, 8, 16)],
        ("mtia", {"BLOCK": 4096, "R": 16}, False),
        ("mtia", {"BLOCK": 2048, "R": 4}, True),
        ("mtia", {"BLOCK": 2048, "R": 16}, True),
    ],
    "gemm": [
        *[
            ("seed", dict(zip(("BM", "BN", "BK"), t, strict=True)), False)
            for t in ((64, 64, 32), (32, 32, 32), (128, 128, 32), (64, 64, 64))
        ],
        *[
            ("mtia", dict(zip(("BM", "BN", "BK"), t, strict=True)), False)
            for t in ((32, 32, 16), (64, 64, 32), (128, 128, 32), (128, 128, 64), (256, 256, 32), (128, 256, 32))
        ],
        ("mtia", {"BM": 128, "BN": 128, "BK": 32}, True),
        ("mtia", {"BM": 256, "BN": 256, "BK": 32}, True),
    ],  # fmt: skip
    "kmeans_assign": [
        *[("seed", {"BP": bp, "BC": bc, "BD": 128}, False) for bp, bc in ((32, 64), (64, 64), (32, 32), (128, 64))],
        *[
            ("mtia", {"BP": bp, "BC": bc, "BD": 128}, False)
            for bp, bc in ((32, 64), (64, 64), (128, 64), (128, 32), (64, 128))
        ],
        ("mtia", {"BP": 64, "BC": 64, "BD": 128}, True),
        ("mtia", {"BP": 128, "BC": 64, "BD": 128}, True),
    ],  # fmt: skip
    "rmsnorm": [(p, {"BLOCK": b}, False) for p in ("seed", "tuned") for b in (2048, 4096, 8192, 16384)],
    "layernorm": [(p, {"BLOCK": b}, False) for p in ("seed", "tuned") for b in (2048, 4096, 8192, 16384)],
    "silu_mul": [
        *[("seed", {"BLOCK": b}, False) for b in (2048, 4096, 8192, 16384)],
        *[("tuned", {"BM": bm, "BN": bn}, False) for bm, bn in ((1, 256), (2, 512), (4, 1024), (4, 256), (8, 512))],
    ],
}


def program_text(task: str, which: str, single: bool) -> tuple[str, str]:
    from agent.tasks import load_task  # noqa: PLC0415

    spec = load_task(ROOT / "tasks" / task).programs[which]
    text = Path(spec.file).read_text()
    if single:
        assert SINGLE[0] in text, f"{task}/{which} has no double-buffered ring"
        text = text.replace(*SINGLE)
    return str(spec.file), text


def run_variant(job: tuple[str, str, dict[str, int], bool]) -> dict:
    """Simulate and predict one variant (in a worker process)."""
    from mtia_speedups import inputs_for  # noqa: PLC0415

    from agent.pipeline import Candidate, evaluate  # noqa: PLC0415
    from kir.diagnostics import KirError  # noqa: PLC0415
    from kir.parser import parse  # noqa: PLC0415
    from lowering.targets.mtia_sim.runtime import run_mtia  # noqa: PLC0415

    task, which, params, single = job
    shapes = SHAPES[task]
    file, text = program_text(task, which, single)
    row = {"task": task, "program": which, "params": params, "single_buffered": single, "shapes": shapes}
    try:
        program = parse(text, file=file)
        record = evaluate(Candidate.from_program(program, params), until="cost", target="mtia-sim", shapes=shapes)
        if not record.ok:
            raise KirError(record.errors)
        row["predicted_s"] = record.estimate["time_s"]
        row["predicted_bottleneck"] = record.estimate["bottleneck"]
        start = time.monotonic()
        result = run_mtia(program, inputs_for(program, shapes), params)
        row["host_seconds"] = round(time.monotonic() - start, 2)
        row["cycles"] = result.cycles
        row["simulated_s"] = result.cycles / CLOCK_HZ
        row["stats"] = result.stats
    except Exception as err:  # a variant the backend refuses is recorded, not fatal
        row["error"] = f"{type(err).__name__}: {err}"[:500]
    return row


def task_figures(rows: list[dict]) -> dict:
    ok = [r for r in rows if "error" not in r]
    pred = [r["predicted_s"] for r in ok]
    sim = [r["simulated_s"] for r in ok]
    rel = [abs(p - s) / s for p, s in zip(pred, sim, strict=True)]
    n = len(ok)
    pairs = sum(1 for i in range(n) for j in range(i + 1, n) if sim[i] != sim[j])
    return {
        "variants": n,
        "failed": len(rows) - n,
        "spearman": spearman(pred, sim),
        "pairs_right": pairs_right(pred, sim),
        "pairs": pairs,
        "median_abs_rel_error": statistics.median(rel) if rel else None,
        "median_abs_error_us": statistics.median(abs(p - s) * 1e6 for p, s in zip(pred, sim, strict=True))
        if ok
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "results" / "mtia-sim"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tasks", nargs="*", default=list(VARIANTS))
    args = parser.parse_args(argv)
    jobs = [(t, w, p, s) for t in args.tasks for w, p, s in VARIANTS[t]]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run_variant, jobs))
    report = {
        "what": "cost model (costmodel/mtia.py) vs the mtia-sim simulator's cycles, per task",
        "generated_by": "python benchmarks/mtia_costmodel.py",
        "date": DATE,
        "clock_hz": CLOCK_HZ,
        "shapes": {t: SHAPES[t] for t in args.tasks},
        "tasks": {},
        "variants": rows,
    }
    for t in args.tasks:
        report["tasks"][t] = task_figures([r for r in rows if r["task"] == t])
    all_figs = list(report["tasks"].values())
    report["summary"] = {
        "mean_spearman": statistics.fmean(f["spearman"] for f in all_figs if f["spearman"] is not None),
        "mean_pairs_right": statistics.fmean(f["pairs_right"] for f in all_figs if f["pairs_right"] is not None),
        "min_pairs_right": min(f["pairs_right"] for f in all_figs if f["pairs_right"] is not None),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"costmodel-accuracy-mtia-sim-{DATE}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    for r in rows:
        what = f"{r['task']:<14} {r['program']:<6} {json.dumps(r['params']):<40} {'single' if r['single_buffered'] else '':<6}"
        if "error" in r:
            print(f"{what} ERROR {r['error'][:100]}")
        else:
            print(
                f"{what} sim {r['cycles']:>9,}  pred {r['predicted_s'] * CLOCK_HZ:>11,.0f}  {r['predicted_bottleneck']}"
            )
    print()
    print(f"{'task':<14} {'n':>3} {'spearman':>9} {'pairs right':>12} {'median |err|':>13}")
    for t, f in report["tasks"].items():
        sp = "-" if f["spearman"] is None else f"{f['spearman']:.3f}"
        pr = "-" if f["pairs_right"] is None else f"{f['pairs_right']:.3f}"
        me = "-" if f["median_abs_rel_error"] is None else f"{100 * f['median_abs_rel_error']:.1f}%"
        print(f"{t:<14} {f['variants']:>3} {sp:>9} {pr:>12} {me:>13}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
