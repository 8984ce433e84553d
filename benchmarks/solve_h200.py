"""`kir solve` on problems of benchmarks/kernelbench on a GPU: for each, the frontend's seed, a
beam search on Triton at the file's own sizes, the best program written as a KernelBench
`ModelNew` file, checked by the harness and timed beside PyTorch eager and torch.compile.

    python benchmarks/solve_h200.py --out DIR [--budget 8] [--seconds 240] [--parallel 4] NAME ...

DIR/<name>.json holds each `kir solve --json` answer; DIR/summary.md the table.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "benchmarks" / "kernelbench"


def solve(name: str, args: argparse.Namespace) -> dict:
    out = Path(args.out)
    cmd = [
        sys.executable, "-m", "agent.cli", "solve", str(PROBLEMS / f"{name}.py"), "--budget", str(args.budget),
        "--seconds", str(args.seconds), "--work", str(out / "work" / name), "--out", str(out / f"{name}_solution.py"),
        "--timeout", "300", "--json",
    ]  # fmt: skip
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.seconds + 240)
        try:
            data = json.loads(done.stdout)
        except ValueError:
            data = {"ok": False, "error": (done.stderr or done.stdout)[-3000:]}
    except subprocess.TimeoutExpired:
        data = {"ok": False, "error": "killed past its time"}
    data["wall_s"] = round(time.monotonic() - start, 1)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"{name}: ok {data.get('ok')} in {data['wall_s']} s", flush=True)
    return data


def summary(rows: list[tuple[str, dict]]) -> str:
    lines = [
        "| problem | evaluations | seed ms (search) | best ms (search) | ModelNew correct | ModelNew ms | eager ms "
        "| torch.compile ms | eager / ModelNew | torch.compile / ModelNew |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios = []
    for name, d in rows:
        check = d.get("check") or {}
        metrics = check.get("metrics") or {}
        search = d.get("search") or {}
        ms, eager, comp = metrics.get("ms"), metrics.get("eager_ms"), metrics.get("compile_ms")

        def f(x, fmt="{:.4f}"):
            return "-" if not isinstance(x, int | float) else fmt.format(x)

        if ms and comp:
            ratios.append(comp / ms)
        error = "" if d.get("ok") else f" ({(d.get('error') or str(d.get('diagnostics'))[:200])[:200]})"
        lines.append(
            f"| {name} | {search.get('evaluations', '-')} | {f(search.get('seed_score'))} | {f(search.get('best_score'))} "
            f"| {'yes' if check.get('ok') else 'no' + error} | {f(ms)} | {f(eager)} | {f(comp)} "
            f"| {f(eager / ms if ms and eager else None, '{:.2f}')} | {f(comp / ms if ms and comp else None, '{:.2f}')} |"
        )
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    correct = sum(1 for _, d in rows if (d.get("check") or {}).get("ok"))
    lines.append(
        f"\nModelNew correct: {correct} of {len(rows)}; geometric mean torch.compile / ModelNew: "
        + ("-" if geo is None else f"{geo:.2f}")
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=240)
    ap.add_argument("--parallel", type=int, default=4)
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda n: (n, solve(n, args)), args.names))
    text = summary(results)
    (Path(args.out) / "summary.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
