"""The CUDA C++ backend on an H200: every example built and checked, and the explicit Hopper
GEMM (examples/gemm_hopper_ws.kir) timed side by side with torch.matmul.

    python benchmarks/h200_cuda.py            # prints as it goes; writes $OUT/cuda.json if OUT is set
    python benchmarks/h200_cuda.py --no-probes --no-timing

1. Build: every example (at its test-preset parameters, or its defaults where the cuda backend
   refuses those), the programs of tests/lowering/test_cuda.py that reach what the examples do
   not (scans, top-k, atomics, trans, cp.async, warp roles, TMA stores through swizzled shared
   memory, wgmma without roles), and the GEMM variants, all compiled in parallel; per kernel
   the registers, spills and HGMMA presence.
2. Check: each example on the inputs of tests/examples/references.py, against the reference
   interpreter (`kir.interp.run`) and the float64 reference, with the case's tolerances; each
   probe program against the interpreter.
3. Time: the GEMM at 4096^3 bf16, checked first at 512^3 and 4096^3 against an f32
   torch.matmul, then CUDA events around the launch alone (warm-up, median of 50, the L2
   flushed before every run by writing a 256 MB buffer), next to torch.matmul timed the same way.

Every step's failure is caught, printed and recorded; the run stops early rather than run past
its time budget (about four minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kir.diagnostics import KirError  # noqa: E402
from kir.parser import parse, parse_file  # noqa: E402

BUDGET_S = 210.0
SIZE = 4096
CHECK_SIZES = (512, 4096)
REPS = 50
GEMM_VARIANTS = [
    {},  # the example's defaults: BM = 128, BN = 128, BK = 64, S = 4
    {"S": 6},
    {"BN": 256, "S": 3},
    {"BN": 256, "S": 4},
    {"BM": 256, "S": 4},  # two 128-row consumers: two m64 wgmmas per k16 step each
]


def probe_inputs(name: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Inputs for the programs of tests/lowering/test_cuda.py (`PROGRAMS`)."""
    import ml_dtypes

    def normal(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    bf16 = ml_dtypes.bfloat16
    return {
        "gemm_tma_store": lambda: {"a": normal(128, 128, dtype=bf16), "b": normal(128, 256, dtype=bf16)},
        "gemm_rowmax": lambda: {"a": normal(128, 128, dtype=bf16), "b": normal(128, 256, dtype=bf16)},
        "ws_rows": lambda: {"x": normal(128, 128)},
        "probe_scan": lambda: {"x": normal(4, 100)},
        "probe_hist": lambda: {"x": rng.integers(0, 16, 1000).astype(np.int32), "hist": np.zeros(16, np.int32)},
        "probe_dot": lambda: {"a": normal(64, 64), "b": normal(32, 64)},
        "probe_tma": lambda: {"x": normal(128, 256, dtype=bf16)},
        "probe_cpasync": lambda: {"x": normal(128, 256)},
        "tile_ops": lambda: {"x": normal(4, 100), "hist": np.zeros(100, np.int32)},
    }[name]()


# ---- helpers ---------------------------------------------------------------------------------------


def compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> dict:
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return {"ok": False, "why": f"shape {got.shape} != {want.shape}"}
    if want.dtype.kind in "iub":
        bad = int((got != want).sum())
        return {"ok": bad == 0, "bad": bad}
    g, w = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(g - w)
    bad = int((~(err <= atol + rtol * np.abs(w))).sum())  # NaN counts as bad
    return {"ok": bad == 0, "bad": bad, "max_abs_err": float(np.nan_to_num(err, nan=np.inf).max()) if err.size else 0.0}


def time_ms(torch, fn, reps: int = REPS, warmup: int = 5) -> list[float]:
    """CUDA events around `fn` alone, the L2 flushed before every run."""
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = []
    for _ in range(reps):
        flush.fill_(1)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def compile_info(lowered) -> dict:
    from lowering.targets.cuda.compile import compile_lowered

    rep = compile_lowered(lowered, sass=False)
    return {
        "ok": rep.ok,
        "registers": rep.registers,
        "spills": rep.spills,
        "local_bytes": rep.local_bytes,
        "shared_bytes": rep.shared_bytes,
        "has_hgmma": rep.instructions.get("HGMMA", 0) > 0,
        "instructions": rep.instructions,
        "warnings": [d.rule for d in rep.diagnostics if d.severity == "warning"],
        "errors": [d.message for d in rep.diagnostics if d.is_error],
    }


def lower_or_note(program, params: dict, record: dict):
    """Lower at `params`; where the cuda backend refuses them, at the program's defaults."""
    from lowering.entry import lower

    try:
        return lower(program, "cuda", params), params
    except KirError as err:
        record["refused_at_preset"] = [d.message for d in err.diagnostics]
        return lower(program, "cuda", {}), {}


# ---- the run ---------------------------------------------------------------------------------------


def main() -> int:  # noqa: C901 - one linear script
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-probes", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    import torch

    from kir.interp import run
    from lowering.targets.cuda.runtime import build_many, run_cuda
    from tests.examples.references import CASES

    record: dict = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "examples": {},
        "probes": {},
        "gemm": {},
    }
    print(f"device: {record['device']}, torch {torch.__version__}", flush=True)

    # 1. lower and build everything at once
    jobs = []  # (kind, name, program, params, lowered)
    for case in CASES:
        entry = record["examples"].setdefault(case.example, {})
        try:
            program = parse_file(ROOT / "examples" / f"{case.example}.kir")
            lowered, params = lower_or_note(program, case.params, entry)
            entry["params"] = {**program.params, **params}
            jobs.append(("example", case.example, program, params, lowered))
        except Exception as err:  # noqa: BLE001
            entry["error"] = f"lower: {type(err).__name__}: {err}"
    if not args.no_probes:
        from tests.lowering.test_cuda import PROGRAMS

        for name, text in PROGRAMS.items():
            entry = record["probes"].setdefault(name, {})
            try:
                program = parse(text, file=f"{name}.kir")
                jobs.append(("probe", name, program, {}, __import__("lowering").lower(program, "cuda")))
            except Exception as err:  # noqa: BLE001
                entry["error"] = f"lower: {type(err).__name__}: {err}"
    gemm_program = parse_file(ROOT / "examples" / "gemm_hopper_ws.kir")
    for k, params in enumerate(GEMM_VARIANTS):
        entry = record["gemm"].setdefault(f"variant{k}", {"params": {**gemm_program.params, **params}})
        try:
            jobs.append(
                (
                    "gemm",
                    f"variant{k}",
                    gemm_program,
                    params,
                    __import__("lowering").lower(gemm_program, "cuda", params),
                )
            )
        except Exception as err:  # noqa: BLE001
            entry["error"] = f"lower: {type(err).__name__}: {err}"

    t0 = time.monotonic()
    built = build_many([j[4] for j in jobs], jobs=16)
    with ThreadPoolExecutor(max_workers=16) as pool:
        infos = list(pool.map(lambda j: _safe(compile_info, j[4]), jobs))
    record["build_s"] = time.monotonic() - t0
    print(
        f"built {sum(not isinstance(b, Exception) for b in built)}/{len(jobs)} kernels in {record['build_s']:.1f} s",
        flush=True,
    )
    kernels = {}
    for (kind, name, *_), kernel, info in zip(jobs, built, infos, strict=True):
        entry = record[{"example": "examples", "probe": "probes", "gemm": "gemm"}[kind]][name]
        entry["compile"] = info
        if isinstance(kernel, Exception):
            entry["error"] = f"build: {type(kernel).__name__}: {kernel}"
            print(f"  {name}: BUILD FAILED {kernel}", flush=True)
        else:
            kernels[(kind, name)] = kernel
        print(f"  {kind} {name}: {info}", flush=True)

    # 2. correctness against the interpreter and the float64 reference
    cases = {c.example: c for c in CASES}
    for kind, name, program, params, lowered in jobs:
        if kind == "gemm" or (kind, name) not in kernels or time.monotonic() - started > BUDGET_S - 60:
            continue
        entry = record["examples" if kind == "example" else "probes"][name]
        try:
            rng = np.random.default_rng(0)
            if kind == "example":
                case = cases[name]
                inputs = case.make(rng)
                rtol, atol = case.rtol, case.atol
            else:
                inputs = probe_inputs(name, rng)
                rtol, atol = 1e-4, 1e-4
            got = run_cuda(program, dict(inputs), params)
            want = run(program, dict(inputs), params)
            entry["vs_interp"] = {}
            for arg in (a for a in lowered.args if a.out):
                # the GPU's transcendentals and its accumulation order differ from numpy's in the
                # last bits: a 16-bit result may round to the neighbouring value
                tol = 1e-2 if arg.dtype in ("bf16", "f16") else 1e-3
                entry["vs_interp"][arg.name] = compare(got[arg.name], want[arg.name], max(rtol, tol), max(atol, tol))
            if kind == "example":
                if case.check is not None:
                    case.check(inputs, got)
                    entry["vs_reference"] = {"ok": True}
                else:
                    entry["vs_reference"] = {
                        o: compare(got[o], w, rtol, atol) for o, w in case.reference(inputs).items()
                    }
            ok = all(v.get("ok", False) for v in entry["vs_interp"].values())
            entry["ok"] = ok
            print(
                f"  check {name}: {'ok' if ok else 'WRONG'} {entry['vs_interp']} {entry.get('vs_reference', '')}",
                flush=True,
            )
        except Exception as err:  # noqa: BLE001
            entry["ok"] = False
            entry["error"] = f"{type(err).__name__}: {err}"
            entry["traceback"] = traceback.format_exc()[-3000:]
            print(f"  check {name}: FAILED {entry['error']}", flush=True)

    # 3. the GEMM at 4096^3
    if not args.no_timing:
        gemm_timing(torch, record, kernels, started)

    record["seconds"] = time.monotonic() - started
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "cuda.json").write_text(json.dumps(record, indent=2, default=str))
        print(f"wrote {Path(out) / 'cuda.json'}")
    return 0


