"""How long the verifier takes on the largest example, cold and warm.

    python benchmarks/verify_speed.py [--runs 30] [--file examples/gemm_hopper_ws.kir] [--save]

cold: every run starts from an empty proof cache (a fresh temporary KIR_CACHE_DIR, the in-memory
cache cleared) and a freshly parsed program, so every z3 query is solved. warm: the cache holds
every query's answer (as when an agent re-checks a program it has seen), so no solver runs.
Parsing is not timed; rule modules are imported before the first run. Targets: < 300 ms cold,
< 50 ms warm (medians). `--save` writes the figures to benchmarks/results/verify_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kir.parser import parse  # noqa: E402
from verifier import load_rules, verify  # noqa: E402
from verifier.symbolic import CACHE  # noqa: E402

COLD_TARGET_MS = 300.0
WARM_TARGET_MS = 50.0


def _time_verify(text: str, file: str, cpu: list[float] | None = None) -> float:
    program = parse(text, file=file)
    start, start_cpu = time.perf_counter(), time.process_time()
    verify(program)
    if cpu is not None:  # this process's CPU time: on a shared machine, the part of the wall time that is ours
        cpu.append((time.process_time() - start_cpu) * 1000)
    return (time.perf_counter() - start) * 1000


def measure(path: Path, runs: int) -> dict:
    text = path.read_text()
    load_rules()
    saved = {k: os.environ.get(k) for k in ("KIR_CACHE_DIR", "KIR_Z3_CACHE")}
    try:
        os.environ["KIR_Z3_CACHE"] = "1"
        cold, warm, warm_cpu = [], [], []
        with tempfile.TemporaryDirectory() as scratch:
            for i in range(runs):
                os.environ["KIR_CACHE_DIR"] = str(Path(scratch) / f"cold{i}")
                CACHE.reset()
                cold.append(_time_verify(text, str(path)))
            os.environ["KIR_CACHE_DIR"] = str(Path(scratch) / "warm")
            CACHE.reset()
            _time_verify(text, str(path))  # populate
            for _ in range(runs):
                warm.append(_time_verify(text, str(path), warm_cpu))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        CACHE.reset()
    return {
        "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "runs": runs,
        "cold_ms": {"median": statistics.median(cold), "min": min(cold), "max": max(cold)},
        "warm_ms": {"median": statistics.median(warm), "min": min(warm), "max": max(warm)},
        "warm_cpu_ms": {"median": statistics.median(warm_cpu), "min": min(warm_cpu)},
        "targets_ms": {"cold": COLD_TARGET_MS, "warm": WARM_TARGET_MS},
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def breakdown(path: Path, top: int = 8) -> dict[str, dict[str, float]]:
    """Milliseconds per rule in one cold and one warm run (rules run as `verify` runs them)."""
    from verifier.context import Context
    from verifier.registry import CHECKS

    text = path.read_text()
    out: dict[str, dict[str, float]] = {}
    saved = os.environ.get("KIR_CACHE_DIR")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["KIR_CACHE_DIR"] = scratch
        CACHE.reset()
        for label in ("cold", "warm"):
            ctx = Context(parse(text, file=str(path)))
            for check in CHECKS:
                ctx.rule = check.rule
                start = time.perf_counter()
                list(check.fn(ctx))
                out.setdefault(check.rule.id, {})[label] = (time.perf_counter() - start) * 1000
            CACHE.flush()
    if saved is None:
        os.environ.pop("KIR_CACHE_DIR", None)
    else:
        os.environ["KIR_CACHE_DIR"] = saved
    CACHE.reset()
    ranked = sorted(out.items(), key=lambda kv: -kv[1]["cold"])
    return dict(ranked[:top])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(ROOT / "examples" / "gemm_hopper_ws.kir"))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--save", action="store_true", help="write benchmarks/results/verify_speed.json")
    args = parser.parse_args(argv)
    result = measure(Path(args.file).resolve(), args.runs)
    cold, warm = result["cold_ms"]["median"], result["warm_ms"]["median"]
    ok_cold, ok_warm = cold < COLD_TARGET_MS, warm < WARM_TARGET_MS
    result["pass"] = ok_cold and ok_warm
    print(f"verify({result['file']}), median of {args.runs} runs")
    print(f"  cold {cold:8.1f} ms  (target < {COLD_TARGET_MS:.0f} ms)  {'PASS' if ok_cold else 'FAIL'}")
    print(f"  warm {warm:8.1f} ms  (target < {WARM_TARGET_MS:.0f} ms)  {'PASS' if ok_warm else 'FAIL'}")
    print(f"  warm {result['warm_cpu_ms']['median']:8.1f} ms of CPU time")
    result["slowest_rules_ms"] = breakdown(Path(args.file).resolve())
    print("  slowest rules (cold / warm ms):")
    for rid, t in result["slowest_rules_ms"].items():
        print(f"    {rid:36s} {t['cold']:7.1f} {t['warm']:7.1f}")
    print("PASS" if result["pass"] else "FAIL")
    if args.save:
        out = ROOT / "benchmarks" / "results" / "verify_speed.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"saved {out.relative_to(ROOT)}")
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
