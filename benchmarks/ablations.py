"""Ablations and candidate programs timed side by side on the GPU, to find where a task's time goes.

    python benchmarks/ablations.py make --out VARIANTS.json          # here, no GPU needed
    python benchmarks/costmodel_variants.py time --variants VARIANTS.json --out MEASURED.json  # on the GPU

Each entry takes a task's program (or a file under benchmarks/ablations/), applies text edits
(an ablation removes work: a dot, the selection rounds) and parameters, and becomes one variant
in the format `costmodel_variants.py time` measures. Ablated programs compute wrong answers on
purpose: they are timed, never checked, and their times say what the removed work costs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "tasks"
HERE = ROOT / "benchmarks" / "ablations"

KNN_SELECTION = """    worst = max(best_v, axis = 0)
    n = max(sum(cast<i32>(dist < worst[None, :]), axis = 0), axis = 0)
    for r in 0 .. minimum(n, K) {"""

# the selection replaced by a running minimum that still feeds the output (or the dots are dead code)
NO_SELECTION = """    best_v = minimum(best_v, min(dist, axis = 0)[None, :])
    best_i = best_i + cast<i32>(best_v < 0.0)
    for r in 0 .. 0 {"""

# (task, label, source, parameter overrides, [(old, new) text edits][, {extra variant fields}])
ENTRIES: list[tuple[str, str, str, dict, list[tuple[str, str]]]] = [
    ("knn_topk", "base", "tuned", {}, []),
    ("knn_topk", "no-rounds", "tuned", {}, [("minimum(n, K)", "minimum(n, 0)")]),
    (
        "knn_topk",
        "one-dot",
        "tuned",
        {},
        [("    pq = dot<f32>(p_hi, q_lo, pq)\n    pq = dot<f32>(p_lo, q_hi, pq)\n", "")],
    ),
    ("knn_topk", "no-selection", "tuned", {}, [(KNN_SELECTION, NO_SELECTION)]),
    ("knn_topk", "S=3", "tuned", {"S": 3}, []),
    ("kmeans_assign", "base", "tuned", {}, []),
    (
        "kmeans_assign",
        "one-dot",
        "tuned",
        {},
        [("    xc = dot<f32>(x_hi, trans(c_lo), xc)\n    xc = dot<f32>(x_lo, trans(c_hi), xc)\n", "")],
    ),
    ("kmeans_assign", "S=3", "tuned", {"S": 3}, []),
    ("conv1d", "base", "tuned", {}, []),
    ("conv1d", "im2col-256x128x32", "conv1d_im2col.kir", {"BM": 256, "BN": 128, "BK": 32, "S": 3}, []),
    ("conv1d", "im2col-128x256x32", "conv1d_im2col.kir", {"BM": 128, "BN": 256, "BK": 32, "S": 3}, []),
    ("conv1d", "im2col-128x128x64", "conv1d_im2col.kir", {"BM": 128, "BN": 128, "BK": 64, "S": 3}, []),
    ("conv1d", "im2col-256x128x64", "conv1d_im2col.kir", {"BM": 256, "BN": 128, "BK": 64, "S": 2}, []),
    ("conv1d", "im2col-128x128x32", "conv1d_im2col.kir", {"BM": 128, "BN": 128, "BK": 32, "S": 4}, []),
]

# run 2: programs using `gather` (a tile-level op added after run 1)
ENTRIES_2: list[tuple[str, str, str, dict, list[tuple[str, str]]]] = [
    ("conv1d", "tuned", "tuned", {}, []),
    ("conv1d", "gather-256x128", "conv1d_gather.kir", {"BM": 256, "BN": 128}, []),
    ("conv1d", "gather-128x128", "conv1d_gather.kir", {"BM": 128, "BN": 128}, []),
    ("conv1d", "gather-128x256", "conv1d_gather.kir", {"BM": 128, "BN": 256}, []),
    ("conv1d", "gather-128x128-S3", "conv1d_gather.kir", {"BM": 128, "BN": 128, "S": 3}, []),
    ("conv1d", "gather-64x256", "conv1d_gather.kir", {"BM": 64, "BN": 256}, []),
    ("bucketize", "tuned", "tuned", {}, []),
    ("bucketize", "table", "table", {}, []),
    ("bucketize", "table-2048", "table", {"BLOCK": 2048}, []),
    ("bucketize", "table-4096", "table", {"BLOCK": 4096}, []),
    ("bucketize", "table-512", "table", {"BLOCK": 512}, []),
]

# run 3: the explicit-level Hopper GEMM (gluon) against cuBLAS; an entry's optional sixth field
# holds variant fields (here the backend that times it)
GLUON = {"backend": "gluon"}
GEMM_128x256 = {"BM": 128, "BN": 256, "BK": 64}
WAIT1 = "gemm_explicit_wait1.kir"
PERSISTENT = "gemm_explicit_persistent.kir"
ENTRIES_3: list[tuple] = [
    ("gemm", "explicit", "explicit", {}, [], GLUON),
    ("gemm", "wait1", WAIT1, {**GEMM_128x256, "S": 4}, [], GLUON),
    ("gemm", "wait1-S3", WAIT1, {**GEMM_128x256, "S": 3}, [], GLUON),
    (
        "gemm",
        "wait1-regs24-240",
        WAIT1,
        {**GEMM_128x256, "S": 4},
        [("regs(40)", "regs(24)"), ("regs(232)", "regs(240)")],
        GLUON,
    ),
    ("gemm", "wait1-128x128-S4", WAIT1, {"BM": 128, "BN": 128, "BK": 64, "S": 4}, [], GLUON),
    ("gemm", "wait1-128x128-S6", WAIT1, {"BM": 128, "BN": 128, "BK": 64, "S": 6}, [], GLUON),
    ("gemm", "persistent-GM8", PERSISTENT, {**GEMM_128x256, "S": 4, "GM": 8, "NSM": 132}, [], GLUON),
    ("gemm", "persistent-GM32", PERSISTENT, {**GEMM_128x256, "S": 4, "GM": 32, "NSM": 132}, [], GLUON),
    ("gemm", "persistent-S3", PERSISTENT, {**GEMM_128x256, "S": 3, "GM": 8, "NSM": 132}, [], GLUON),
    (
        "gemm",
        "persistent-tma-store-S3",
        "gemm_explicit_persistent_tma_store.kir",
        {**GEMM_128x256, "S": 3, "GM": 8, "NSM": 132},
        [],
        GLUON,
    ),
    (
        "gemm",
        "persistent-tma-store-128x128-S6",
        "gemm_explicit_persistent_tma_store.kir",
        {"BM": 128, "BN": 128, "BK": 64, "S": 6, "GM": 8, "NSM": 132},
        [],
        GLUON,
    ),
]
# run 7: conv1d's implicit GEMM at the explicit level (the weight by TMA, the im2col tile gathered
# by one producer warpgroup, ablations/conv1d_ws1.kir, or two, the task's ws.kir; two wgmma
# consumers) against the tuned tile-level program
ENTRIES_7: list[tuple] = [
    ("conv1d", "tuned", "tuned", {}, []),
    ("conv1d", "ws-256x128-S4", "conv1d_ws1.kir", {"BM": 256, "BN": 128, "BK": 64, "KW": 7, "S": 4}, [], GLUON),
    ("conv1d", "ws-256x128-S3", "conv1d_ws1.kir", {"BM": 256, "BN": 128, "BK": 64, "KW": 7, "S": 3}, [], GLUON),
    ("conv1d", "ws-128x128-S4", "conv1d_ws1.kir", {"BM": 128, "BN": 128, "BK": 64, "KW": 7, "S": 4}, [], GLUON),
    ("conv1d", "ws-256x64-S4", "conv1d_ws1.kir", {"BM": 256, "BN": 64, "BK": 64, "KW": 7, "S": 4}, [], GLUON),
    ("conv1d", "ws-128x64-S6", "conv1d_ws1.kir", {"BM": 128, "BN": 64, "BK": 64, "KW": 7, "S": 6}, [], GLUON),
    ("conv1d", "ws2-256x128-S4", "ws", {"S": 4}, [], GLUON),
    ("conv1d", "ws2-256x128-S3", "ws", {}, [], GLUON),
    ("conv1d", "ws2-128x128-S4", "ws", {"BM": 128, "S": 4}, [], GLUON),
]
RUNS = {"1": ENTRIES, "2": ENTRIES_2, "3": ENTRIES_3, "7": ENTRIES_7}


def source(task: str, name: str) -> tuple[str, dict]:
    meta = tomllib.loads((TASKS / task / "task.toml").read_text())
    if name.endswith(".kir"):
        return (HERE / name).read_text(), {}
    prog = meta["programs"][name]
    return (TASKS / task / prog["file"]).read_text(), dict(prog.get("params", {}).get("bench", {}))


def make(out: Path, run: str = "2") -> list[dict]:
    variants = []
    for task, label, name, params, edits, *fields in RUNS[run]:
        text, base = source(task, name)
        for old, new in edits:
            if old not in text:
                raise SystemExit(f"{task}/{label}: edit target not found: {old[:60]!r}")
            text = text.replace(old, new)
        meta = tomllib.loads((TASKS / task / "task.toml").read_text())
        shapes = {k: v for k, v in meta["presets"]["bench"].items() if isinstance(v, int)}
        merged = {**base, **params}
        variants.append(
            {
                "task": task,
                "id": f"{task}/{name}/{label}",
                "program": name,
                "change": label,
                "text": text,
                "params": merged,
                "shapes": {k: v for k, v in shapes.items() if k not in merged},
                **(fields[0] if fields else {}),
            }
        )
    out.write_text(json.dumps(variants, indent=1) + "\n")
    return variants


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--run", choices=sorted(RUNS), default="2")
    args = ap.parse_args(argv)
    variants = make(args.out, args.run)
    print(f"{len(variants)} variants -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
