"""Variants of every benchmark task for measuring the cost model's accuracy, and their timing.

    python benchmarks/costmodel_variants.py generate [--per-task 10] [--out benchmarks/results/costmodel-variants.json]
        [--pairs-first] [--all-programs] [--wide] [--exclude MEASURED.json ...]
    python benchmarks/costmodel_variants.py time --variants FILE --out MEASURED.json   # on the GPU

`generate` (no GPU): for each task, parameter sweeps of its tuned and seed programs at the bench
preset: each tile parameter halved and doubled, the launch's warps halved and doubled (a launch
clause, so the canonical text is rewritten and parsed back), the pipeline stages moved by one,
then pairs of those changes. A variant is kept when the bench shapes satisfy its `where`
constraints and the candidate pipeline takes it through verify, cost and its Triton compile for
sm_90 at the bench shapes (`agent.pipeline.evaluate(..., until="compile")`) within the shared
memory a block may have; its compile report's registers and shared memory travel with it (the
search has them too), and so does the model's estimate (`predicted_s`, from the Record's cost). Parameters that size a kernel
argument (a head dimension, a padded feature dimension) or name a shape are left alone.

`time` (GPU): every variant of a task timed side by side in one harness job of kind "time"
(`agent.harness.worker.time_candidates`: rotated input sets, L2 flushed, median of the runs),
after a parallel warm-up pass that compiles every variant once (Triton's cache on disk is shared
by the processes), so the timed pass compiles nothing. A variant may name its `backend` (gluon,
cuda; default triton).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASKS = ROOT / "benchmarks" / "tasks"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "costmodel-variants.json"
STAGE_PARAMS = ("S", "STAGES", "NSTAGES")
WARPS = re.compile(r"^(\s*target\s+\S+\s+grid\(.*\)\s+)warps\((\d+)\)", re.M)


def task_meta(folder: Path) -> dict:
    return tomllib.loads((folder / "task.toml").read_text())


def fixed_params(program) -> set[str]:
    """Parameters that size a kernel argument or share a shape symbol's name: not ours to sweep."""
    fixed: set[str] = set()
    for _, arg in program.kernel.args:
        for d in [*arg.type.shape.data, *arg.type.strides.data]:
            fixed |= d.data.symbols() & set(program.params)
    return fixed


def with_warps(text: str, warps: int) -> str | None:
    if not WARPS.search(text):
        return None
    return WARPS.sub(lambda m: f"{m.group(1)}warps({warps})", text, count=1)


