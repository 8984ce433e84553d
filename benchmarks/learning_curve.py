"""The learning curve: searches on held-out tasks with and without the tactics learned from a
training sequence of tasks, same strategy, budget and random seed (on mtia-sim by default).

    python benchmarks/learning_curve.py --train-stores DIR --train a,b,c --held-out d,e,f --out DIR
        [--budget 40] [--strategy beam] [--parallel 2] [--workers 1] [--stall 3] [--library DIR]
        [--train-budget 40] [--backend mtia-sim] [--preset P] [--seconds S] [--use-library DIR]

--use-library DIR skips steps 0 and 1: the held-out searches are offered the learned tactics of
DIR as they are (for example `tactics/learned`, mined and gated on mtia-sim, offered on an H200
with `--backend triton --preset bench`); --train then only names the tasks it was learned from.

A task is a suite task (benchmarks/tasks/NAME) or a KernelBench problem of
benchmarks/kernelbench (NAME.py): the frontend seeds those into DIR/tasks/NAME (`kir seed
--out`), found by name through $KIR_TASK_PATH.

0. Training searches: a training task without a store in --train-stores gets one (`kir search`
   from its seed, --no-learned, --train-budget evaluations) in DIR/train-TASK.sqlite.
1. The library: the best paths of the training tasks' searches (the stores in --train-stores
   and DIR named `*-TASK.sqlite`) mined into learned tactics (agent.learn.tactics), each gated on
   the training tasks it was not mined from, never on a held-out task. Kept ones are written to
   --library (default: DIR/library), which is what `kir search --learned` offers first.
2. On each held-out task, one `kir search` with the library offered first and one without
   (`--no-learned`), from the task's seed, each with its own store in DIR.
3. DIR/summary.json and summary.md: per task and condition the final best (cycles), the measured
   evaluations to reach 95% of the task's best over both conditions, the share of measured
   candidates that failed at run; the median over tasks of the ratio of evaluations to 95%
   (without / with), over every held-out task and over those whose seed is not already within
   5% of the best (where the seed is, both conditions take one evaluation and the ratio is 1
   whatever was learned); the learned tactics and their gate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


KERNELBENCH = ROOT / "benchmarks" / "kernelbench"


def prepare_tasks(args: argparse.Namespace) -> None:
    """Seed every named KernelBench problem into DIR/tasks (once), and put that folder on
    $KIR_TASK_PATH for this process and the searches it starts."""
    folder = Path(args.out).resolve() / "tasks"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["KIR_TASK_PATH"] = str(folder)
    names = args.held_out.split(",") + ([] if args.use_library else args.train.split(","))
    for name in names:
        if (ROOT / "benchmarks" / "tasks" / name / "task.toml").is_file() or (folder / name / "task.toml").is_file():
            continue
        problem = KERNELBENCH / f"{name}.py"
        if not problem.is_file():
            raise SystemExit(f"no task {name}: neither benchmarks/tasks/{name} nor benchmarks/kernelbench/{name}.py")
        done = subprocess.run(
            [sys.executable, "-m", "agent.cli", "seed", str(problem), "--out", str(folder / name)],
            capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"kir seed {problem.name}: {done.stdout[-600:]}{done.stderr[-600:]}")
        print(f"seeded {name}", flush=True)


def train_stores(args: argparse.Namespace) -> list[str]:
    """The training tasks' stores: those of --train-stores, and a training search for each task
    that has none there."""
    train = args.train.split(",")
    given = Path(args.train_stores) if args.train_stores else None
    found = {t: sorted(given.glob(f"*-{t}.sqlite")) if given else [] for t in train}
    missing = [t for t, stores in found.items() if not stores]
    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(lambda t: search(t, False, args, tag="train", budget=args.train_budget), missing))
    for t in missing:
        found[t] = [Path(args.out) / f"train-{t}.sqlite"]
    return sorted(str(p) for stores in found.values() for p in stores if p.exists())


def library(args: argparse.Namespace) -> list[dict]:
    from agent.learn import tactics as lt

    train = args.train.split(",")
    stores = train_stores(args)
    paths = lt.best_paths(stores)
    out = Path(args.library)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in lt.mine_tactics(paths):
        held = [x for x in train if x not in t.mined_from]  # training tasks only: nothing held out leaks in
        kept = lt.gate_tactic(t, held)
        rows.append(
            {"name": t.name, "steps": t.describe(), "mined_from": list(t.mined_from), "kept": kept, "gate": t.gate}
        )
        print(f"library: {t.name} = {t.describe()}: {'kept' if kept else 'not kept'}", flush=True)
        if kept:
            (out / f"{t.name}.toml").write_text(t.to_toml(), encoding="utf-8")
    return rows


def given_library(folder: Path) -> list[dict]:
    """The rows of library.json for a library offered as it is: its tactics with their provenance."""
    from agent.learn import tactics as lt

    return [
        {"name": t.name, "steps": t.describe(), "mined_from": list(t.mined_from), "kept": True, "gate": t.gate}
        for t in lt.load(folder)
    ]


def search(task: str, learned: bool, args: argparse.Namespace, tag: str = "", budget: int | None = None) -> dict:
    tag = tag or ("with" if learned else "without")
    db = Path(args.out) / f"{tag}-{task}.sqlite"
    cmd = [
        sys.executable, "-m", "agent.cli", "search", task, "--strategy", args.strategy,
        "--budget", str(budget or args.budget), "--backend", args.backend,
        "--executor", "pool", "--workers", str(args.workers), "--db", str(db), "--random-seed", "0", "--json",
        "--learned" if learned else "--no-learned",
    ]  # fmt: skip
    if db.exists():
        cmd.append("--resume")
    if args.stall:
        cmd += ["--stall", str(args.stall)]
    if args.preset:
        cmd += ["--preset", args.preset]
    if args.seconds:
        cmd += ["--seconds", str(args.seconds)]
    env = {**os.environ, "KIR_LEARNED_TACTICS": str(Path(args.library).resolve())}
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {"ok": False, "error": done.stderr[-2000:]}
    data["wall_s"] = round(time.monotonic() - start, 1)
    (Path(args.out) / f"{tag}-{task}.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"{tag} {task}: {(data.get('progress') or {}).get('stopped', data.get('error', '?'))}", flush=True)
    return data


def trace(db: Path) -> list[tuple[int, float | None, bool]]:
    """(measured evaluations so far, best so far, failed) after each measured node, in order."""
    from agent.search.tree import Tree
    from agent.store import open_store

    with open_store(str(db)) as store:
        (s,) = store.searches()
        tree = Tree.of(store.nodes(s["id"]))
    out = []
    best = None
    count = 0
    for n in sorted(tree, key=lambda n: n.id):
        if n.record is None or n.record.stage in ("parse", "verify", "cost", "lower"):
            continue
        count += 1
        if n.score is not None and (best is None or n.score < best):
            best = n.score
        out.append((count, best, not n.record.ok))
    return out


def summary(args: argparse.Namespace, rows: list[dict]) -> None:
    held = args.held_out.split(",")
    table = []
    ratios = []
    room = []  # the ratios of the tasks whose seed is not within 5% of the best
    for task in held:
        runs = {tag: trace(Path(args.out) / f"{tag}-{task}.sqlite") for tag in ("with", "without")}
        bests = [r[-1][1] for r in runs.values() if r and r[-1][1] is not None]
        if not bests:
            continue
        target = min(bests) / 0.95
        row: dict = {"task": task}
        for tag, r in runs.items():
            to95 = next((c for c, b, _ in r if b is not None and b <= target), None)
            failed = sum(1 for *_, f in r if f)
            row[tag] = {
                "best": r[-1][1] if r else None, "evaluations": len(r), "to_95": to95,
                "failed_at_run": failed / max(1, len(r)),
            }  # fmt: skip
        w, wo = row["with"]["to_95"], row["without"]["to_95"]
        # a condition that never reached the target counts as its whole budget plus one
        w_eff = w if w is not None else args.budget + 1
        wo_eff = wo if wo is not None else args.budget + 1
        row["ratio"] = wo_eff / w_eff
        row["seed_within_5pct"] = all(r and r[0][1] is not None and r[0][1] <= target for r in runs.values())
        ratios.append(row["ratio"])
        if not row["seed_within_5pct"]:
            room.append(row["ratio"])
        table.append(row)
    result = {
        "train": args.train.split(","), "held_out": held, "budget": args.budget, "strategy": args.strategy,
        "library": rows, "tasks": table, "median_ratio": statistics.median(ratios) if ratios else None,
        "median_ratio_with_room": statistics.median(room) if room else None, "tasks_with_room": len(room),
        "failed_at_run_with": statistics.mean(r["with"]["failed_at_run"] for r in table) if table else None,
    }  # fmt: skip
    out = Path(args.out)
    (out / "summary.json").write_text(json.dumps(result, indent=1, default=str))
    lines = [
        f"train: {', '.join(result['train'])}; held out: {', '.join(held)}; {args.strategy}, budget {args.budget}",
        "",
        "| task | best with | best without | evals to 95% with | without | ratio | failed at run with | seed within 5% |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in table:
        lines.append(
            f"| {r['task']} | {r['with']['best']} | {r['without']['best']} | {r['with']['to_95']} | "
            f"{r['without']['to_95']} | {r['ratio']:.2f} | {r['with']['failed_at_run']:.0%} | "
            f"{'yes' if r['seed_within_5pct'] else 'no'} |"
        )
    lines += [
        "",
        f"median ratio of evaluations to 95% (without / with): {result['median_ratio']} over {len(table)} tasks; "
        f"{result['median_ratio_with_room']} over the {len(room)} whose seed is not within 5% of the best",
        f"failed at run with the library (mean share): {result['failed_at_run_with']}",
        "",
    ]
    lines += [
        f"- {x['name']} = {x['steps']} (from {', '.join(x['mined_from'])}): {'kept' if x['kept'] else 'not kept'}"
        for x in rows
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-stores", default="")
    ap.add_argument("--train-budget", type=int, default=40)
    ap.add_argument("--train", required=True)
    ap.add_argument("--held-out", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--library")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--strategy", default="beam")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--stall", type=int, default=3)
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--backend", default="mtia-sim")
    ap.add_argument("--preset", default="", help="the searches' preset (default: kir search's)")
    ap.add_argument("--seconds", type=float, default=0, help="each search stops after this many seconds")
    ap.add_argument("--use-library", default="", help="a library of learned tactics offered as it is")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    args.library = args.use_library or args.library or str(Path(args.out) / "library")
    prepare_tasks(args)
    lib_json = Path(args.out) / "library.json"
    if args.use_library:
        rows = given_library(Path(args.use_library))
        lib_json.write_text(json.dumps(rows, indent=1))
    elif args.summary_only and lib_json.exists():
        rows = json.loads(lib_json.read_text())
    else:
        rows = library(args)
        lib_json.write_text(json.dumps(rows, indent=1))
    if not args.summary_only:
        jobs = [(t, learned) for t in args.held_out.split(",") for learned in (True, False)]
        with ThreadPoolExecutor(args.parallel) as pool:
            list(pool.map(lambda j: search(j[0], j[1], args), jobs))
    summary(args, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
