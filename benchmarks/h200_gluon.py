"""The explicit Hopper GEMM (examples/gemm_hopper_ws.kir) through the gluon backend on an H200,
side by side with torch.matmul.

    python benchmarks/h200_gluon.py            # prints a table; writes $OUT/gluon.json if OUT is set

For each parameter variant: lower (`lower(program, "gluon", params)`), check the result on
512^3 and 4096^3 (bf16 inputs drawn from a normal distribution; the bf16 output against an
f32 torch.matmul of the same inputs, with a bf16 tolerance), then time 4096^3 with CUDA events
around the launch alone (warm-up, median of 50, the L2 flushed before every run by writing a
256 MB buffer), next to torch.matmul timed the same way in the same process. Every variant's
failure is caught and reported; the run stays well under three minutes.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = [
    {},  # the example's defaults: BM = 128, BN = 128, BK = 64, S = 4
    {"S": 3},
    {"BN": 256, "S": 3},
    {"BN": 256, "S": 4},
]
SIZE = 4096
CHECK_SIZES = (512, 4096)
REPS = 50


def check(launch_for, torch, size: int) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(size)
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.full((size, size), float("nan"), device="cuda", dtype=torch.bfloat16)  # poisoned
    launch_for(a, b, c)()
    torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float())
    err = (c.float() - ref).abs()
    # bf16 keeps 8 significant bits: the rounding of the output alone is up to 2^-9 relative;
    # allow 2^-7 of each element plus a little of the row's scale for accumulation order.
    tol = ref.abs() * 2.0**-7 + ref.abs().max() * 2.0**-10
    bad = int((~(err <= tol)).sum().item())  # NaN (an unwritten element) counts as bad
    return {
        "size": size,
        "ok": bad == 0,
        "bad_elements": bad,
        "max_abs_err": float(err.nan_to_num(float("inf")).max().item()),
        "max_rel_err": float((err / ref.abs().clamp_min(1e-3)).nan_to_num(float("inf")).max().item()),
    }


def main() -> int:
    started = time.monotonic()
    import torch
    import triton

    from kir.parser import parse_file
    from lowering.entry import lower
    from lowering.targets.gluon.runtime import GluonLaunch, time_launch

    record: dict = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "size": SIZE,
        "reps": REPS,
        "variants": [],
    }
    program = parse_file(ROOT / "examples" / "gemm_hopper_ws.kir")
    flops = 2.0 * SIZE**3

    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    try:
        torch_ms = statistics.median(time_launch(lambda: torch.matmul(a, b, out=c), reps=REPS))
        record["torch_ms"] = torch_ms
        record["torch_tflops"] = flops / torch_ms / 1e9
        print(f"torch.matmul {SIZE}^3 bf16: {torch_ms:.3f} ms, {record['torch_tflops']:.1f} TFLOP/s", flush=True)
    except Exception as err:  # noqa: BLE001
        record["torch_error"] = f"{type(err).__name__}: {err}"
        torch_ms = None
        print("torch.matmul failed:", err, flush=True)

    for params in VARIANTS:
        entry: dict = {"params": {**program.params, **params}}
        record["variants"].append(entry)
        print(f"\n== {entry['params']}", flush=True)
        try:
            t0 = time.monotonic()
            lowered = lower(program, "gluon", params)
            entry["partitions"] = lowered.options["partitions"]

            def launch_for(x, y, z, lowered=lowered):
                return GluonLaunch.from_torch(lowered, {"a": x, "b": y, "c": z})

            entry["checks"] = []
            for size in CHECK_SIZES:
                result = check(launch_for, torch, size)
                entry["checks"].append(result)
                print(f"   check {size}^3: {'ok' if result['ok'] else 'WRONG'} {result}", flush=True)
            entry["compile_and_check_s"] = time.monotonic() - t0
            launch = launch_for(a, b, c)
            ms = statistics.median(time_launch(launch, reps=REPS))
            entry["ms"] = ms
            entry["tflops"] = flops / ms / 1e9
            entry["ratio_vs_torch"] = (torch_ms / ms) if torch_ms else None
            ratio = f"{entry['ratio_vs_torch']:.2f}x torch" if torch_ms else ""
            print(f"   {SIZE}^3: {ms:.3f} ms, {entry['tflops']:.1f} TFLOP/s, {ratio}", flush=True)
        except Exception as err:  # noqa: BLE001 - one variant's failure never stops the others
            entry["error"] = f"{type(err).__name__}: {err}"
            entry["traceback"] = traceback.format_exc()[-4000:]
            print(f"   FAILED: {entry['error']}", flush=True)
        if time.monotonic() - started > 150:
            print("stopping early: the time budget is spent", flush=True)
            break

    good = [v for v in record["variants"] if v.get("tflops") and all(c["ok"] for c in v.get("checks", []))]
    if good:
        best = max(good, key=lambda v: v["tflops"])
        record["best"] = {"params": best["params"], "tflops": best["tflops"], "ratio_vs_torch": best["ratio_vs_torch"]}
        print(
            f"\nbest correct variant: {best['params']}: {best['tflops']:.1f} TFLOP/s ({best['ratio_vs_torch']:.2f}x torch)"
        )
    record["seconds"] = time.monotonic() - started
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "gluon.json").write_text(json.dumps(record, indent=2))
        print(f"wrote {Path(out) / 'gluon.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