def moves(program, params: dict[str, int], wide: bool = False) -> list[tuple[str, dict[str, int] | int]]:
    """Single changes: (label, new params) or (label, new warps); `wide` adds the steps of 4x
    (a tile or the warps quartered and quadrupled)."""
    factors = (2, 4) if wide else (2,)
    out: list[tuple[str, dict[str, int] | int]] = []
    fixed = fixed_params(program)
    for name, value in params.items():
        if name in fixed:
            continue
        if name in STAGE_PARAMS:
            for v in (value - 1, value + 1):
                if v >= 1:
                    out.append((f"{name}={v}", {**params, name: v}))
        elif value >= 2 and value & (value - 1) == 0:
            for f in factors:
                for v in (value // f, value * f):
                    if v >= 1:
                        out.append((f"{name}={v}", {**params, name: v}))
    warps = program.kernel.num_warps.data
    if program.kernel.warp_unit.data == "warps":
        for f in factors:
            for w in (warps // f, warps * f):
                if 1 <= w <= 32:
                    out.append((f"warps={w}", w))
    return out


def where_holds(program, env: dict[str, int]) -> bool:
    try:
        return all(w.data.evaluate(env) for w in program.kernel.where.data)
    except (KeyError, ZeroDivisionError):
        return False


def candidates(folder: Path, pairs_first: bool = False, all_programs: bool = False, wide: bool = False):
    """(program name, label, text, params) in the order they are tried: the bases, then single
    changes of tuned and seed interleaved, then pairs of changes (with `pairs_first`, the pairs
    of changes before the single ones: a second sweep of mostly different variants). With
    `all_programs`, every program of the task's table, not only tuned and seed (those the Triton
    backend cannot compile, such as explicit-level ones, drop out in `validate`)."""
    from kir.parser import parse_file

    meta = task_meta(folder)
    bases, singles, pairs_by = [], [], []
    names = ["tuned", "seed"]
    if all_programs:
        names += [n for n in meta.get("programs", {}) if n not in names]
    for name in names:
        spec = meta.get("programs", {}).get(name)
        if spec is None:
            continue
        program = parse_file(folder / spec["file"])
        text = program.text()
        params = {**program.params, **spec.get("params", {}).get("bench", {})}
        bases.append((name, "base", text, params))
        ms = moves(program, params, wide)
        mine = []
        for label, change in ms:
            if isinstance(change, int):
                new = with_warps(text, change)
                if new is not None:
                    mine.append((name, label, new, params))
            else:
                mine.append((name, label, text, change))
        singles.append(mine)
        pairs: list = []
        pairs_by.append(pairs)
        for (la, ca), (lb, cb) in itertools.combinations(ms, 2):
            if la.split("=")[0] == lb.split("=")[0]:
                continue
            t, p = text, dict(params)
            for c in (ca, cb):
                if isinstance(c, int):
                    t = with_warps(t, c) or t
                else:
                    p.update({k: v for k, v in c.items() if c[k] != params[k]})
            pairs.append((name, f"{la},{lb}", t, p))
    interleaved = [x for group in itertools.zip_longest(*singles) for x in group if x is not None]
    if pairs_first:
        mixed = [x for group in itertools.zip_longest(*pairs_by) for x in group if x is not None]
        return bases + mixed + interleaved
    return bases + interleaved + [x for pairs in pairs_by for x in pairs]


def validate(folder: Path, text: str, params: dict[str, int], shapes: dict[str, int]) -> dict | None:
    """The compile figures and the predicted time of a valid variant, or None; an internal error
    of a stage is raised (the variant is dropped with the reason printed)."""
    from agent.pipeline import Candidate, evaluate
    from kir.targets import spec

    candidate = Candidate(text, tuple(sorted(params.items())), str(folder / "variant.kir"))
    record = evaluate(candidate, until="compile", backend="triton", target="sm_90", shapes=shapes, with_cost=True)
    internal = [d for d in record.diagnostics if d.rule == "internal.error"]
    if internal:
        raise RuntimeError(f"{record.stage}: {internal[0].message}")
    if not record.ok or (record.report["dynamic_shared_bytes"] or 0) > spec("sm_90").max_smem_per_block:
        return None
    report = record.report
    return {
        "registers": report["registers"],
        "smem_bytes": report["shared_bytes"],
        "spills": report["spills"],
        "predicted_s": record.estimate["time_s"],
    }


VALIDATE_S = 120.0  # a variant whose check and compile take longer is dropped (a huge tile per thread)


def validate_within(seconds: float, *args) -> dict | None:
    """`validate` in a forked child, given up after `seconds` (ptxas and LLVM can take many
    minutes on a tile of thousands of values a thread; such a variant is dropped)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        pending = pool.apply_async(validate, args)
        try:
            return pending.get(timeout=seconds)
        except mp.TimeoutError:
            raise TimeoutError(f"check and compile took over {seconds:.0f} s") from None


def measured_keys(files: list[Path]) -> set[tuple[str, str]]:
    """(content hash, parameters) of every variant in these measured or variants files."""
    from kir.parser import parse

    keys = set()
    for f in files:
        data = json.loads(f.read_text())
        for v in data["variants"] if isinstance(data, dict) else data:
            keys.add((parse(v["text"]).content_hash(), json.dumps(v["params"], sort_keys=True)))
    return keys


def generate(
    per_task: int,
    tasks: list[str] | None,
    out: Path,
    pairs_first: bool = False,
    all_programs: bool = False,
    exclude: list[Path] | None = None,
    wide: bool = False,
) -> list[dict]:
    """Up to `per_task` valid variants a task, skipping those in the `exclude` files (variants
    measured before: a sweep of new variants checks the model out of sample)."""
    from kir.parser import parse

    jobs: list[dict] = []
    excluded = measured_keys(exclude or [])
    for folder in sorted(p for p in TASKS.iterdir() if (p / "task.toml").exists()):
        if tasks and folder.name not in tasks:
            continue
        meta = task_meta(folder)
        shapes = {k: v for k, v in meta["presets"]["bench"].items() if isinstance(v, int)}
        seen: set[tuple[str, str]] = set(excluded)
        kept = 0
        t0 = time.time()
        for name, label, text, params in candidates(folder, pairs_first, all_programs, wide):
            if kept >= per_task:
                break
            program = parse(text)
            shp = {k: v for k, v in shapes.items() if k not in program.params}
            key = (program.content_hash(), json.dumps(params, sort_keys=True))
            if key in seen:
                continue
            seen.add(key)
            if not where_holds(program, {**shp, **params}):
                continue  # never verified: the cost stage would refuse it (cost.where-violated)
            try:
                figures = validate_within(VALIDATE_S, folder, text, params, shp)
            except Exception as err:  # noqa: BLE001 - a variant that breaks a tool is dropped, not fatal
                print(f"  {folder.name} {name} {label}: dropped ({type(err).__name__}: {err})", file=sys.stderr)
                continue
            if figures is None:
                continue
            jobs.append(
                {
                    "task": folder.name,
                    "id": f"{folder.name}/{name}/{label}",
                    "program": name,
                    "change": label,
                    "text": text,
                    "params": params,
                    "shapes": shp,
                    **figures,
                }
            )
            kept += 1
        print(f"{folder.name}: {kept} variants ({time.time() - t0:.0f} s)", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(jobs, indent=1) + "\n")
    return jobs


# ---- timing on the GPU ---------------------------------------------------------------------------


def time_job(task: str, variants: list[dict], sets: int, runs: int) -> dict:
    candidates = [
        {"kind": "kir", "text": v["text"], "backend": v.get("backend", "triton"), "params": v["params"]}
        for v in variants
    ]
    return {
        "kind": "time",
        "task": str(TASKS / task),
        "candidates": candidates,
        "preset": "bench",
        "device": "cuda",
        "time": {"sets": sets, "runs": runs, "peers": []},
    }


def measure(variants_file: Path, out: Path, jobs: int, timeout: float, chunk: int, passes: int = 2) -> list[dict]:
    from agent.harness.isolate import run_job

    variants = json.loads(variants_file.read_text())
    by_task: dict[str, list[dict]] = {}
    for v in variants:
        by_task.setdefault(v["task"], []).append(v)
    # 1. warm-up: compile every variant once, several processes at a time (the timings are thrown away)
    warm = [(t, vs[i : i + chunk]) for t, vs in by_task.items() for i in range(0, len(vs), chunk)]
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda tv: run_job(time_job(tv[0], tv[1], 1, 1), timeout=timeout), warm))
    print(f"warm-up: {len(warm)} jobs in {time.time() - t0:.0f} s", file=sys.stderr)
    # 2. the timing, one task at a time, every variant of the task side by side; `passes` times,
    # each in a fresh process and every other one in reverse order, so that a pair of variants
    # whose measured order differs between passes is known to be within the timing noise
    times: dict[str, list[float | None]] = {v["id"]: [] for v in variants}
    errors: dict[str, str | None] = {}
    results: list[dict] = []
    for k in range(passes):
        for task, vs in by_task.items():
            t1 = time.time()
            order = vs if k % 2 == 0 else vs[::-1]
            record = run_job(time_job(task, order, 2, 20), timeout=timeout)
            timed = record.get("metrics", {}).get("candidates", [])
            for i, v in enumerate(order):
                entry = timed[i] if i < len(timed) else {}
                times[v["id"]].append(entry["ms"] / 1e3 if entry.get("ms") else None)
                if not entry.get("ms"):
                    errors[v["id"]] = entry.get("error") or (None if record.get("ok") else record.get("stage"))
            print(f"pass {k + 1}: {task}: {len(vs)} variants timed in {time.time() - t1:.0f} s", file=sys.stderr)
            # written after every task, so that a run cut short keeps what it measured
            results = _write_measured(out, variants, times, errors)
    return results


def _write_measured(out: Path, variants: list[dict], times: dict, errors: dict) -> list[dict]:
    """The measured file: every variant timed so far (a variant not yet timed has no
    `measured_s`; one timed in fewer passes than others has fewer `measured_passes_s`)."""
    results = []
    for v in variants:
        got = times[v["id"]]
        if not got:
            continue
        row = {key: v[key] for key in v if key != "predicted_s"}
        row["measured_s"] = statistics.median(got) if all(got) else None
        row["measured_passes_s"] = got
        row["error"] = errors.get(v["id"])
        results.append(row)
    gpu = ""
    try:
        import torch

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    except ImportError:
        pass
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"gpu": gpu, "date": time.strftime("%Y-%m-%d"), "variants": results}, indent=1) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--per-task", type=int, default=10)
    g.add_argument("--task", action="append")
    g.add_argument("--out", type=Path, default=DEFAULT_OUT)
    g.add_argument("--pairs-first", action="store_true", help="pairs of changes before single ones")
    g.add_argument("--all-programs", action="store_true", help="every program of a task, not only tuned and seed")
    g.add_argument("--exclude", type=Path, action="append", help="a measured or variants file whose variants to skip")
    g.add_argument("--wide", action="store_true", help="also steps of 4x (tiles and warps quartered and quadrupled)")
    t = sub.add_parser("time")
    t.add_argument("--variants", type=Path, default=DEFAULT_OUT)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--jobs", type=int, default=8)
    t.add_argument("--chunk", type=int, default=3)
    t.add_argument(
        "--passes", type=int, default=2, help="timing passes (fresh process each; order reversed every other)"
    )
    t.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    if args.cmd == "generate":
        generate(args.per_task, args.task, args.out, args.pairs_first, args.all_programs, args.exclude, args.wide)
    else:
        measure(args.variants, args.out, args.jobs, args.timeout, args.chunk, args.passes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
