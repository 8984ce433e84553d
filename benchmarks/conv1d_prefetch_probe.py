"""Prefetch probe for conv1d's ws.kir (ablations run 15): the Gluon source that KIR generates for
it, with prefetches of the input rows of gather step k + D added at the top of the gather loop
(`prefetch.global.L2` or `.L1`, through `gl.inline_asm_elementwise`, three 128-byte lines a row),
timed against the unpatched kernel and PyTorch's F.conv1d (cuDNN) side by side:

    python3 benchmarks/conv1d_prefetch_probe.py compile    # every variant, no GPU
    python3 benchmarks/conv1d_prefetch_probe.py time OUT   # on the GPU: OUT/prefetch.json

KIR has no prefetch op; this edits the generated source to learn whether one would pay.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARAMS = {"BM": 256, "BN": 128, "BK": 64, "KW": 7, "S": 4}
ANCHOR = "        kk = k * 64 + h0 + gl.arange(0, 32, layout=slice_layout_1)\n"
B, C, L, KW = 32, 256, 4096, 7


def patched(source: str, level: str, dist: int, lines: int = 3) -> str:
    """`source` with the rows of step k + `dist` prefetched into `level` before step k's gather."""
    assert ANCHOR in source, "the generated gather loop changed: update ANCHOR"
    text = (
        f"        kp = gl.minimum(k + {dist}, nk - 1) * 64 + h0 + gl.arange(0, 32, layout=slice_layout_1)\n"
        "        rowp = (b.to(gl.int64) * (C * L) + (kp // 7).to(gl.int64) * L + gl.maximum(l0 - 8, 0)) * 2"
        " + x.to(gl.int64)\n"
    )
    for q in range(lines):
        text += (
            f'        _pf{q} = gl.inline_asm_elementwise("prefetch.global.{level} [$1]; mov.u32 $0, 0;", "=r,l", '
            f"[rowp + {q * 128}], dtype=gl.int32, is_pure=False, pack=1)\n"
        )
    return source.replace(ANCHOR, text + ANCHOR)


def variants() -> dict:
    from kir.parser import parse_file
    from lowering.entry import lower

    base = lower(parse_file(ROOT / "benchmarks" / "tasks" / "conv1d" / "ws.kir"), "gluon", PARAMS)
    out = {"ws": base}
    for level in ("L2", "L1"):
        for dist in (1, 2, 3, 4):
            lowered = copy.copy(base)
            lowered.source = patched(base.source, level, dist)
            out[f"pf_{level}_d{dist}"] = lowered
    return out


def compile_all() -> None:
    from lowering.targets.gluon.compile import compile_lowered

    for name, lowered in variants().items():
        report = compile_lowered(lowered, "sm_90")
        print(name, "ok" if report.ok else report.log[-300:], report.registers, report.spill_stores)


def time_all(out_dir: Path, rounds: int = 30) -> None:
    import torch
    import torch.nn.functional as F

    from lowering.targets.gluon.runtime import GluonLaunch

    torch.manual_seed(0)
    xs = [torch.randn(B, C, L, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    w = torch.randn(C, C, KW, device="cuda", dtype=torch.bfloat16) * 0.05
    refs = [F.conv1d(x.float(), w.float(), padding=KW // 2) for x in xs]
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    launches, results = {}, {}
    for name, lowered in variants().items():
        ys = [torch.empty_like(x) for x in xs]
        launches[name] = [
            GluonLaunch.from_torch(lowered, {"x": x, "w": w.view(C, C * KW), "y": y})
            for x, y in zip(xs, ys, strict=True)
        ]
        for launch in launches[name]:
            launch()
        torch.cuda.synchronize()
        err = max(((y.float() - r).abs().max() / r.abs().max()).item() for y, r in zip(ys, refs, strict=True))
        results[name] = {"max_rel_err": err, "ms": []}
    launches["eager"] = [lambda x=x: F.conv1d(x, w, padding=KW // 2) for x in xs]
    results["eager"] = {"ms": []}
    names = list(launches)
    for r in range(rounds):  # every variant once a round, the order reversed every other round
        for name in names if r % 2 == 0 else names[::-1]:
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launches[name][r % len(xs)]()
            end.record()
            torch.cuda.synchronize()
            results[name]["ms"].append(start.elapsed_time(end))
    for name in names:
        results[name]["median_ms"] = sorted(results[name]["ms"])[rounds // 2]
        print(f"{name:14s} {results[name]['median_ms']:.4f} ms  err {results[name].get('max_rel_err', 0):.2e}")
    (out_dir / "prefetch.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["compile"]:
        compile_all()
    else:
        time_all(Path(sys.argv[2]))
