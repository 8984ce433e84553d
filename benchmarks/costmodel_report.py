"""Per-variant diagnostic of the cost model against measured times: where it is wrong, and how.

    python benchmarks/costmodel_report.py MEASURED.json [--task softmax] [--calibrated]

For each task, its variants sorted by measured time, with the predicted time, the ratio
predicted / measured, the bottleneck, occupancy (blocks per SM and what limits it), waves, the
compile report's registers, and the seconds of each resource. Then the task's figures: pairs
ordered right (all pairs, and only pairs whose measured times differ by more than 5%, outside
the measurement noise), Spearman, median error. `--calibrated` applies the leave-one-task-out
factors (fitted on the other tasks), as `costmodel_accuracy.py` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))
from costmodel_accuracy import TARGET, figures, measurement, pairs_right_apart  # noqa: E402


def report(variants: list[dict], only: str | None, calibrated: bool) -> None:
    from costmodel import CostModel
    from costmodel.model import _bottleneck, measurement_raw

    rows = [v for v in variants if v.get("measured_s")]
    tasks = sorted({v["task"] for v in rows})
    ms = {id(v): measurement(v) for v in rows}
    for task in tasks:
        if only and task != only:
            continue
        factors: dict[str, float] = {}
        if calibrated:
            model = CostModel()
            model.update([ms[id(v)] for v in rows if v["task"] != task])
            factors = model.factors(TARGET)
        mine = sorted((v for v in rows if v["task"] == task), key=lambda v: v["measured_s"])
        print(f"== {task}  shapes {mine[0]['shapes']}" + (f"  factors {factors}" if factors else ""))
        pred, meas = [], []
        for v in mine:
            m = ms[id(v)]
            raw = measurement_raw(m)
            seconds, totals = raw.time(factors)
            pred.append(seconds)
            meas.append(v["measured_s"])
            res = " ".join(
                f"{k}={totals[k] * 1e6:.0f}"
                for k in ("dram", "l2", "tensor", "fma", "alu", "int", "sfu", "l1")
                if totals.get(k, 0) * 1e6 >= 1
            )
            params = ",".join(f"{k}={x}" for k, x in (v.get("params") or {}).items())
            print(
                f"  {v['measured_s'] * 1e6:9.1f} us  pred {seconds * 1e6:9.1f}  x{seconds / v['measured_s']:5.2f}  "
                f"{_bottleneck(totals):12s} b/sm {raw.blocks_per_sm:2d} waves {raw.waves:6.2f} "
                f"regs {v.get('registers')} ov {raw.overlap:.2f}  {v['program']}/{v.get('change', '')} [{params}]  {res}"
            )
        f = figures(pred, meas)
        print(
            f"  pairs {f['pairs_right']:.2f}  pairs(>5% apart) {pairs_right_apart(pred, meas) or 0:.2f}  "
            f"spearman {f['spearman'] or 0:+.2f}  median err {f['median_abs_err']:.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured", type=Path)
    ap.add_argument("--task")
    ap.add_argument("--calibrated", action="store_true")
    args = ap.parse_args(argv)
    report(json.loads(args.measured.read_text())["variants"], args.task, args.calibrated)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
