"""How long parse + print takes on each example (text -> IR -> canonical text).

Target: median under 50 ms for the largest example (agents parse and print every candidate).
Each example is parsed and printed `--iterations` times after `--warmup` untimed rounds; the
table gives the median and 90th percentile of parse, print and both together. The cold line
is a fresh interpreter's first parse: importing the parser, loading the grammar (from lark's
cache when it has one) and parsing the largest example once.

    python benchmarks/parse_print.py [--iterations 200] [--warmup 10] [--save]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kir.parser import parse  # noqa: E402

TARGET_MS = 50.0

COLD = """
import sys, time
sys.path.insert(0, {root!r})
text = open({path!r}).read()
t0 = time.perf_counter()
from kir.parser import parse
parse(text).text()
print(time.perf_counter() - t0)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(text: str, iterations: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        parse(text).text()
    parse_ms, print_ms, total_ms = [], [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        program = parse(text)
        t1 = time.perf_counter()
        program.text()
        t2 = time.perf_counter()
        parse_ms.append((t1 - t0) * 1e3)
        print_ms.append((t2 - t1) * 1e3)
        total_ms.append((t2 - t0) * 1e3)
    return {
        "parse_median_ms": statistics.median(parse_ms),
        "print_median_ms": statistics.median(print_ms),
        "median_ms": statistics.median(total_ms),
        "p90_ms": percentile(total_ms, 0.9),
    }


def cold_ms(path: Path) -> float:
    out = subprocess.run(
        [sys.executable, "-c", COLD.format(root=str(ROOT), path=str(path))], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip()) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/parse_print-DATE.json")
    args = ap.parse_args()

    examples = sorted((ROOT / "examples").glob("*.kir"))
    largest = max(examples, key=lambda p: len(p.read_text()))
    rows = []
    print(f"{'example':<22} {'lines':>5} {'parse':>8} {'print':>8} {'median':>8} {'p90':>8}   (ms)")
    for path in examples:
        text = path.read_text()
        row = {"example": path.stem, "lines": text.count("\n"), **measure(text, args.iterations, args.warmup)}
        rows.append(row)
        print(
            f"{path.stem:<22} {row['lines']:5d} {row['parse_median_ms']:8.2f} {row['print_median_ms']:8.2f}"
            f" {row['median_ms']:8.2f} {row['p90_ms']:8.2f}"
        )
    big = next(r for r in rows if r["example"] == largest.stem)
    ok = big["median_ms"] < TARGET_MS
    print(
        f"largest example ({largest.stem}, {big['lines']} lines): median {big['median_ms']:.2f} ms, "
        f"p90 {big['p90_ms']:.2f} ms, target < {TARGET_MS:.0f} ms: {'PASS' if ok else 'FAIL'}"
    )
    cold = cold_ms(largest)
    print(f"cold first parse + print of {largest.stem} (import, grammar load, parse): {cold:.1f} ms")
    if args.save:
        out = ROOT / "benchmarks" / "results" / f"parse_print-{date.today().isoformat()}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "date": date.today().isoformat(),
            "machine": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "iterations": args.iterations,
            "warmup": args.warmup,
            "target_ms": TARGET_MS,
            "largest": largest.stem,
            "largest_median_ms": big["median_ms"],
            "pass": ok,
            "cold_ms": cold,
            "rows": rows,
        }
        out.write_text(json.dumps(record, indent=2) + "\n")
        print("wrote", out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
