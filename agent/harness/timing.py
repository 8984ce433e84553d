"""The timing protocol (GPU): what a reported time means.

- Device events around the kernel alone (the launch, nothing before or after it).
- Warm-up runs first (compilation, caches, clocks), then many timed runs; the median is the
  figure (and the min and the spread are kept).
- L2 is flushed before every timed run by writing a buffer larger than L2, outside the events,
  so that no run reads what the previous one left in cache.
- Several input sets are rotated (one per run), so no run sees the previous run's inputs.
- The peers (PyTorch eager, torch.compile) are timed the same way in the same process and run,
  so every figure is a ratio of times measured side by side.
- Ceilings measured in the same run: a large device-to-device copy (bytes read + written per
  second) and a large bf16 matmul (flop/s). The floor of a task is max(bytes / copy rate,
  flops / matmul rate); a time below a tenth of the floor is implausible and flagged.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FLUSH_BYTES = 256 << 20  # H100/H200 L2 is 50 MB; 256 MB evicts it whatever the policy


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int

    def to_json(self) -> dict:
        return {"median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms, "runs": self.runs}


class Timer:
    def __init__(self, device: str = "cuda", flush_bytes: int = FLUSH_BYTES):
        import torch

        self.torch = torch
        self.device = device
        self.flush_buffer = torch.empty(flush_bytes, dtype=torch.uint8, device=device)

    def flush(self) -> None:
        self.flush_buffer.zero_()

    def time(
        self,
        fns: Sequence[Callable[[], object]],
        *,
        warmup: int = 5,
        runs: int = 50,
        min_runs: int = 10,
        budget_s: float = 2.0,
    ) -> Timing:
        """Time `fns[i % len(fns)]` (one function per input set) for up to `runs` runs or about
        `budget_s` seconds of measured time, whichever comes first (never fewer than
        `min_runs`)."""
        torch = self.torch
        for i in range(warmup):
            fns[i % len(fns)]()
        torch.cuda.synchronize()
        times: list[float] = []
        spent = 0.0
        for i in range(runs):
            self.flush()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fns[i % len(fns)]()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
            times.append(ms)
            spent += ms / 1e3
            if i + 1 >= min_runs and spent > budget_s:
                break
        return Timing(statistics.median(times), min(times), max(times), len(times))


def measure_ceilings(timer: Timer) -> dict[str, float]:
    """Copy rate (GB/s, bytes read + written) and bf16 matmul rate (TFLOP/s), measured now."""
    torch = timer.torch
    n = 1 << 30  # 1 GiB each way
    src = torch.empty(n, dtype=torch.uint8, device=timer.device).random_(0, 255)
    dst = torch.empty_like(src)
    copy = timer.time([lambda: dst.copy_(src)], warmup=3, runs=20)
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device=timer.device)
    b = torch.randn(m, m, dtype=torch.bfloat16, device=timer.device)
    mm = timer.time([lambda: a @ b], warmup=3, runs=20)
    return {
        "copy_gbps": 2 * n / (copy.median_ms * 1e-3) / 1e9,
        "bf16_tflops": 2 * m**3 / (mm.median_ms * 1e-3) / 1e12,
    }


def floor_ms(nbytes: float, flops: float, ceilings: dict[str, float]) -> float:
    return max(nbytes / (ceilings["copy_gbps"] * 1e9), flops / (ceilings["bf16_tflops"] * 1e12)) * 1e3
