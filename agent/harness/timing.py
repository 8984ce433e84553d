"""The timing protocol: what a reported time means.

- Device events around the kernel alone (the launch, nothing before or after it); on the CPU
  (the CPU backends, and CI) the clock is `time.perf_counter` around the call.
- The clock's functions are taken when `capture()` runs: in a candidate's process that is
  before the candidate's code is imported, so a candidate that patches
  `torch.cuda.Event.elapsed_time`, `record` or `time.perf_counter` at import changes names the
  timer no longer reads. (Its process is its own: what it does with ctypes is out of reach,
  which is why the checker also holds the times against its own clock, see
  `correctness.time_candidate`.)
- Work left on other streams is measured: after the timed stream's end event, the whole device
  is synchronized and the time that takes is kept per run (`drains`). An honest candidate's
  work is on the timed stream, or joined to it (`wait_stream`), so the drain is the few
  microseconds of a synchronize; a candidate that launches its work on a side stream and
  returns is timed doing nothing by the events, and the drain shows the work it left behind
  (the checker refuses it: `harness.side-stream`).
- Warm-up runs first (compilation, caches, clocks), then many timed runs; the median is the
  figure (and the min and the spread are kept).
- L2 is flushed before every timed run by writing a buffer larger than L2, outside the events,
  so that no run reads what the previous one left in cache.
- Several input sets are rotated (one per run), so no run sees the previous run's inputs; the
  last run of each set is made on inputs it has not seen (`before_last` writes fresh values into
  the set's own tensors) through the same calls as every other run, and its outputs are kept
  (`keep`) for the checker to compare: a candidate that computes only when it is being checked,
  or caches per instance or per tensor, is timed and found wrong.
- The peers (PyTorch eager, torch.compile) are timed the same way in the same run (in the
  checker's process), so every figure is a ratio of times measured side by side.
- One timing at a time per GPU: the checker holds the device's lock (`exclusive`, a file lock
  named after the GPU's UUID) around each timed loop (a candidate's, once its input sets are
  in its process; the peers'), so that evaluations run side by side (a search's pool, several
  searches on one machine) check, compile and move data in parallel but never share the device
  while a timed loop runs: their own work on the device (`device_work`) holds the same lock
  shared, and a timing that waits for it goes before work that asks after it.
- Ceilings measured in the same run: a large device-to-device copy (bytes read + written per
  second) and a large bf16 matmul (flop/s). The floor of a task is max(bytes / copy rate,
  flops / matmul rate); a time below a tenth of the floor is implausible and flagged.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

FLUSH_BYTES = 256 << 20  # H100/H200 L2 is 50 MB; 256 MB evicts it whatever the policy

_perf_counter = time.perf_counter  # taken at import, before any candidate code runs here
_CLOCK: dict[str, Any] = {}


_HELD = {"exclusive": 0, "work": 0}  # this process's holds of its GPU's lock


@contextlib.contextmanager
def exclusive(device: str, gpu: str | None = None) -> Iterator[None]:
    """The device to this process while the block runs: on a CUDA device, an exclusive lock on
    a file named after the GPU's UUID (`gpu`, default the one this process sees as its current
    device), taken by every checker on this machine before it times; on the CPU nothing (its
    timings are CI's). The lock lives in a folder only this user can enter: a candidate (another
    uid) cannot take it and stall the others.

    The checkers' other work on the device (`device_work`: inputs made, references run,
    outputs compared, data sent to a candidate) holds the same lock shared, so a timed loop
    runs with the GPU to itself: a time slice of another process's kernels inside a timed run
    doubled conv1d's time on an H200 shared by 14 searches. A timing that waits goes first:
    it takes the lock's gate, which new work must pass, and the work already running finishes."""
    if not device.startswith("cuda") or _HELD["exclusive"]:
        yield
        return
    if _HELD["work"]:
        raise RuntimeError("a timing asked for the GPU inside this process's own device work: it would wait on itself")
    with _held(gpu, "exclusive"):
        yield


@contextlib.contextmanager
def device_work(device: str, gpu: str | None = None) -> Iterator[None]:
    """The device shared with other checkers' work, never with a timed loop, while the block
    runs (see `exclusive`); on the CPU, inside this process's own timing, or inside work it
    holds already, nothing more."""
    if not device.startswith("cuda") or _HELD["exclusive"] or _HELD["work"]:
        _HELD["work"] += 1
        try:
            yield
        finally:
            _HELD["work"] -= 1
        return
    with _held(gpu, "work"):
        yield


