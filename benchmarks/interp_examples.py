"""How long the reference interpreter takes on each example's test-size input.

Target: every example under 5 s (the test preset must stay cheap enough to run everywhere).

    python benchmarks/interp_examples.py [--repeat 3] [--save]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from kir.interp import run  # noqa: E402
from kir.parser import parse_file  # noqa: E402
from tests.examples.references import CASES  # noqa: E402

TARGET_S = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/interp_examples-DATE.json")
    args = ap.parse_args()
    rows = []
    print(f"{'example':<18} {'median s':>9} {'max s':>8}  target {TARGET_S:.0f} s")
    for case in CASES:
        program = parse_file(ROOT / "examples" / f"{case.example}.kir")
        times = []
        for i in range(args.repeat):
            inputs = case.make(np.random.default_rng(i))
            t0 = time.perf_counter()
            run(program, inputs, case.params)
            times.append(time.perf_counter() - t0)
        med, worst = statistics.median(times), max(times)
        ok = worst < TARGET_S
        rows.append({"example": case.example, "median_s": med, "max_s": worst, "pass": ok})
        print(f"{case.example:<18} {med:9.3f} {worst:8.3f}  {'PASS' if ok else 'FAIL'}")
    all_ok = all(r["pass"] for r in rows)
    print("all examples under target:", "PASS" if all_ok else "FAIL")
    if args.save:
        out = ROOT / "benchmarks" / "results" / f"interp_examples-{date.today().isoformat()}.json"
        out.write_text(
            json.dumps(
                {
                    "date": date.today().isoformat(),
                    "machine": platform.processor() or platform.machine(),
                    "python": platform.python_version(),
                    "target_s": TARGET_S,
                    "rows": rows,
                },
                indent=2,
            )
        )
        print("wrote", out)
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
