"""How long `tactics.applicable()` and each tactic's `apply()` take on the largest suite program.

    python benchmarks/tactics_speed.py [--runs 30] [--file PATH] [--baseline] [--save]

The largest program is the suite's (benchmarks/tasks/*/*.kir) with the most ops, unless --file
names one. `applicable` is timed whole (every tactic's precondition and domains, all three kinds
of numerics); `apply` for every registered tactic that applies, with its parameters' defaults
where its domains offer them, else the first value of each domain (every shape symbol at 4096,
so that fix-shape has a value to offer). Where that combination does not fit the program (a
`validate` that refuses it), the next ones in the domains' order are tried and the first that
applies is timed; a tactic none of whose combinations applies is timed refusing the first one,
and its row says so (`refused`: the rules of its reasons).

Each row gives the median and the max wall time of `--runs` calls, the median CPU time (the
machine may be shared: a wall time well above the CPU time is waiting, not work), the first
call's time in the process (`first_ms`, before the timed runs: caches filled then, such as the
prover's answers, serve every later call), and the garbage collector's full collections during
the runs (`full_gc`: a max is often one of them). The program is parsed once, before timing; the
tactic modules are imported before the first run; garbage is collected before each row, so that
one row does not pay for the garbage (discarded programs) of the one before. Target: median
under 20 ms for each.

`--baseline` also times every row with `Program.clone` done the way it was before it built the
copies directly (xdsl's `Operation.clone`, then a walk pairing old and new ops to carry spans
and comments), the two interleaved call by call, so that load on the machine hits both alike.
`--save` writes the figures to benchmarks/results/tactics_speed.json.
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tactics  # noqa: E402
from kir.check import op_count  # noqa: E402
from kir.diagnostics import KirError  # noqa: E402
from kir.parser import parse  # noqa: E402
from kir.program import Program, preorder  # noqa: E402
from kir.spans import copy_source_notes  # noqa: E402

TARGET_MS = 20.0
MAX_TRIES = 64  # parameter combinations tried per tactic before it is timed refusing the first


def machine() -> str:
    """The CPU's model name and the number of cores this process may use."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} cores"


def largest() -> Path:
    files = sorted((ROOT / "benchmarks" / "tasks").glob("*/*.kir"))
    return max(files, key=lambda f: op_count(parse(f.read_text(), file=str(f))))


def xdsl_clone(self: Program) -> Program:
    """`Program.clone` as it was before it built the copies directly (the --baseline)."""
    kernel = self.kernel.clone()
    for old, new in zip(preorder(self.kernel), preorder(kernel), strict=True):
        copy_source_notes(old, new)
    return replace(
        self,
        kernel=kernel,
        header_comments=list(self.header_comments),
        footer_comments=list(self.footer_comments),
        arg_spans=dict(self.arg_spans),
        param_spans=dict(self.param_spans),
        clause_spans=dict(self.clause_spans),
    )


class FullCollections:
    """The garbage collector's full (generation 2) collections while it is open: how many, and
    the longest, in ms. Every apply leaves a program of cyclic garbage behind, part of it old
    enough to wait for a full collection, which walks the whole heap: once in some tens of
    calls, that pause is a call's max."""

    def __init__(self) -> None:
        self.count = 0
        self.longest_ms = 0.0
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.longest_ms = max(self.longest_ms, (time.perf_counter() - self._start) * 1000)

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def _call(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one call; a `KirError` (a refusal) is an answer too."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        fn()
    except KirError:
        pass
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def _summary(times: list[tuple[float, float]], prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}median_ms": statistics.median(w for w, _ in times),
        f"{prefix}max_ms": max(w for w, _ in times),
        f"{prefix}cpu_median_ms": statistics.median(c for _, c in times),
    }


def measure(fn: Callable[[], object], runs: int, baseline: bool) -> dict[str, Any]:
    """The figures of `runs` calls of `fn`, and with `baseline` the same with the old clone,
    interleaved call by call."""
    gc.collect()
    times, before = [], []
    current = Program.clone
    with FullCollections() as full:
        for _ in range(runs):
            times.append(_call(fn))
            if baseline:
                Program.clone = xdsl_clone  # type: ignore[method-assign]
                try:
                    before.append(_call(fn))
                finally:
                    Program.clone = current  # type: ignore[method-assign]
    row: dict[str, Any] = _summary(times)
    if baseline:
        row.update(_summary(before, "baseline_"))
    row["full_gc"] = {"count": full.count, "longest_ms": full.longest_ms}
    return row


