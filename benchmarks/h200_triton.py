"""The Triton backend on a GPU: every tile-level example, checked and timed.

For each example of `examples/` that the Triton backend takes (tile level):

1. **test preset**: lower with the preset of `tests/examples/references.py`, run on CUDA
   tensors, and compare every output with the reference interpreter (`kir.interp.run`) within
   the case's tolerance (integers exactly; k-means by the case's own check);
2. **bench shape**: a larger, benchmark-like problem: run once and compare with a PyTorch
   reference on the GPU, then time the kernel and the PyTorch eager reference with CUDA events
   (median of 50 launches after 10 warm-up launches, the L2 cache flushed before each), and
   report the achieved bandwidth (or FLOP rate for the GEMM);
3. the sm_90 compile report of the bench configuration (registers, spills, shared memory,
   mma/wgmma), compiled offline as `lowering.targets.triton.compile` does.

Prints a table, and writes the records as JSON to `$OUT/triton.json` when `OUT` is set.

    PYTHONPATH=. python3 benchmarks/h200_triton.py [EXAMPLE ...]

The machine's image has torch, triton and numpy but not xdsl and lark: carry their wheels
(xdsl 0.75.0 with immutabledict and ordered-set, lark 1.3.1) and put them on PYTHONPATH first,
as the device notes say. Runs in about a minute on an H200.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - the script needs the GPU machine's torch
    sys.exit("needs torch with CUDA")

from kir.interp import run  # noqa: E402
from kir.parser import parse_file  # noqa: E402
from lowering import lower  # noqa: E402
from lowering.emit.base import program_level  # noqa: E402
from lowering.targets.triton.compile import compile_lowered  # noqa: E402
from lowering.targets.triton.runtime import run_lowered, torch_launcher  # noqa: E402
from tests.examples.references import CASES  # noqa: E402

WARMUP, REPS = 10, 50
DEV = "cuda"


@dataclass
class Bench:
    """A benchmark-like problem for one example: parameters, GPU inputs (outputs allocated
    too), the PyTorch reference of the outputs, a check, and the work done (bytes or flops)."""

    params: dict[str, int]
    make: Callable[[torch.Generator], dict[str, torch.Tensor]]
    reference: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]
    bytes_moved: Callable[[dict[str, torch.Tensor]], float]
    flops: Callable[[dict[str, torch.Tensor]], float] | None = None
    rtol: float = 1e-5
    atol: float = 1e-5
    check: Callable[[dict[str, torch.Tensor], dict[str, torch.Tensor]], str | None] | None = None
    outputs: tuple[str, ...] = field(default_factory=tuple)


def _randn(g, shape, dtype=torch.float32):
    x = torch.randn(shape, generator=g, device=DEV, dtype=torch.float32)
    x = torch.where(x.abs() < 1e-3, torch.full_like(x, 1e-3), x)
    return x.to(dtype)


def _nbytes(*ts: torch.Tensor) -> float:
    return float(sum(t.numel() * t.element_size() for t in ts))


def _vector_add(g):
    n = 1 << 26
    return {"x": _randn(g, n), "y": _randn(g, n), "z": torch.empty(n, device=DEV)}


def _rows(g, m, n, with_b=True):
    t = {
        "x": _randn(g, (m, n), torch.bfloat16),
        "w": _randn(g, n, torch.bfloat16),
        "y": torch.empty((m, n), device=DEV, dtype=torch.bfloat16),
    }
    if with_b:
        t["b"] = _randn(g, n, torch.bfloat16)
    return t


def _gemm(g):
    m = n = k = 4096
    return {
        "a": _randn(g, (m, k), torch.bfloat16) * 0.1,
        "b": _randn(g, (k, n), torch.bfloat16) * 0.1,
        "bias": _randn(g, n, torch.bfloat16),
        "c": torch.empty((m, n), device=DEV, dtype=torch.bfloat16),
    }


def _kmeans(g):
    p, c, d = 1 << 16, 256, 64
    return {"x": _randn(g, (p, d)), "cent": _randn(g, (c, d)), "assign": torch.empty(p, device=DEV, dtype=torch.int32)}


def _kmeans_check(t, out) -> str | None:
    x, c = t["x"].double(), t["cent"].double()
    d = (x * x).sum(1, keepdim=True) + (c * c).sum(1)[None, :] - 2.0 * x @ c.T
    got = out["assign"].long()
    if got.min() < 0 or got.max() >= c.shape[0]:
        return "index out of range"
    chosen = d.gather(1, got[:, None])[:, 0]
    worst = (chosen - d.min(1).values).abs().max().item()
    return (
        None
        if worst <= 1e-3 * (1.0 + d.abs().max().item())
        else f"chosen centroid is {worst:.3g} farther than the best"
    )


def _bucketize(g):
    n, b = 1 << 24, 1024
    bounds = torch.sort(_randn(g, b)).values
    x = _randn(g, n)
    x[: 1 << 16] = bounds[torch.randint(0, b, (1 << 16,), generator=g, device=DEV)]  # on a boundary
    return {"x": x, "bounds": bounds, "out": torch.empty(n, device=DEV, dtype=torch.int32)}


def _bag(g):
    r, d, nb, bag = 1 << 17, 128, 1 << 15, 32
    return {
        "table": _randn(g, (r, d), torch.bfloat16),
        "idx": torch.randint(0, r, (nb, bag), generator=g, device=DEV, dtype=torch.int64),
        "out": torch.empty((nb, d), device=DEV, dtype=torch.bfloat16),
    }


def _layer_norm(t):
    y = F.layer_norm(t["x"].float(), (t["x"].shape[1],), t["w"].float(), t["b"].float(), eps=1e-5)
    return {"y": y.to(torch.bfloat16)}


def _rms_norm(t):
    x = t["x"].float()
    return {"y": (x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * t["w"].float()).to(torch.bfloat16)}


BENCH = {
    "vector_add": Bench(
        {"BLOCK": 1024},
        _vector_add,
        lambda t: {"z": t["x"] + t["y"]},
        lambda t: _nbytes(t["x"], t["y"], t["z"]),
    ),
    "softmax": Bench(
        {"BLOCK": 4096},
        lambda g: {
            "x": _randn(g, (8192, 4096), torch.bfloat16),
            "y": torch.empty((8192, 4096), device=DEV, dtype=torch.bfloat16),
        },
        lambda t: {"y": torch.softmax(t["x"].float(), dim=1).to(torch.bfloat16)},
        lambda t: 2 * _nbytes(t["x"]),
        rtol=1e-2,
        atol=1e-2,
    ),
    "layernorm": Bench(
        {"BLOCK": 4096},
        lambda g: _rows(g, 8192, 4096),
        _layer_norm,
        lambda t: 2 * _nbytes(t["x"]),
        rtol=2e-2,
        atol=2e-2,
    ),
    "rmsnorm": Bench(
        {"BLOCK": 4096},
        lambda g: _rows(g, 8192, 4096, with_b=False),
        _rms_norm,
        lambda t: 2 * _nbytes(t["x"]),
        rtol=2e-2,
        atol=2e-2,
    ),
    "gemm_bias_gelu": Bench(
        {"BM": 128, "BN": 64, "BK": 64},
        _gemm,
        lambda t: {"c": F.gelu(torch.addmm(t["bias"], t["a"], t["b"]).float()).to(torch.bfloat16)},
        lambda t: _nbytes(t["a"], t["b"], t["c"]),
        flops=lambda t: 2.0 * t["a"].shape[0] * t["a"].shape[1] * t["b"].shape[1],
        rtol=3e-2,
        atol=3e-2,
    ),
    "kmeans_assign": Bench(
        {"BP": 64, "BC": 64, "BD": 64},
        _kmeans,
        lambda t: {"assign": ((t["cent"] * t["cent"]).sum(1)[None, :] - 2.0 * t["x"] @ t["cent"].T).argmin(1).int()},
        lambda t: _nbytes(t["x"], t["assign"]),
        flops=lambda t: 2.0 * t["x"].shape[0] * t["x"].shape[1] * t["cent"].shape[0],
        check=_kmeans_check,
    ),
    "bucketize": Bench(
        {"BLOCK": 1024, "STEPS": 11},
        _bucketize,
        lambda t: {"out": torch.bucketize(t["x"], t["bounds"], right=False).int()},
        lambda t: _nbytes(t["x"], t["out"]),
    ),
    "embedding_bag": Bench(
        {"BL": 32, "BD": 128},
        _bag,
        lambda t: {"out": F.embedding_bag(t["idx"], t["table"].float(), mode="sum").to(torch.bfloat16)},
        lambda t: _nbytes(t["out"]) + t["idx"].numel() * (8 + t["table"].shape[1] * 2),
        rtol=2e-2,
        atol=5e-2,
    ),
}


def _time(fn: Callable[[], object]) -> float:
    """Median milliseconds of REPS calls after WARMUP, each timed with CUDA events, with the L2
    cache flushed before each (not timed)."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device=DEV)
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPS):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def _compare(
    want: np.ndarray | torch.Tensor, got: np.ndarray | torch.Tensor, rtol: float, atol: float
) -> tuple[bool, float]:
    w = torch.as_tensor(np.asarray(want).astype(np.float64)) if isinstance(want, np.ndarray) else want.double().cpu()
    g = torch.as_tensor(np.asarray(got).astype(np.float64)) if isinstance(got, np.ndarray) else got.double().cpu()
    if w.numel() == 0:
        return True, 0.0
    nan = torch.isnan(w) | torch.isnan(g)
    err = (w - g).abs().masked_fill(nan, 0.0)
    ok = bool(((err <= atol + rtol * w.abs().masked_fill(nan, 0.0)) & ~(torch.isnan(w) ^ torch.isnan(g))).all())
    return ok, float(err.max())