def gemm_timing(torch, record: dict, kernels: dict, started: float) -> None:
    flops = 2.0 * SIZE**3
    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    torch_ms = None
    try:
        torch_ms = statistics.median(time_ms(torch, lambda: torch.matmul(a, b, out=c)))
        record["torch_ms"] = torch_ms
        record["torch_tflops"] = flops / torch_ms / 1e9
        print(f"\ntorch.matmul {SIZE}^3 bf16: {torch_ms:.3f} ms, {record['torch_tflops']:.1f} TFLOP/s", flush=True)
    except Exception as err:  # noqa: BLE001
        record["torch_error"] = f"{type(err).__name__}: {err}"
    for name, entry in record["gemm"].items():
        kernel = kernels.get(("gemm", name))
        if kernel is None or time.monotonic() - started > BUDGET_S:
            continue
        print(f"== gemm {entry['params']}", flush=True)
        try:
            entry["checks"] = []
            for size in CHECK_SIZES:
                result = check_gemm(torch, kernel, size)
                entry["checks"].append(result)
                print(f"   check {size}^3: {'ok' if result['ok'] else 'WRONG'} {result}", flush=True)

            def launch(kernel=kernel):
                kernel.launch({"a": a, "b": b, "c": c}, {"M": SIZE, "N": SIZE, "K": SIZE})

            times = time_ms(torch, launch)
            ms = statistics.median(times)
            entry.update(
                ms=ms, tflops=flops / ms / 1e9, ratio_vs_torch=(torch_ms / ms) if torch_ms else None, min_ms=min(times)
            )
            ratio = f", {entry['ratio_vs_torch']:.2f}x torch.matmul" if torch_ms else ""
            print(f"   {SIZE}^3: {ms:.3f} ms, {entry['tflops']:.1f} TFLOP/s{ratio}", flush=True)
        except Exception as err:  # noqa: BLE001
            entry["error"] = f"{type(err).__name__}: {err}"
            entry["traceback"] = traceback.format_exc()[-3000:]
            print(f"   FAILED: {entry['error']}", flush=True)
    good = [v for v in record["gemm"].values() if v.get("tflops") and all(c["ok"] for c in v.get("checks", []))]
    if good:
        best = max(good, key=lambda v: v["tflops"])
        record["best"] = {k: best[k] for k in ("params", "ms", "tflops", "ratio_vs_torch")}
        ratio = f" ({best['ratio_vs_torch']:.2f}x torch.matmul)" if best["ratio_vs_torch"] else ""
        print(f"\nbest correct variant: {best['params']}: {best['tflops']:.1f} TFLOP/s{ratio}", flush=True)


def check_gemm(torch, kernel, size: int) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(size)
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.full((size, size), float("nan"), device="cuda", dtype=torch.bfloat16)  # poisoned
    kernel.launch({"a": a, "b": b, "c": c}, {"M": size, "N": size, "K": size})
    torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float())
    err = (c.float() - ref).abs()
    # bf16 output: up to 2^-9 relative from the rounding alone; allow 2^-7 of each element plus
    # a little of the largest for the accumulation order
    tol = ref.abs() * 2.0**-7 + ref.abs().max() * 2.0**-10
    bad = int((~(err <= tol)).sum().item())
    return {
        "size": size,
        "ok": bad == 0,
        "bad_elements": bad,
        "max_abs_err": float(err.nan_to_num(float("inf")).max().item()),
    }


def _safe(fn, *a):
    try:
        return fn(*a)
    except Exception as err:  # noqa: BLE001
        return {"error": f"{type(err).__name__}: {err}"}


if __name__ == "__main__":
    sys.exit(main())
