"""What the timer's drain (device time left after the timed stream's end event) reads for an
on-stream call, a side stream joined back, a side stream left running (the cheat) and a tiny
call, alone and while another process spins the GPU. The side-stream limit of the checker
(agent/harness/worker.py, SIDE_STREAM_MS) rests on these figures.

    PYTHONPATH=. python3 benchmarks/drain_probe.py        (on a CUDA GPU)
"""

from __future__ import annotations

import subprocess
import sys
import time

import torch

from agent.harness.timing import Timer

SPIN = 4_000_000  # cycles of torch.cuda._sleep: about 2 ms on an H200


def main() -> None:
    x = torch.randn(4, 16, device="cuda")
    w = torch.randn(16, device="cuda")
    side = torch.cuda.Stream()

    def on_stream():
        torch.cuda._sleep(SPIN)
        return x * w

    def on_side(join: bool):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(SPIN)
            y = x * w
        if join:
            torch.cuda.current_stream().wait_stream(side)
        return y

    calls = {"on": on_stream, "joined": lambda: on_side(True), "cheat": lambda: on_side(False), "tiny": lambda: x * w}
    spin = f"import torch\nwhile True:\n    torch.cuda._sleep({SPIN}); torch.cuda.synchronize()"
    for label in ("alone", "with a spinner"):
        spinner = subprocess.Popen([sys.executable, "-c", spin]) if label != "alone" else None
        if spinner:
            time.sleep(8)
        for name, fn in calls.items():
            timing = Timer("cuda").time([fn], warmup=2, runs=10, min_runs=10)
            drains = " ".join(f"{d:.3f}" for d in timing.drains)
            print(f"{label} {name} event ms median {timing.median_ms:.3f} drain ms {drains}", flush=True)
        if spinner:
            spinner.kill()


if __name__ == "__main__":
    main()
