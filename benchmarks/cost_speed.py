"""How long `predict` takes: the median per program over every example and task program, for
sm_90, gfx942 and mtia-sim (parse excluded, hints included: the `cost.target` warning of a
program costed off its own target asks the verifier's target rules, handed in as `checks`). The
target is under 20 ms.

    python benchmarks/cost_speed.py [--repeat 5]

An example takes `EXAMPLE_SHAPES` (one table for every example, `EXAMPLE_OVERRIDES` where an
example's `where` rules its value out); a task program its bench preset. A pair the cost model
refuses (shapes that break the program's `where`, say) is skipped with the reason printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = ("sm_90", "gfx942", "mtia-sim")
EXAMPLE_SHAPES = {
    "M": 4096,
    "N": 1024,
    "K": 4096,
    "B": 1000,
    "R": 100000,
    "D": 128,
    "NB": 4096,
    "L": 32,
    "P": 65536,
    "C": 1024,
}
# `L` is a bag's length in embedding_bag (`where L <= BL`, BL = 32) but the sequence length of
# attention_scores_hopper (`where L % BM == 0`, BM = 128)
EXAMPLE_OVERRIDES = {"attention_scores_hopper": {"L": 4096}}


def programs():
    from costmodel.cli import task_bindings
    from kir.parser import parse_file

    for path in sorted((ROOT / "examples").glob("*.kir")):
        p = parse_file(path)
        shapes = {**EXAMPLE_SHAPES, **EXAMPLE_OVERRIDES.get(path.stem, {})}
        yield path, p, {}, {s: shapes[s] for s in p.kernel.shape_symbols}
    for path in sorted((ROOT / "benchmarks" / "tasks").glob("*/*.kir")):
        p = parse_file(path)
        params, shapes = task_bindings(path, "bench")
        yield (
            path,
            p,
            {k: v for k, v in params.items() if k in p.params},
            {k: v for k, v in shapes.items() if k not in p.params},
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    from costmodel import CostModel
    from kir.diagnostics import KirError
    from verifier.facts import CHECKS

    model = CostModel()
    per_program: list[float] = []
    skipped = 0
    slowest = (0.0, "")
    for path, program, params, shapes in programs():
        for target in TARGETS:
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                try:
                    model.predict(program, target, params, shapes, checks=CHECKS)
                except KirError as err:
                    first = err.diagnostics[0]
                    print(f"skipped {path.relative_to(ROOT)} {target}: {first.rule}: {first.message}")
                    break
                times.append(time.perf_counter() - t0)
            if not times:
                skipped += 1
                continue
            ms = statistics.median(times) * 1e3
            per_program.append(ms)
            slowest = max(slowest, (ms, f"{path.relative_to(ROOT)} {target}"))
    median = statistics.median(per_program)
    print(
        f"{len(per_program)} program-target pairs ({skipped} skipped): median {median:.2f} ms, p90 "
        f"{sorted(per_program)[int(0.9 * len(per_program))]:.2f} ms, slowest {slowest[0]:.2f} ms ({slowest[1]})"
    )
    print("target: median under 20 ms:", "ok" if median < 20 else "MISSED")
    return 0 if median < 20 else 1


if __name__ == "__main__":
    raise SystemExit(main())