def preset(case) -> dict:
    program = parse_file(ROOT / "examples" / f"{case.example}.kir")
    lowered = lower(program, "triton", case.params)
    inputs = case.make(np.random.default_rng(0))
    want = run(program, inputs, case.params)
    got = run_lowered(lowered, inputs, interpret=False)
    record = {"params": case.params, "ok": True, "max_abs_err": {}}
    if case.check is not None:
        try:
            case.check(inputs, got)
        except AssertionError as err:
            record["ok"] = False
            record["error"] = str(err)[:300]
    for name in want:
        if case.check is not None and name not in inputs:
            continue
        if want[name].dtype.kind in "iub":
            ok, err = bool(np.array_equal(want[name], got[name])), float(np.count_nonzero(want[name] != got[name]))
        else:
            ok, err = _compare(want[name], got[name], case.rtol, case.atol)
        record["max_abs_err"][name] = err
        record["ok"] &= ok
    return record


def bench(name: str, spec: Bench) -> dict:
    program = parse_file(ROOT / "examples" / f"{name}.kir")
    lowered = lower(program, "triton", spec.params)
    g = torch.Generator(device=DEV)
    g.manual_seed(0)
    tensors = spec.make(g)
    launch = torch_launcher(lowered, tensors)
    launch()
    torch.cuda.synchronize()
    want = spec.reference(tensors)
    record: dict = {
        "params": spec.params,
        "shapes": {k: list(v.shape) for k, v in tensors.items()},
        "ok": True,
        "max_abs_err": {},
    }
    if spec.check is not None:
        problem = spec.check(tensors, tensors)
        record["ok"] = problem is None
        if problem:
            record["error"] = problem
        agree = (want["assign"] == tensors["assign"]).float().mean().item()
        record["agreement_with_torch"] = agree
    else:
        for out, value in want.items():
            if value.dtype in (torch.int32, torch.int64, torch.bool):
                ok = bool(torch.equal(value, tensors[out]))
                err = float((value != tensors[out]).sum())
            else:
                ok, err = _compare(value, tensors[out], spec.rtol, spec.atol)
            record["max_abs_err"][out] = err
            record["ok"] &= ok
    ms = _time(launch)
    torch_ms = _time(lambda: spec.reference(tensors))
    record.update(triton_ms=ms, torch_ms=torch_ms, speedup=torch_ms / ms)
    record["GB_per_s"] = spec.bytes_moved(tensors) / (ms * 1e-3) / 1e9
    if spec.flops is not None:
        record["TFLOP_per_s"] = spec.flops(tensors) / (ms * 1e-3) / 1e12
    report = compile_lowered(lowered, "sm_90")
    record["compile"] = {
        k: getattr(report, k) for k in ("ok", "registers", "spills", "shared_bytes", "local_bytes", "instructions")
    }
    return record