def choose(tactic: tactics.Tactic, program: Program, domains: dict[str, tuple]) -> dict[str, Any]:
    """The parameter values to time `tactic` with (see the module docstring): `params`; when
    they do not apply, `refused` (the rules of the first combination's reasons, or why there
    is no combination); and `first_ms`, how long the tactic's first call in the process took."""
    orders = []
    for p in tactic.params:
        options = list(domains.get(p.name, ()))
        if p.default is not None and p.default in options:
            options.remove(p.default)
            options.insert(0, p.default)
        orders.append(options or ([p.default] if p.default is not None else []))
    first: dict[str, Any] | None = None
    for combo in itertools.islice(itertools.product(*orders), MAX_TRIES):
        values = dict(zip(tactic.param_names, combo, strict=True))
        start = time.perf_counter()
        try:
            tactic.apply(program, **values)
        except KirError as err:
            if first is None:
                rules = sorted({d.rule for d in err.diagnostics})
                first = {"params": values, "refused": ", ".join(rules), "first_ms": _ms(start)}
            continue
        return {"params": values, "first_ms": first["first_ms"] if first else _ms(start)}
    if first is None:  # a parameter whose domain offers nothing here: timed on its defaults
        empty = [p.name for p, options in zip(tactic.params, orders, strict=True) if not options]
        values = {p.name: p.default for p in tactic.params if p.default is not None}
        start = time.perf_counter()
        _call(functools.partial(tactic.apply, program, **values))
        return {"params": values, "refused": f"no value offered for {', '.join(empty)}", "first_ms": _ms(start)}
    return first


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--file", type=Path, default=None)
    ap.add_argument("--baseline", action="store_true", help="also time the old clone, interleaved")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    file = (args.file or largest()).resolve()
    program = parse(file.read_text(), file=str(file))
    shapes = dict.fromkeys(program.kernel.shape_symbols, 4096)
    tactics.all()
    rows: list[dict[str, Any]] = []
    first_ms, _ = _call(lambda: tactics.applicable(program, shapes=shapes))
    row = measure(lambda: tactics.applicable(program, shapes=shapes), args.runs, baseline=False)
    rows.append({"what": "applicable()", **row, "first_ms": first_ms, "pass": row["median_ms"] < TARGET_MS})
    for tactic, domains in tactics.applicable(program, shapes=shapes):
        chosen = choose(tactic, program, domains)
        row = measure(functools.partial(tactic.apply, program, **chosen["params"]), args.runs, args.baseline)
        rows.append({"what": f"apply {tactic.name}", **chosen, **row, "pass": row["median_ms"] < TARGET_MS})
    print(f"{file.relative_to(ROOT)}: {op_count(program)} ops, {args.runs} runs each, target < {TARGET_MS:.0f} ms")
    print("(first: the first call in the process; full gc: full collections during the runs, the longest)")
    head = f"{'':24} {'median ms':>9} {'max ms':>7} {'cpu ms':>7} {'first ms':>8} {'full gc':>12}"
    print(head + (f"  {'before: median':>14} {'max':>7} {'cpu':>7}" if args.baseline else ""))
    for r in rows:
        gcs = f"{r['full_gc']['count']} {r['full_gc']['longest_ms']:.1f} ms" if r["full_gc"]["count"] else "0"
        line = f"{r['what']:<24} {r['median_ms']:9.2f} {r['max_ms']:7.2f} {r['cpu_median_ms']:7.2f} {r['first_ms']:8.2f} {gcs:>12}"
        if "baseline_median_ms" in r:
            line += f"  {r['baseline_median_ms']:14.2f} {r['baseline_max_ms']:7.2f} {r['baseline_cpu_median_ms']:7.2f}"
        line += "  PASS" if r["pass"] else "  FAIL"
        if "params" in r:
            notes = [", ".join(f"{k}={v}" for k, v in r["params"].items())]
            if "refused" in r:
                notes.append(f"refused: {r['refused']}")
            shown = "; ".join(n for n in notes if n)
            line += f"  ({shown})" if shown else ""
        print(line)
    ok = all(r["pass"] for r in rows)
    print("all under target:", "PASS" if ok else "FAIL")
    if args.save:
        out = ROOT / "benchmarks" / "results" / "tactics_speed.json"
        out.write_text(
            json.dumps(
                {
                    "date": date.today().isoformat(),
                    "machine": machine(),
                    "python": platform.python_version(),
                    "file": str(file.relative_to(ROOT)),
                    "ops": op_count(program),
                    "runs": args.runs,
                    "target_ms": TARGET_MS,
                    "baseline": "xdsl Operation.clone" if args.baseline else None,
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