@contextlib.contextmanager
def _held(gpu: str | None, kind: str) -> Iterator[None]:
    """The GPU's lock, exclusive for a timing and shared for work, taken through its gate: a
    timing holds the gate while it waits, so new work queues behind it; work only passes it.
    Both are released when the files close, or when the process dies."""
    gate = os.open(_lock_path(gpu, "gate"), os.O_RDWR | os.O_CREAT, 0o600)
    fd = os.open(_lock_path(gpu, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    taken = False
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if kind == "work":
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(fd, fcntl.LOCK_EX if kind == "exclusive" else fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        _HELD[kind] += 1
        taken = True
        yield
    finally:
        if taken:
            _HELD[kind] -= 1
        os.close(fd)
        os.close(gate)


def _lock_path(gpu: str | None, name: str) -> str:
    """A lock file of the GPU (`gpu`, default this process's current device) in a folder only
    this user can enter."""
    if gpu is None:
        import torch

        gpu = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", "0"))
    folder = os.path.join(tempfile.gettempdir(), f"kir-timing-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{gpu}.{name}")


# How many checks hold a GPU's memory at once (their inputs, references, candidates' copies):
# a search's pools and several searches on one machine share the device. At the suite's bench
# shapes one check holds up to 26 GB (knn_topk's reference distances); 14 searches of two
# workers each ran the H200 out of memory.
GPU_SHARES = 4


@contextlib.contextmanager
def device_share(device: str, shares: int | None = None, gpu: str | None = None) -> Iterator[None]:
    """One of `shares` places on a CUDA device (default `KIR_GPU_SHARES`, else `GPU_SHARES`) held
    while the block runs: a lock file of `shares` taken without waiting, tried in turn until one
    is free; on the CPU nothing. Like `exclusive`'s, the files are out of the candidates' reach."""
    if not device.startswith("cuda"):
        yield
        return
    count = max(1, shares or int(os.environ.get("KIR_GPU_SHARES", GPU_SHARES)))
    fds = [os.open(_lock_path(gpu, f"share{i}.lock"), os.O_RDWR | os.O_CREAT, 0o600) for i in range(count)]
    try:
        wait = 0.01
        while not any(_try_lock(fd) for fd in fds):
            time.sleep(wait)
            wait = min(wait * 2, 0.2)
        yield
    finally:
        for fd in fds:
            os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def capture() -> None:
    """Take the CUDA event functions now (the candidate's process calls this before importing
    the candidate): the C methods themselves, so that a later patch of the Python class or of
    its base changes nothing the timer calls."""
    if _CLOCK:
        return
    import torch

    base = torch.cuda.Event.__mro__[1]  # the C event type (torch._C._CudaEventBase on a CUDA build)
    _CLOCK.update(
        base=base,
        new=base.__new__,
        record=getattr(base, "record", None),
        elapsed=getattr(base, "elapsed_time", None),
        wait=getattr(base, "synchronize", None),
        stream=torch.cuda.current_stream,
        synchronize=torch.cuda.synchronize,
    )


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    runs: int
    times: tuple[float, ...] = field(default=(), repr=False)
    drains: tuple[float, ...] = field(default=(), repr=False)  # ms of device work after each run's end event

    def to_json(self) -> dict:
        return {"median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms, "runs": self.runs}

    @staticmethod
    def of(times: Sequence[float], drains: Sequence[float] = ()) -> Timing:
        return Timing(statistics.median(times), min(times), max(times), len(times), tuple(times), tuple(drains))


class Timer:
    def __init__(self, device: str = "cuda", flush_bytes: int | None = None):
        import torch

        capture()
        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        if flush_bytes is None:
            flush_bytes = FLUSH_BYTES if self.cuda else 0
        self.flush_buffer = torch.empty(flush_bytes, dtype=torch.uint8, device=device) if flush_bytes else None
        self.drains: list[float] = []  # per timed run on a GPU: ms until the device was idle after the end event

    def flush(self) -> None:
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def synchronize(self) -> None:
        if self.cuda:
            _CLOCK["synchronize"]()

    def _event(self):
        event = _CLOCK["new"](_CLOCK["base"], enable_timing=True)
        return event

    def _one(self, fn: Callable[[], object]) -> tuple[float, object]:
        """One timed call: (milliseconds, what it returned). Every run, the last ones included,
        goes through here, so a candidate cannot tell them apart by the stack."""
        self.flush()
        if self.cuda:
            start, end = self._event(), self._event()
            _CLOCK["record"](start, _CLOCK["stream"]())
            value = fn()
            _CLOCK["record"](end, _CLOCK["stream"]())
            _CLOCK["wait"](end)
            t0 = _perf_counter()
            _CLOCK["synchronize"]()  # what other streams still run was left out of the events
            self.drains.append((_perf_counter() - t0) * 1e3)
            return _CLOCK["elapsed"](start, end), value
        t0 = _perf_counter()
        value = fn()
        return (_perf_counter() - t0) * 1e3, value

    def warm(self, fns: Sequence[Callable[[], object]], warmup: int) -> None:
        for i in range(warmup):
            fns[i % len(fns)]()
        self.synchronize()

    def time(
        self,
        fns: Sequence[Callable[[], object]],
        *,
        warmup: int = 5,
        runs: int = 50,
        min_runs: int = 10,
        budget_s: float = 2.0,
        before_last: Callable[[int], None] | None = None,
        keep: Callable[[int, object], None] | None = None,
    ) -> Timing:
        """Time `fns[i % len(fns)]` (one function per input set) for up to `runs` runs or about
        `budget_s` seconds of measured time, whichever comes first (never fewer than
        `min_runs`); then, with `before_last`, one more run of each set after `before_last(k)`
        has refreshed its inputs, handing what it returned to `keep(k, value)`."""
        self.warm(fns, warmup)
        self.drains = []
        times: list[float] = []
        spent = 0.0
        for i in range(runs):
            ms, _ = self._one(fns[i % len(fns)])
            times.append(ms)
            spent += ms / 1e3
            if i + 1 >= min_runs and spent > budget_s:
                break
        if before_last is not None:
            for k, fn in enumerate(fns):
                before_last(k)
                ms, value = self._one(fn)
                times.append(ms)
                self.synchronize()  # work left on other streams is finished before it is kept
                if keep is not None:
                    keep(k, value)
        return Timing.of(times, self.drains)


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
