"""The frontend on every problem of benchmarks/kernelbench: a seed (verified, then checked on the
CPU interpreters at the task's scaled `test` preset) or the located diagnostic of the op it does
not translate; a coverage table per category (the file name's first word).

    python benchmarks/frontend_coverage.py [--out DIR] [--backends interp,triton-interp] [NAME ...]

Each problem's task folder is written under DIR/tasks/<name> (reference.py, task.toml,
seed.kir); DIR/coverage.json holds every row and DIR/coverage.md the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.frontend.make import FrontendError, seed_task  # noqa: E402

PROBLEMS = ROOT / "benchmarks" / "kernelbench"


def one(problem: Path, out: Path, backends: list[str]) -> dict:
    from agent.cli import run_command

    row: dict = {"problem": problem.stem, "category": problem.stem.split("_")[0]}
    start = time.monotonic()
    try:
        made = seed_task(problem, out / "tasks" / problem.stem)
    except FrontendError as err:
        d = err.diagnostics[0]
        row.update(seed=False, rule=d.rule, line=d.span.line if d.span else None, message=d.message)
        return row
    row.update(seed=True, form=made.seed.form, test=made.test_scale, notes=made.seed.notes)
    folder = made.folder
    assert folder is not None
    for backend in backends:
        record, _ = run_command(str(folder / "seed.kir"), str(folder), backend, "test", {}, [1, 2], 600, None)
        row[backend] = {
            "ok": record.ok,
            "stage": record.stage,
            "errors": [f"{d.rule}: {d.message}"[:300] for d in record.errors][:3],
        }
    row["seconds"] = round(time.monotonic() - start, 1)
    return row


def table(rows: list[dict], backends: list[str]) -> str:
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["category"]].append(r)
    lines = [
        "| category | problems | seed | "
        + " | ".join(f"correct ({b})" for b in backends)
        + " | not translated (why) |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in backends) + " | --- |",
    ]
    for cat in sorted(by):
        rs = by[cat]
        seeds = sum(r["seed"] for r in rs)
        oks = [sum(1 for r in rs if r.get(b, {}).get("ok")) for b in backends]
        why = "; ".join(f"{r['problem']}: line {r['line']}, {r['message']}" for r in rs if not r["seed"])
        lines.append(f"| {cat} | {len(rs)} | {seeds} | " + " | ".join(map(str, oks)) + f" | {why or '-'} |")
    total = len(rows)
    seeds = sum(r["seed"] for r in rows)
    oks = [sum(1 for r in rows if r.get(b, {}).get("ok")) for b in backends]
    lines.append(f"| **all** | {total} | {seeds} | " + " | ".join(map(str, oks)) + " | |")
    failed = [
        f"- {r['problem']} ({b}): stopped at {r[b]['stage']}: {'; '.join(r[b]['errors'])}"
        for r in rows
        for b in backends
        if r["seed"] and not r.get(b, {}).get("ok")
    ]
    if failed:
        lines += ["", "Seeds not correct:", *failed]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", default=str(ROOT / "build" / "frontend"))
    ap.add_argument("--backends", default="interp,triton-interp")
    args = ap.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problems = sorted(p for p in PROBLEMS.glob("*_*.py") if p.stem != "check_corpus")
    if args.names:
        problems = [p for p in problems if any(n in p.stem for n in args.names)]
    rows = []
    for i, p in enumerate(problems, 1):
        row = one(p, out, backends)
        status = (
            "no seed: " + row["message"]
            if not row["seed"]
            else ", ".join(f"{b} {'ok' if row[b]['ok'] else row[b]['stage']}" for b in backends)
        )
        print(f"[{i}/{len(problems)}] {p.stem}: {status}", flush=True)
        rows.append(row)
    (out / "coverage.json").write_text(json.dumps(rows, indent=1))
    md = table(rows, backends)
    (out / "coverage.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