def main(argv: list[str]) -> int:
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    import triton

    started = time.time()
    names = argv or [c.example for c in CASES]
    records = []
    for case in CASES:
        if case.example not in names:
            continue
        program = parse_file(ROOT / "examples" / f"{case.example}.kir")
        if program_level(program) != "tile":
            records.append({"example": case.example, "skipped": "explicit level: not a Triton program"})
            continue
        rec: dict = {"example": case.example}
        for part, fn in (
            ("preset", lambda c=case: preset(c)),
            ("bench", lambda c=case: bench(c.example, BENCH[c.example])),
        ):
            try:
                rec[part] = fn()
            except Exception as err:  # noqa: BLE001 - one failing example does not stop the others
                rec[part] = {
                    "ok": False,
                    "error": f"{type(err).__name__}: {err}"[:2000],
                    "traceback": traceback.format_exc()[-3000:],
                }
        records.append(rec)
        print(_row(rec), flush=True)
    summary = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "seconds": round(time.time() - started, 1),
        "all_ok": all(r.get("preset", {}).get("ok", True) and r.get("bench", {}).get("ok", True) for r in records),
        "records": records,
    }
    print(
        f"\n{summary['device']}, torch {summary['torch']}, triton {summary['triton']}: "
        f"{'all correct' if summary['all_ok'] else 'FAILURES'} in {summary['seconds']} s"
    )
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / "triton.json"
        path.write_text(json.dumps(summary, indent=2, default=str))
        print(f"wrote {path}")
    return 0 if summary["all_ok"] else 1


def _row(rec: dict) -> str:
    if "skipped" in rec:
        return f"{rec['example']:<16} skipped ({rec['skipped']})"
    p, b = rec.get("preset", {}), rec.get("bench", {})
    state = f"preset {'ok' if p.get('ok') else 'FAIL'}  bench {'ok' if b.get('ok') else 'FAIL'}"
    if "triton_ms" not in b:
        return f"{rec['example']:<16} {state}  {p.get('error', '')}{b.get('error', '')}"[:400]
    rate = f"{b['TFLOP_per_s']:7.1f} TFLOP/s" if "TFLOP_per_s" in b else f"{b['GB_per_s']:7.0f} GB/s"
    c = b.get("compile", {})
    return (
        f"{rec['example']:<16} {state}  triton {b['triton_ms']:8.3f} ms  torch {b['torch_ms']:8.3f} ms  "
        f"x{b['speedup']:5.2f}  {rate}  regs {c.get('registers')} spills {c.get('spills')} smem {c.get('shared_bytes')}"
        + (
            "  wgmma"
            if c.get("instructions", {}).get("wgmma")
            else "  mma"
            if c.get("instructions", {}).get("mma")
            else ""
        )
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
