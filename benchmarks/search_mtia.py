"""Searches from each task's seed on mtia-sim (the simulator's cycles), the acceptance of #21's
CPU point: beam and MCTS with a budget of evaluations reach at most the cycles of the task's
hand-written `mtia.kir` where there is one, and improve on the seed for every task.

    python benchmarks/search_mtia.py --out DIR [--tasks a,b] [--strategies beam,mcts]
        [--budget 200] [--parallel 4] [--workers 4] [--seconds S] [--stall N] [--summary-only]

Each (task, strategy) is one `kir search` process writing its own store in DIR
(`STRATEGY-TASK.sqlite`); `--parallel` of them run at once, each with a pool of `--workers`
processes. With `--seconds` every search stops after that long and a later call with the same
DIR resumes it (`--resume`: the stores keep every evaluation), so a search longer than one
10-minute call on the GPU machine goes on in the next. Then a summary (DIR/summary.json and
summary.md): per task the seed's cycles, each strategy's best, mtia.kir's cycles (run at the
task's mtia parameters on the same preset), the evaluations to reach 95% of the final best, the
share of proposals stopped statically and the share of measured ones that failed at run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "tasks"


def search(task: str, strategy: str, args: argparse.Namespace) -> dict:
    db = Path(args.out) / f"{strategy}-{task}.sqlite"
    cmd = [
        sys.executable, "-m", "agent.cli", "search", task, "--strategy", strategy, "--budget", str(args.budget),
        "--executor", "pool", "--workers", str(args.workers), "--measure-top", str(args.measure_top),
        "--width", str(args.width), "--db", str(db), "--random-seed", "0", "--json",
    ]  # fmt: skip
    if db.exists():
        cmd.append("--resume")
    if args.seconds:
        cmd += ["--seconds", str(args.seconds)]
    if args.stall:
        cmd += ["--stall", str(args.stall)]
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {"ok": False, "error": done.stderr[-2000:]}
    data["wall_s"] = time.monotonic() - start
    (Path(args.out) / f"{strategy}-{task}.json").write_text(json.dumps(data, indent=1))
    print(f"{strategy} {task}: {(data.get('progress') or {}).get('stopped', data.get('error', '?'))}", flush=True)
    return data


def mtia_cycles(task: str, preset: str) -> float | None:
    """The hand-written mtia.kir's cycles at its task parameters for `preset`."""
    from agent.pipeline import Candidate, evaluate
    from agent.tasks import load_task

    loaded = load_task(TASKS / task)
    spec = loaded.programs.get("mtia")
    if spec is None:
        return None
    record = evaluate(
        Candidate.from_file(spec.file, spec.params_for(preset)),
        until="run",
        backend="mtia-sim",
        task=loaded,
        preset=preset,
    )
    return ((record.verdict or {}).get("metrics") or {}).get("cycles") if record.ok else None


def figures(db: Path) -> dict:
    """From a store: the seed's and the best cycles, evaluations to 95% of the final best, shares."""
    from agent.search.tree import Tree
    from agent.store import open_store

    with open_store(str(db)) as store:
        (s,) = store.searches()
        tree = Tree.of(store.nodes(s["id"]))
    best = tree.best()
    static = [n for n in tree if n.record is not None and n.record.stage in ("parse", "verify", "cost", "lower")]
    measured = [n for n in sorted(tree, key=lambda n: n.id) if n.record is not None and n not in static]
    failed = [n for n in measured if n.score is None]
    to95 = None
    if best is not None:
        running = None
        for i, n in enumerate(measured, 1):
            if n.score is not None and (running is None or n.score < running):
                running = n.score
            if running is not None and running <= best.score / 0.95:
                to95 = i
                break
    return {
        "seed": tree.root.score,
        "best": None if best is None else best.score,
        "best_path": [] if best is None else [n.move.describe() for n in tree.chain(best.id)[1:]],
        "evaluations": len(measured),
        "to_95": to95,
        "stopped_statically": len(static) / max(1, len(static) + len(measured)),
        "failed_at_run": len(failed) / max(1, len(measured)),
    }


def summary(args: argparse.Namespace, tasks: list[str], strategies: list[str]) -> int:
    out = Path(args.out)
    rows = []
    for task in tasks:
        row: dict = {"task": task, "mtia": mtia_cycles(task, "test")}
        for strategy in strategies:
            db = out / f"{strategy}-{task}.sqlite"
            row[strategy] = figures(db) if db.exists() else None
        rows.append(row)
    (out / "summary.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "| task | seed cycles | mtia.kir cycles | "
        + " | ".join(f"{s} best | {s} evals | {s} to 95%" for s in strategies)
        + " | improves on the seed | at most mtia.kir |",
        "| --- | ---: | ---: | " + " | ".join("---: | ---: | ---:" for _ in strategies) + " | --- | --- |",
    ]
    met = 0
    for row in rows:
        got = [row[s] for s in strategies if row[s]]
        seed = next((g["seed"] for g in got if g["seed"]), None)
        cells = []
        for s in strategies:
            g = row[s]
            cells.append("- | - | -" if not g else f"{g['best'] or '-'} | {g['evaluations']} | {g['to_95'] or '-'}")
        improves = all(g["best"] is not None and seed is not None and g["best"] < seed for g in got) and bool(got)
        under = (
            "n/a"
            if row["mtia"] is None
            else ("yes" if all(g["best"] is not None and g["best"] <= row["mtia"] for g in got) else "no")
        )
        met += improves and under != "no"
        lines.append(
            f"| {row['task']} | {seed or '-'} | {row['mtia'] or '-'} | "
            + " | ".join(cells)
            + f" | {'yes' if improves else 'no'} | {under} |"
        )
    lines.append(f"\n{met} of {len(rows)} tasks meet both conditions.")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default="")
    ap.add_argument("--strategies", default="beam,mcts")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--measure-top", type=int, default=4)
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--stall", type=int, default=None, help="stop a search after N rounds without a better best")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    tasks = [t for t in args.tasks.split(",") if t] or sorted(
        p.name for p in TASKS.iterdir() if (p / "seed.kir").is_file()
    )
    strategies = [s for s in args.strategies.split(",") if s]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        with ThreadPoolExecutor(args.parallel) as pool:
            list(pool.map(lambda ts: search(*ts, args), [(t, s) for t in tasks for s in strategies]))
    return summary(args, tasks, strategies)


if __name__ == "__main__":
    sys.exit(main())
