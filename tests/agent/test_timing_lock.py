"""One timing at a time per GPU: checkers that time on one device take its lock in turn (two
processes here, on a GPU named by hand: the lock is a file, the GPU is only its name), and on
the CPU the lock is no lock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from agent.harness.timing import exclusive

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from agent.harness.timing import exclusive
with exclusive("cuda", gpu=sys.argv[1]):
    print(time.monotonic(), flush=True)
    time.sleep(1.0)
    print(time.monotonic(), flush=True)
"""


def _hold(gpu: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLD, gpu], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _spans(*procs: subprocess.Popen) -> list[tuple[float, float]]:
    out = []
    for p in procs:
        start, end = (float(x) for x in p.communicate(timeout=60)[0].split())
        out.append((start, end))
    return sorted(out)


def test_two_timings_on_one_gpu_take_turns():
    gpu = f"GPU-test-{time.monotonic_ns()}"
    (a0, a1), (b0, b1) = _spans(_hold(gpu), _hold(gpu))
    assert b0 >= a1  # the second started timing only once the first had finished


def test_timings_on_two_gpus_overlap():
    stamp = time.monotonic_ns()
    (a0, a1), (b0, b1) = _spans(_hold(f"GPU-a-{stamp}"), _hold(f"GPU-b-{stamp}"))
    assert b0 < a1


def test_on_the_cpu_there_is_no_lock():
    with exclusive("cpu"), exclusive("cpu"):
        pass


SHARE = """
import sys, time
from agent.harness.timing import device_share
with device_share("cuda", shares=2, gpu=sys.argv[1]):
    print(time.monotonic(), flush=True)
    time.sleep(2.0)
    print(time.monotonic(), flush=True)
"""


def test_a_gpu_holds_as_many_checks_as_it_has_shares():
    # three checks for a device of two shares: two at once, the third once one of them is done
    gpu = f"GPU-share-{time.monotonic_ns()}"
    procs = [
        subprocess.Popen([sys.executable, "-c", SHARE, gpu], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    (a0, a1), (b0, b1), (c0, c1) = _spans(*procs)
    assert b0 < a1  # two side by side
    assert c0 >= min(a1, b1)  # the third waited for a place
