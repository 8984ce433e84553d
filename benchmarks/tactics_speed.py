"""How long `tactics.applicable()` and each tactic's `apply()` take on the largest suite program.

    python benchmarks/tactics_speed.py [--runs 30] [--file PATH] [--save]

The largest program is the suite's (benchmarks/tasks/*/*.kir) with the most ops, unless --file
names one. `applicable` is timed whole (every tactic's precondition and domains); `apply` for
each tactic that applies, with the first value of each of its domains (every shape symbol at
4096, so that fix-shape has a value to offer). The program is parsed
once, before timing; the tactic modules are imported before the first run. Target: median under
20 ms for each. `--save` writes the figures to benchmarks/results/tactics_speed.json.
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

import tactics  # noqa: E402
from kir.check import op_count  # noqa: E402
from kir.parser import parse  # noqa: E402

TARGET_MS = 20.0


def largest() -> Path:
    files = sorted((ROOT / "benchmarks" / "tasks").glob("*/*.kir"))
    return max(files, key=lambda f: op_count(parse(f.read_text(), file=str(f))))


def median_ms(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--file", type=Path, default=None)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    file = (args.file or largest()).resolve()
    program = parse(file.read_text(), file=str(file))
    shapes = dict.fromkeys(program.kernel.shape_symbols, 4096)
    tactics.all()
    rows = []
    med, worst = median_ms(lambda: tactics.applicable(program, shapes=shapes), args.runs)
    rows.append({"what": "applicable()", "median_ms": med, "max_ms": worst, "pass": med < TARGET_MS})
    for tactic, domains in tactics.applicable(program, shapes=shapes):
        values = {name: options[0] for name, options in domains.items() if options}
        med, worst = median_ms(lambda t=tactic, v=values: t.apply(program, **v), args.runs)
        rows.append({"what": f"apply {tactic.name}", "median_ms": med, "max_ms": worst, "pass": med < TARGET_MS})
    print(f"{file.relative_to(ROOT)}: {op_count(program)} ops, {args.runs} runs each, target < {TARGET_MS:.0f} ms")
    print(f"{'':24} {'median ms':>10} {'max ms':>8}")
    for r in rows:
        print(f"{r['what']:<24} {r['median_ms']:10.2f} {r['max_ms']:8.2f}  {'PASS' if r['pass'] else 'FAIL'}")
    ok = all(r["pass"] for r in rows)
    print("all under target:", "PASS" if ok else "FAIL")
    if args.save:
        out = ROOT / "benchmarks" / "results" / "tactics_speed.json"
        out.write_text(
            json.dumps(
                {
                    "date": date.today().isoformat(),
                    "machine": platform.processor() or platform.machine(),
                    "python": platform.python_version(),
                    "file": str(file.relative_to(ROOT)),
                    "ops": op_count(program),
                    "runs": args.runs,
                    "target_ms": TARGET_MS,
                    "rows": rows,
                },
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {out.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
