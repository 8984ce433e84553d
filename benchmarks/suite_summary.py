"""Combine `kir bench` runs into one per-task summary.

    python benchmarks/suite_summary.py RUN.json [RUN.json ...] [--out SUMMARY.md]

For each task the latest run (in the order given) that timed it is used, and in it the fastest
correct row of any program and backend: every ratio in a row was measured side by side in that
run (ours, eager and torch.compile in one process on the same inputs), so rows from different
runs can stand in one table. Prints the table, the geometric mean of torch.compile time / ours
over the tasks, and the memory-bound tasks' distance from their floor.

torch.compile's own time moves between runs (its kernels are autotuned when first called: one
run's choice can be 20-30% slower than another's), so the table also gives the conservative
ratio against the fastest torch.compile time of the task in any of the runs given
(`best compile / ours`), and the geometric mean of those.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def summarize(runs: list[dict]) -> tuple[list[dict], list[str]]:
    latest: dict[str, tuple[int, list[dict]]] = {}
    for i, run in enumerate(runs):
        for row in run["rows"]:
            if row.get("ms") is not None:
                latest.setdefault(row["task"], (i, []))
                if latest[row["task"]][0] < i:
                    latest[row["task"]] = (i, [])
                if latest[row["task"]][0] == i:
                    latest[row["task"]][1].append(row)
    best = []
    for _task, (i, rows) in sorted(latest.items()):
        row = min((r for r in rows if r["correct"]), key=lambda r: r["ms"])
        ceilings = runs[i]["ceilings"]
        bound = "memory"
        if row.get("flops") and row.get("bytes"):
            compute_s = row["flops"] / (ceilings["bf16_tflops"] * 1e12)
            memory_s = row["bytes"] / (ceilings["copy_gbps"] * 1e9)
            bound = "compute" if compute_s > memory_s else "memory"
        best.append({**row, "run": i, "bound": bound})
    fastest_peer: dict[str, float] = {}
    for run in runs:
        for row in run["rows"]:
            if row.get("compile_ms"):
                fastest_peer[row["task"]] = min(fastest_peer.get(row["task"], math.inf), row["compile_ms"])
    for r in best:
        r["best_compile_ms"] = fastest_peer.get(r["task"])
    ratios = [r["compile_ms"] / r["ms"] for r in best if r.get("compile_ms")]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else float("nan")
    strict = [r["best_compile_ms"] / r["ms"] for r in best if r.get("best_compile_ms")]
    geo_strict = math.exp(sum(math.log(x) for x in strict) / len(strict)) if strict else float("nan")
    slower = [r["task"] for r in best if r.get("compile_ms") and r["compile_ms"] < r["ms"]]
    slower_strict = [r["task"] for r in best if r.get("best_compile_ms") and r["best_compile_ms"] < r["ms"]]
    far = [r["task"] for r in best if r["bound"] == "memory" and r["floor_ms"] and r["ms"] / r["floor_ms"] > 1.3]
    lines = [
        "| task | best program (backend) | ms | eager ms | torch.compile ms | floor ms | bound | compile / ours "
        "| best compile / ours | ours / floor |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in best:
        lines.append(
            f"| {r['task']} | {r['program']} ({r['backend']}) | {r['ms']:.3f} | {r['eager_ms']:.3f} | "
            f"{r['compile_ms']:.3f} | {r['floor_ms']:.3f} | {r['bound']} | {r['compile_ms'] / r['ms']:.2f} | "
            f"{r['best_compile_ms'] / r['ms']:.2f} | {r['ms'] / r['floor_ms']:.2f} |"
        )
    lines += [
        "",
        f"Geometric mean of torch.compile time / ours over {len(ratios)} tasks: {geo:.2f}.",
        f"Against torch.compile's fastest time in any run: {geo_strict:.2f}.",
        f"Slower than torch.compile: {', '.join(slower) or 'none'}; "
        f"than its fastest time in any run: {', '.join(slower_strict) or 'none'}.",
        f"Memory-bound tasks beyond 1.3x their floor: {', '.join(far) or 'none'}.",
    ]
    return best, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--out")
    args = parser.parse_args()
    runs = [json.loads(Path(p).read_text()) for p in args.runs]
    _, lines = summarize(runs)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
