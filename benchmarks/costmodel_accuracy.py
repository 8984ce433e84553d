"""The cost model's accuracy on measured variants: rank agreement and error, per task.

    python benchmarks/costmodel_accuracy.py MEASURED.json [--out benchmarks/results/]

MEASURED.json is what `benchmarks/costmodel_variants.py time` writes on the GPU: {"gpu", "date",
"variants": [{"task", "id", "text", "params", "shapes", "registers", "smem_bytes", "measured_s"}]}.
For each task, over its variants: Spearman's rank correlation of predicted and measured times,
the share of pairs of variants the prediction orders as measured (`pairs_right`; and, where the
variants were timed in several passes, `pairs_right_repeatable` over the pairs every pass orders
alike, since a pair whose order flips between passes is a tie within the noise), and the median
of |predicted - measured| / measured. Twice: uncalibrated, and calibrated leave-one-task-out
(the correction factors fitted on every other task's measurements, then applied to this one).
The JSON written, `costmodel-accuracy-<gpu>-<date>.json`, holds the calibrated figures per task
with the uncalibrated ones beside them, the totals, and every variant's measured and predicted
times.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from costmodel.calibration import pairs_right  # noqa: E402

TARGET = "sm_90"


def ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 2:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va and vb else None


NOISE = 0.05  # measured times closer than this (relative) are within the timing noise


def pairs_right_apart(predicted: list[float], measured: list[float], apart: float = NOISE) -> float | None:
    """`pairs_right` over the pairs whose measured times differ by more than `apart` (relative to
    the faster): a second figure, beside the required one, that leaves out near-ties."""
    right = total = 0
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            lo, hi = sorted((measured[i], measured[j]))
            if hi <= lo * (1 + apart):
                continue
            total += 1
            right += (predicted[i] - predicted[j]) * (measured[i] - measured[j]) > 0
    return right / total if total else None


def pairs_right_repeatable(predicted: list[float], passes: list[list[float]]) -> float | None:
    """`pairs_right` over the pairs that every timing pass orders the same way: a pair whose
    measured order flips between passes is within the timing noise, and either predicted order
    agrees with one of the measurements. None without two passes."""
    if not passes or any(len(p) < 2 for p in passes):
        return None
    right = total = 0
    n = len(predicted)
    for i in range(n):
        for j in range(i + 1, n):
            signs = {(p[i] > p[j]) - (p[i] < p[j]) for p in passes}
            if len(signs) != 1 or 0 in signs:
                continue
            total += 1
            right += (predicted[i] - predicted[j]) * signs.pop() > 0
    return right / total if total else None


def median_abs_err(predicted: list[float], measured: list[float]) -> float | None:
    errs = [abs(p - m) / m for p, m in zip(predicted, measured, strict=True) if m]
    return statistics.median(errs) if errs else None


def figures(predicted: list[float], measured: list[float], passes: list[list[float]] | None = None) -> dict:
    return {
        "pairs_right": pairs_right(predicted, measured),
        "pairs_right_repeatable": pairs_right_repeatable(predicted, passes or []),
        "pairs_right_apart_5pct": pairs_right_apart(predicted, measured),
        "spearman": spearman(predicted, measured),
        "median_abs_err": median_abs_err(predicted, measured),
    }


def measurement(v: dict) -> dict:
    return {
        "target": TARGET,
        "text": v["text"],
        "params": v.get("params") or {},
        "shapes": v.get("shapes") or {},
        "registers": v.get("registers"),
        "smem_bytes": v.get("smem_bytes"),
        "spills": v.get("spills"),
        "seconds": v["measured_s"],
    }


def evaluate(variants: list[dict]) -> dict:
    """Per-task figures, uncalibrated and leave-one-task-out calibrated, and every variant."""
    from costmodel import CostModel
    from costmodel.model import measurement_raw

    rows = [v for v in variants if v.get("measured_s")]
    tasks = sorted({v["task"] for v in rows})
    ms = [measurement(v) for v in rows]
    base = [measurement_raw(m).time()[0] for m in ms]
    calibrated = [0.0] * len(rows)
    factors: dict[str, dict] = {}
    for task in tasks:
        model = CostModel()
        others = [m for m, v in zip(ms, rows, strict=True) if v["task"] != task]
        if others:
            model.update(others)
        f = model.factors(TARGET)
        factors[task] = f
        for i, v in enumerate(rows):
            if v["task"] == task:
                calibrated[i] = measurement_raw(ms[i]).time(f)[0]
    out_tasks = []
    for task in tasks:
        idx = [i for i, v in enumerate(rows) if v["task"] == task]
        measured = [rows[i]["measured_s"] for i in idx]
        runs = [rows[i].get("measured_passes_s") or [] for i in idx]
        passes = [list(p) for p in zip(*runs, strict=True)] if runs and len({len(r) for r in runs}) == 1 else []
        cal = figures([calibrated[i] for i in idx], measured, passes)
        out_tasks.append(
            {
                "task": task,
                "variants": len(idx),
                **cal,
                "uncalibrated": figures([base[i] for i in idx], measured, passes),
                "factors": factors[task],
            }
        )
    measured_all = [v["measured_s"] for v in rows]

    def share_right(key: str, within: list[dict]) -> float | None:
        vals = [t[key] for t in within if t[key] is not None]
        return statistics.fmean(vals) if vals else None

    summary = {
        "variants": len(rows),
        "failed": len(variants) - len(rows),
        "calibrated": {
            "median_abs_err": median_abs_err(calibrated, measured_all),
            "mean_pairs_right": share_right("pairs_right", out_tasks),
            "mean_pairs_right_apart_5pct": share_right("pairs_right_apart_5pct", out_tasks),
            "mean_pairs_right_repeatable": share_right("pairs_right_repeatable", out_tasks),
            "min_pairs_right_repeatable": min(
                (t["pairs_right_repeatable"] for t in out_tasks if t["pairs_right_repeatable"] is not None),
                default=None,
            ),
            "min_pairs_right": min((t["pairs_right"] for t in out_tasks if t["pairs_right"] is not None), default=None),
            "mean_spearman": share_right("spearman", out_tasks),
        },
        "uncalibrated": {
            "median_abs_err": median_abs_err(base, measured_all),
            "mean_pairs_right": share_right("pairs_right", [t["uncalibrated"] for t in out_tasks]),
            "mean_pairs_right_apart_5pct": share_right(
                "pairs_right_apart_5pct", [t["uncalibrated"] for t in out_tasks]
            ),
            "min_pairs_right": min(
                (t["uncalibrated"]["pairs_right"] for t in out_tasks if t["uncalibrated"]["pairs_right"] is not None),
                default=None,
            ),
            "mean_spearman": share_right("spearman", [t["uncalibrated"] for t in out_tasks]),
        },
    }
    raw = [
        {
            "task": v["task"],
            "id": v["id"],
            "params": v.get("params"),
            "registers": v.get("registers"),
            "smem_bytes": v.get("smem_bytes"),
            "spills": v.get("spills"),
            "measured_s": v["measured_s"],
            "measured_passes_s": v.get("measured_passes_s"),
            "predicted_s": base[i],
            "calibrated_s": calibrated[i],
        }
        for i, v in enumerate(rows)
    ]
    failed = [{"task": v["task"], "id": v["id"], "error": v.get("error")} for v in variants if not v.get("measured_s")]
    return {"target": TARGET, "summary": summary, "tasks": out_tasks, "raw": raw, "failed": failed}


def _fmt(x: float | None) -> str:
    return "  - " if x is None else f"{x:.2f}"


def slug(gpu: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args(argv)
    data = json.loads(args.measured.read_text())
    result = {"gpu": data.get("gpu", ""), "date": data.get("date", ""), **evaluate(data["variants"])}
    path = args.out / f"costmodel-accuracy-{slug(result['gpu'])}-{result['date']}.json"
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    for t in result["tasks"]:
        u = t["uncalibrated"]
        print(
            f"{t['task']:18s} n={t['variants']:2d}  pairs {t['pairs_right'] or 0:.2f} (uncal {u['pairs_right'] or 0:.2f})  "
            f"repeatable {_fmt(t['pairs_right_repeatable'])} ({_fmt(u['pairs_right_repeatable'])})  "
            f">5% apart {t['pairs_right_apart_5pct'] or 0:.2f} ({u['pairs_right_apart_5pct'] or 0:.2f})  "
            f"spearman {t['spearman'] or 0:+.2f} ({u['spearman'] or 0:+.2f})  err {t['median_abs_err'] or 0:.2f} ({u['median_abs_err'] or 0:.2f})"
        )
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
