"""Searches from each task's seed on an H200 (Triton, the `bench` shapes, timed by the harness),
#21's GPU acceptance: at most `--budget` measured evaluations a task, then the best program of
each search timed beside the task's `tuned.kir`, its seed and the peers (PyTorch eager,
torch.compile) in one `kir bench` run.

    python benchmarks/search_h200.py search --out DIR [--tasks a,b] [--budget 300] [--parallel 4]
        [--workers 3] [--seconds S]
    python benchmarks/search_h200.py bench --out DIR [--tasks a,b]

`search`: each task is one `kir search TASK --backend triton --preset bench --executor pool`
process writing its store in DIR (`TASK.sqlite`); `--parallel` of them at once, each with a
pool of `--workers` processes (they check and compile in parallel; the harness's lock times one
candidate at a time on the GPU). With `--seconds` every search stops after that long (its
round finishes; a search still running 60 s later is killed, its store keeps what was
evaluated) and a later call with the same DIR resumes it, so a search longer than one 10-minute
call on the GPU machine goes on in the next.

`bench`: the best node of each store becomes the program `found` of a copy of the task's folder
(its text as the search measured it, parameters bound), and `agent.harness.bench.run_suite`
times seed, tuned and found with the peers, side by side; DIR/bench.json and DIR/summary.md hold
per task the times, found against tuned and against torch.compile, the evaluations, the
evaluations to reach 95% of the final best (by the search's own timings), the share of
proposals stopped before compile and the share of measured ones that failed at run.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "tasks"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search_mtia import figures  # noqa: E402 - the benchmarks folder is not a package


def search(task: str, args: argparse.Namespace) -> dict:
    db = Path(args.out) / f"{task}.sqlite"
    cmd = [
        sys.executable, "-m", "agent.cli", "search", task, "--backend", "triton", "--preset", "bench",
        "--strategy", args.strategy, "--budget", str(args.budget), "--executor", "pool",
        "--workers", str(args.workers), "--measure-top", str(args.measure_top), "--width", str(args.width),
        "--db", str(db), "--random-seed", "0", "--timeout", str(args.timeout), "--peers", args.peers, "--json",
    ]  # fmt: skip
    if db.exists():
        cmd.append("--resume")
    if args.seconds:
        cmd += ["--seconds", str(args.seconds)]
    start = time.monotonic()
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, timeout=(args.seconds + 60) if args.seconds else None
        )
        try:
            data = json.loads(done.stdout)
        except ValueError:
            data = {"ok": False, "error": done.stderr[-2000:]}
    except subprocess.TimeoutExpired:
        data = {"ok": False, "error": "killed past its time budget: resumed by the next call"}
    data["wall_s"] = time.monotonic() - start
    (Path(args.out) / f"{task}.json").write_text(json.dumps(data, indent=1))
    progress = data.get("progress") or {}
    print(
        f"{task}: {progress.get('stopped', data.get('error', '?'))}; {progress.get('evaluations')} evaluations",
        flush=True,
    )
    return data


def found_task(task: str, out: Path):
    """A copy of the task's folder whose program `found` is the best node of the task's store."""
    from agent.search.tree import Tree
    from agent.store import open_store
    from agent.tasks import load_task

    db = out / f"{task}.sqlite"
    if not db.exists():
        return None, None
    with open_store(str(db)) as store:
        (s,) = store.searches()
        tree = Tree.of(store.nodes(s["id"]))
    best = tree.best()
    if best is None:
        return None, None
    folder = out / "tasks" / task
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(TASKS / task, folder)
    (folder / "found.kir").write_text(best.text)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml + '\n[programs.found]\nfile = "found.kir"\n')
    return load_task(folder), best


def bench(args: argparse.Namespace, tasks: list[str]) -> int:
    from agent.harness.bench import run_suite

    out = Path(args.out)
    loaded = []
    for task in tasks:
        t, _ = found_task(task, out)
        if t is not None:
            loaded.append(t)
    result = run_suite(
        loaded, programs=["seed", "tuned", "found"], preset="bench", jobs=args.workers,
        progress=lambda what, i, n: print(f"[{i}/{n}] {what}", flush=True),
        on_timed=lambda partial: (out / "bench.json").write_text(json.dumps(partial, indent=1, default=str)),
    )  # fmt: skip
    (out / "bench.json").write_text(json.dumps(result, indent=1, default=str))
    rows = []
    for task in tasks:
        db = out / f"{task}.sqlite"
        fig = figures(db) if db.exists() else {}
        times: dict[str, dict] = {}  # per program, its fastest backend (an explicit tuned.kir: gluon or cuda)
        for r in result.get("rows", []):
            if r.get("task") == task and (_ms(r) or 0) > 0:
                if _ms(times.get(r["program"])) is None or _ms(r) < _ms(times[r["program"]]):  # type: ignore[operator]
                    times[r["program"]] = r
        rows.append({"task": task, "search": fig, "bench": times})
    (out / "summary.json").write_text(json.dumps(rows, indent=1, default=str))
    print(summary(rows))
    (out / "summary.md").write_text(summary(rows) + "\n")
    return 0


def _ms(row: dict | None) -> float | None:
    if not row:
        return None
    value = row.get("ms")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def summary(rows: list[dict]) -> str:
    lines = [
        "| task | seed ms | tuned ms | found ms | torch.compile ms | found / tuned | compile / found | "
        "evaluations | to 95% | stopped statically | failed at run | best path |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    within, ratios = 0, []
    for row in rows:
        b, s = row["bench"], row["search"]
        seed, tuned, found = _ms(b.get("seed")), _ms(b.get("tuned")), _ms(b.get("found"))
        compile_ms = next((r.get("compile_ms") for r in b.values() if r.get("compile_ms")), None)
        vs_tuned = found / tuned if found and tuned else None
        vs_compile = compile_ms / found if found and compile_ms else None
        within += vs_tuned is not None and vs_tuned <= 1.05
        if vs_compile:
            ratios.append(vs_compile)

        def f(x, fmt="{:.4f}"):
            return "-" if x is None else fmt.format(x)

        lines.append(
            f"| {row['task']} | {f(seed)} | {f(tuned)} | {f(found)} | {f(compile_ms)} | {f(vs_tuned, '{:.3f}')} | "
            f"{f(vs_compile, '{:.2f}')} | {s.get('evaluations', '-')} | {s.get('to_95') or '-'} | "
            f"{f(s.get('stopped_statically'), '{:.0%}')} | {f(s.get('failed_at_run'), '{:.1%}')} | "
            f"{' > '.join(s.get('best_path') or []) or '(the seed)'} |"
        )
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
    lines.append(
        f"\nfound within 5% of tuned or faster: {within} of {len(rows)}; geometric mean torch.compile / found: "
        + ("-" if geo is None else f"{geo:.2f}")
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=("search", "bench"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default="")
    ap.add_argument("--strategy", default="beam")
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--measure-top", type=int, default=4)
    ap.add_argument("--width", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--peers", default="eager,compile", help="what each seed is timed beside (kir search --peers)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds before an evaluation is killed")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    tasks = [t for t in args.tasks.split(",") if t] or sorted(p.name for p in TASKS.iterdir() if p.is_dir())
    if args.phase == "bench":
        return bench(args, tasks)
    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(lambda t: search(t, args), tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
