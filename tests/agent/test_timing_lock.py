"""One timing at a time per GPU: checkers that time on one device take its lock in turn (two
processes here, on a GPU named by hand: the lock is a file, the GPU is only its name), and on
the CPU the lock is no lock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.harness.timing import device_work, exclusive

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


WORK = """
import os, sys, time
from agent.harness.timing import device_work, exclusive
gpu, kind, after, mark, hold = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
while after != "-" and not os.path.exists(after):  # the process this one must ask after
    time.sleep(0.01)
time.sleep(1.0 if after != "-" else 0.0)  # that one is now waiting for, or holding, the lock
open(mark, "w").close()  # asking now
with (exclusive if kind == "time" else device_work)("cuda", gpu=gpu):
    print(time.monotonic(), flush=True)
    time.sleep(hold)
    print(time.monotonic(), flush=True)
"""


def _run(gpu: str, kind: str, mark: Path, hold: float, after: Path | None = None) -> subprocess.Popen:
    argv = [sys.executable, "-c", WORK, gpu, kind, str(after or "-"), str(mark), str(hold)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)


def _span(p: subprocess.Popen) -> tuple[float, float]:
    start, end = (float(x) for x in p.communicate(timeout=60)[0].split())
    return start, end


def test_checkers_work_on_the_device_side_by_side(tmp_path):
    gpu = f"GPU-work-{time.monotonic_ns()}"
    a = _run(gpu, "work", tmp_path / "a", 2.5)
    b = _run(gpu, "work", tmp_path / "b", 1.5, after=tmp_path / "a")
    (a0, a1), (b0, b1) = _span(a), _span(b)
    assert b0 < a1 and a0 < b1


def test_a_timing_waits_for_the_work_running_and_goes_before_the_work_that_comes_after_it(tmp_path):
    # work A runs; a timing asks while it does; work B asks while the timing waits: the timing
    # starts once A is done, and B only once the timing is done (a timed loop never shares the
    # GPU with another process's kernels, and a stream of checks cannot keep it waiting)
    gpu = f"GPU-order-{time.monotonic_ns()}"
    a = _run(gpu, "work", tmp_path / "a", 3.5)
    t = _run(gpu, "time", tmp_path / "t", 1.0, after=tmp_path / "a")
    b = _run(gpu, "work", tmp_path / "b", 0.5, after=tmp_path / "t")
    (_, a1), (t0, t1), (b0, _) = _span(a), _span(t), _span(b)
    assert t0 >= a1
    assert b0 >= t1


def test_in_one_process_work_inside_a_timing_is_no_second_lock_and_a_timing_inside_work_is_refused():
    gpu = f"GPU-nest-{time.monotonic_ns()}"
    with exclusive("cuda", gpu=gpu), device_work("cuda", gpu=gpu):
        pass  # the timing holds the device already
    with device_work("cuda", gpu=gpu), pytest.raises(RuntimeError, match="wait on itself"):
        with exclusive("cuda", gpu=gpu):
            pass
    with device_work("cpu"), exclusive("cpu"):
        pass  # the CPU has no lock
