"""The checker: the child process of `agent.harness.isolate` that evaluates one job and writes
one record on a private pipe.

A job is plain JSON:

    {"task": "benchmarks/tasks/softmax",          # a task folder (or a KernelBench .py file)
     "candidate": {"kind": "kir", "file": "benchmarks/tasks/softmax/tuned.kir",   # or "text"
                   "backend": "triton", "params": {"BLOCK": 8192}},
     # or {"kind": "python", "file": "solution.py"}: a KernelBench solution defining ModelNew
     "preset": "bench", "device": "cuda",
     "seeds": null, "rounds": 3,                  # null: fresh seeds
     "vary": true,                                # one more round on other shapes (task.toml's vary)
     "verify": true,                              # run the KIR verifier first
     "check": true,                               # run the correctness protocol
     "warm": false,                               # run torch.compile once (fills its caches)
     "memory_mb": null,                           # the candidate's host memory (default: half the RAM, CPU only)
     "device_memory_fraction": 0.75,              # the candidate's share of the GPU's memory
     "time": {"sets": 3, "runs": 50, "peers": ["eager", "compile"]}}   # or null: no timing

Two other kinds of job: `{"kind": "ceilings", "device": "cuda"}` measures the copy and bf16
matmul rates and reports the GPU and versions; `{"kind": "time", "task": ..., "candidates":
[candidate, ...], "time": {...}}` times several already-checked candidates of one task and the
peers side by side (`time_task`).

The checker holds the task, its reference, the inputs' pristine copies and the verdict. The
candidate runs in a process of its own (`sandbox.CandidateProcess`), started first so that its
start overlaps the checker's work, and is sent only copies of inputs; the reference is computed
before the candidate runs. Its stdout is read with a cap and never parsed: a line that looks
like a record there is a forgery (`harness.forged-record`).

The record (see isolate.py) says how far the candidate got: `stage` is the first stage that
stopped it ("task", "parse", "verify", "load", "lower", "run", "correctness", "timing",
"timeout", "crash", "integrity") or "done"; `metrics` holds the correctness figures, the
containment that was enforced (`containment`), the varied shape, and, when timed, `ms`,
`eager_ms`, `compile_ms`, the bytes and flops of the instance and the timing details.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from agent import pipeline
from agent.harness.timing import device_share, device_work
from kir.diagnostics import Diagnostic, KirError
from lowering.targets import runtimes

DEFAULT_TIMEOUT = 300.0
CHECKER_THREADS = 2  # a CUDA job's host threads for torch
DEVICE_FRACTION = 0.75  # the checker keeps the reference, inputs and peers on the same GPU
_live: list = []  # candidate processes, killed if the checker is told to stop


def _record(ok: bool, stage: str, diagnostics: list[Diagnostic] | None = None, **metrics: Any) -> dict[str, Any]:
    return {
        "ok": ok,
        "stage": stage,
        "diagnostics": [d.to_json() for d in diagnostics or []],
        "metrics": metrics,
    }


def _internal(stage: str, err: BaseException, rule: str = "harness.internal") -> dict[str, Any]:
    tail = "".join(traceback.format_exception(err)[-6:])
    record = _record(False, stage, [Diagnostic(rule, "error", None, f"{type(err).__name__}: {err}")])
    record["log_tail"] = tail
    return record


def environment() -> dict[str, Any]:
    import platform

    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    gpu = ""
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
        versions["cuda"] = torch.version.cuda or ""
    return {"gpu": gpu, "versions": versions}


def _memory(job: dict[str, Any]) -> int | None:
    """The candidate's host memory limit in bytes: the job's, or half the machine on a CPU job
    (a CUDA process maps memory that an `RLIMIT_DATA` guess would break, so there only when
    asked for)."""
    if job.get("memory_mb"):
        return int(job["memory_mb"]) << 20
    if str(job.get("device", "cpu")).startswith("cuda"):
        return None
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2


def _candidate_source(spec: dict[str, Any]) -> tuple[str, str]:
    """(the text, the file name for diagnostics): read here, since the candidate's own user
    may not be able to read the file, and should not see where it lies."""
    if "text" in spec:
        return spec["text"], spec.get("file", "<input>")
    return Path(spec["file"]).read_text(), str(spec["file"])


class Candidate:
    """One candidate process of a job: started at once, loaded, then used and finished."""

    def __init__(self, job: dict[str, Any], spec: dict[str, Any], deadline: float, announce: Callable[[Any], None]):
        from agent.harness.candidate import serve
        from agent.harness.sandbox import CandidateProcess

        self.spec = spec
        self.kind = "module" if spec["kind"] == "python" else "kir"
        self.device = job.get("device", "cpu")
        self.source, self.file = _candidate_source(spec)
        # what the backend's runtime needs set in the candidate's process (an unknown backend is
        # the candidate's load error, later)
        known = runtimes().get(spec.get("backend", "")) if self.kind == "kir" else None
        env = dict(known[1].env) if known is not None else {}
        self.process = CandidateProcess(deadline=deadline, memory=_memory(job), serve=serve, env=env)
        _live.append(self.process)
        announce(self.process)
        load: dict[str, Any] = {"op": "load", "device": self.device}
        if self.kind == "kir":
            load["candidate"] = {"kind": "kir", "text": self.source, "file": self.file, "backend": spec["backend"],
                                 "params": dict(spec.get("params") or {})}  # fmt: skip
        else:
            load["candidate"] = {"kind": "python", "source": self.source}
        if self.device.startswith("cuda"):
            load["device_fraction"] = float(job.get("device_memory_fraction", DEVICE_FRACTION))
        self._load: dict[str, Any] | None = load
        self.containment = self.process.containment

    def start_loading(self) -> None:
        """Send the load request now (its answer is read by `loaded`): the candidate imports
        while the checker computes the references."""
        if self._load is not None:
            self.process.send(self._load)
            self._load = None

    def loaded(self, program=None):
        """Wait for the load's answer; the `Remote` to run the protocol with."""
        from agent.harness.correctness import Remote, error_of

        self.start_loading()
        ((answer, _),) = self.process.receive(limit=1 << 20)
        failed = error_of(answer, "lower" if self.kind == "kir" else "load", self.file)
        if failed:
            raise failed
        self.containment = str(answer.get("containment", self.containment))[:200]
        return Remote(self.process, self.kind, program, self.spec.get("params") if self.kind == "kir" else None)

    def finish(self) -> list[Diagnostic]:
        """Stop it and say what it did beyond its outputs: forged records, escapes."""
        diags = self.process.finish()
        if self.process.output.forged:
            diags.insert(
                0,
                Diagnostic(
                    "harness.forged-record",
                    "error",
                    None,
                    "the candidate printed a line that looks like a harness record; its output is never read as one",
                    'print nothing that starts with {"kir_record"',
                ),  # fmt: skip
            )
        if self.process in _live:
            _live.remove(self.process)
        return diags

    def tail(self) -> str:
        return self.process.output.tail()


def evaluate(job: dict[str, Any], announce: Callable[[Any], None] = lambda process: None) -> dict[str, Any]:
    if job.get("kind") == "time":
        return time_task(job, announce)
    if job.get("kind") == "ceilings":
        from agent.harness.timing import Timer, measure_ceilings

        return _record(
            True, "done", ceilings=measure_ceilings(Timer(job.get("device", "cuda"))), environment=environment()
        )
    from agent.harness.sandbox import Snapshot

    deadline = time.monotonic() + float(job.get("timeout", DEFAULT_TIMEOUT))
    spec = job["candidate"]
    task_path = Path(job["task"])
    extra = [Path(spec["file"])] if spec.get("file") else []
    snapshot = Snapshot.of(task_path if task_path.is_dir() else task_path.parent, extra)
    from agent.harness import sandbox

    try:
        candidate = Candidate(job, spec, deadline, announce)
        candidate.start_loading()
    except OSError as err:
        stage = "parse" if spec["kind"] == "kir" else "load"
        return _record(False, stage, [Diagnostic("io.read", "error", None, f"cannot read the candidate: {err}")])
    finally:
        sandbox.allow_fork(False)  # from here on the checker runs torch
    from agent.harness.failure import CandidateFailed

    log_tail = ""
    try:
        with device_share(str(job.get("device", "cpu"))):  # its compile goes on meanwhile
            record = _check_job(job, candidate)
    except CandidateFailed as failed:  # it could not be judged on its outputs
        record, log_tail = _record(False, failed.stage, failed.diagnostics), failed.log_tail
    finally:
        late = candidate.finish()
        changed = snapshot.restore()
    if changed:
        late.append(
            Diagnostic(
                "harness.escaped",
                "error",
                None,
                f"files the verdict depends on changed during the job: {', '.join(changed[:5])} (restored)",
                "a candidate may write only in its working folder",
            )  # fmt: skip
        )
    if late:
        if record["ok"]:
            record["ok"], record["stage"] = False, "integrity"
        record["diagnostics"] += [d.to_json() for d in late]
    record["metrics"]["containment"] = candidate.containment
    record["metrics"]["candidate_uid"] = candidate.process.uid
    if not record["ok"]:
        record["log_tail"] = _cap("\n".join(t for t in (log_tail, candidate.tail()) if t))
    return record


LOG_CHARS = 8000


def _cap(text: str, keep: int = LOG_CHARS) -> str:
    """The end of a log, saying how much of it was cut."""
    if len(text) <= keep:
        return text
    marker = f"[{len(text) - keep} characters cut]\n"
    return marker + text[-(keep - len(marker)) :]


def _check_job(job: dict[str, Any], candidate: Candidate) -> dict[str, Any]:
    """The record of a check job (`CandidateFailed` where the candidate cannot be judged)."""
    from agent.harness.correctness import Verdict, check
    from agent.tasks import TaskError, load_task

    static = None
    if candidate.kind == "kir":
        params = tuple(sorted((candidate.spec.get("params") or {}).items()))
        try:
            static = pipeline.Candidate(candidate.source, params, candidate.file).parsed()
        except KirError as err:
            return _record(False, "parse", err.diagnostics)
    try:
        task = load_task(job["task"])
        task.module  # noqa: B018 - the reference imported now: its errors are the task's
    except TaskError as err:
        return _record(False, "task", err.diagnostics)
    program = None
    if static is not None:
        # the static stages of the one pipeline: the parameters checked, then (unless the job
        # comes from the pipeline, which verified this text already) the verifier
        record = pipeline.evaluate(static, until="verify" if job.get("verify", True) else "parse")
        if not record.ok:
            return _record(False, record.stage, record.errors)
        program = static.program
    preset = job.get("preset", "test")
    device = job.get("device", "cpu")
    try:
        runner = candidate.loaded(program)
        if not job.get("check", True):
            verdict = Verdict(True)
        else:
            with device_work(device):  # never beside another checker's timed loop
                verdict = check(
                    task, runner, preset, seeds=job.get("seeds"), rounds=job.get("rounds", 3), device=device,
                    vary=job.get("vary", True),
                )  # fmt: skip
    except TaskError as err:
        return _record(False, "task", err.diagnostics)
    metrics: dict[str, Any] = {"seeds": verdict.seeds, "max_error": verdict.max_error}
    if verdict.varied:
        metrics["varied"] = verdict.varied
    if verdict.degenerate:
        metrics["degenerate"] = verdict.degenerate
    if verdict.cycles is not None:
        metrics["cycles"] = verdict.cycles  # mtia-sim: simulated cycles at the preset's shape
    if not verdict.ok:
        return _record(False, "correctness", verdict.diagnostics, **metrics)
    if job.get("warm"):
        with device_work(device):
            _warm(task, preset, device)
    if not job.get("time"):
        return _record(True, "done", **metrics)
    try:
        timed = time_candidates(job, task, [runner])
    except TaskError as err:
        return _record(False, "task", err.diagnostics, **metrics)
    first = timed.pop("candidates")[0]
    if "failed" in first:
        failed = first["failed"]
        return _record(False, "timing", failed.diagnostics, **metrics)
    metrics.update(timed, ms=first["ms"], timing={**timed["timing"], "ours": first["timing"]})
    return _record(True, "done", **metrics)


def _warm(task, preset: str, device: str) -> None:
    """Run torch.compile once on the instance, so that its caches on disk are warm for timing."""
    import torch

    from agent.harness.instance import make_instance

    inst = make_instance(task, preset, 1000, device)
    with torch.no_grad():
        torch.compile(inst.model)(*inst.inputs)


# ---- timing ----


class _TimingSets:
    """The timing's inputs: one model (a fresh seed), `sets` input sets to rotate, and for each
    a fresh set (other values, same shapes) its last run is made on, with the outputs that set
    must give, computed now, before any candidate is timed."""

    def __init__(self, task, preset: str, device: str, n: int):
        from agent.harness.instance import make_inputs, make_instance, native_outputs, reference_outputs, release

        seeds = [secrets.randbelow(2**31) for _ in range(1 + 2 * n)]
        self.task, self.preset, self.device = task, preset, device
        self.inst = make_instance(task, preset, seeds[0], device)
        self.sets = [make_inputs(task, preset, s, device) for s in seeds[1 : 1 + n]]
        self.fresh = [make_inputs(task, preset, s, device) for s in seeds[1 + n :]]
        # on the device, where the comparisons run
        self.native = [native_outputs(self.inst, x) for x in self.sets]
        self.fresh_native = [native_outputs(self.inst, x) for x in self.fresh]
        self.fresh_refs = [reference_outputs(self.inst, x) for x in self.fresh]
        release(device)

    def set_bytes(self) -> int:
        import torch

        return sum(t.numel() * t.element_size() for t in self.sets[0] if isinstance(t, torch.Tensor)) + sum(
            t.numel() * t.element_size() for t in self.native[0]
        )


def _setup_header(runner, ts: _TimingSets, warmup: int):
    """The time-setup request of one candidate: (header, payloads)."""
    import torch

    from agent.harness.backends import bind, sources
    from agent.harness.correctness import output_names, poisoned_like
    from agent.harness.instance import torch_dtype
    from agent.harness.wire import Encoder

    enc = Encoder()
    task = ts.task
    if runner.kind == "kir":
        program = runner.program
        outs = [[poisoned_like(o, 0) for o in native] for native in ts.native]
        where = sources(program, task, len(ts.sets[0]) if task.bind else sum(isinstance(x, torch.Tensor) for x in ts.sets[0]),
                        len(outs[0]))  # fmt: skip
        inputs_of = [n for n, (kind, _) in where.items() if kind == "inputs"]
        by_index = {int(i): n for n, (kind, i) in where.items() if kind == "outputs"}
        out_names = [by_index[i] for i in range(len(outs[0]))]
        sets, fresh = [], []
        for x, f, o in zip(ts.sets, ts.fresh, outs, strict=True):
            bound = bind(program, task, x, o, ts.inst.model)
            sets.append({n: enc.tensor(t) for n, t in bound.items()})
            again = bind(program, task, f, o, ts.inst.model)
            fresh.append({n: enc.tensor(again[n]) for n in inputs_of})
        header = {"op": "time-setup", "sets": sets, "fresh": fresh, "outputs": out_names, "warmup": warmup}
        names = output_names(program, task, len(out_names))
    else:
        header = {
            "op": "time-setup", "key": "timing", "warmup": warmup,
            "sets": [[enc.value(v) for v in x] for x in ts.sets],
            "fresh": [[enc.value(v) for v in x] for x in ts.fresh],
            "model": {
                "init": enc.value(list(ts.inst.init)), "rng": enc.tensor(ts.inst.rng_state),
                "dtype": str(torch_dtype(task.dtype)).removeprefix("torch.") if task.dtype else None,
                "mode": task.mode,
            },
        }  # fmt: skip
        names = [f"output {i}" for i in range(len(ts.native[0]))]
    return header, enc.payloads, names


# A candidate's times are held against the checker's clock around the timed loop: they may not
# add up to more than passed, nor leave unexplained more than a second and nine times what they
# add up to, once a generous overhead per run (the flush, the events, the loop) and the time to
# refresh and keep the last runs' data are allowed. (A loaded machine stalls a process between
# runs too: the margins keep an honest candidate from being called a forger for it.)
OVERHEAD_PER_RUN_S = 0.005
REFRESH_RATE = 1e9  # bytes per second, three passes (refresh, poison, keep), for the allowance
UNEXPLAINED_S = 1.0
# On a GPU the timed loop has the device to itself (one timing at a time per GPU), and the
# checker's machine is not the loaded CI machine: the margins shrink to a tenth of a second and
# once what the candidate reported.
UNEXPLAINED_GPU_S, UNEXPLAINED_GPU_FACTOR = 0.1, 1.0
# The device work still running after a timed run's end event (other streams'): on the H200 a
# synchronize with nothing left takes 0.015-0.06 ms alone and up to 0.14 ms while another process
# spins the GPU (benchmarks/results/harness-h200-2026-12-02); a side stream's kernels take what
# they take (2 ms hidden: a 2 ms drain). Hidden work below the limit is not caught.
SIDE_STREAM_MS = 0.25
# A report that took longer on the checker's clock than the runs add up to is timed once more
# before it fails (a stall of the host, not of the candidate); one that is wrong otherwise is not.
TIMING_ATTEMPTS = 2


def time_one(runner, ts: _TimingSets, spec: dict[str, Any]) -> dict[str, Any]:
    """Time one candidate on the timing sets and check what it timed: `{"ms", "timing"}`, or
    `{"failed": CandidateFailed}`."""
    from agent.harness.correctness import error_of
    from agent.harness.failure import CandidateFailed
    from agent.harness.timing import Timing, exclusive

    def fail(rule: str, message: str, extra: dict | None = None) -> dict[str, Any]:
        d = Diagnostic(rule, "error", None, message, counterexample={"phase": "timing", **(extra or {})})
        return {"failed": CandidateFailed("timing", [d])}

    limit = 2 * len(ts.sets) * ts.set_bytes() + (1 << 20)
    try:
        with device_work(ts.device):  # the sets copied to the host and into the candidate's device memory
            header, payloads, names = _setup_header(runner, ts, int(spec.get("warmup", 5)))
            ((answer, _),) = runner.request(header, payloads, limit=1 << 20)
        failed = error_of(answer, "timing")
        if failed:
            return {"failed": failed}
    except CandidateFailed as failed:
        return {"failed": failed}
    runs = int(spec.get("runs", 50))
    request = {"op": "time", "runs": runs, "min_runs": int(spec.get("min_runs", 10)),
               "budget_s": float(spec.get("budget_s", 2.0))}  # fmt: skip
    for attempt in range(TIMING_ATTEMPTS):
        try:
            with exclusive(ts.device):  # one timed loop at a time per GPU; the inputs were sent before
                sent = time.monotonic()
                answers = runner.request(request, None, limit=limit, replies=2)
            arrived = runner.reply_times[0] if runner.reply_times else time.monotonic()
            first = answers[0][0]
            refused = error_of(first, "timing")
            if refused:
                return {"failed": refused}
            (second, out_payloads) = answers[1]
        except CandidateFailed as failed:
            return {"failed": failed}
        problem = _check_times(first, runs, ts, arrived - sent, fail)
        if problem is None or not problem.get("retry") or attempt == TIMING_ATTEMPTS - 1:
            break
    if problem is not None:
        return {"failed": problem["failed"]}
    times, wall = first["times"], arrived - sent
    outputs = second.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(ts.sets):
        return fail("harness.timed-mismatch", "the candidate kept no outputs of its timed runs")
    with device_work(ts.device):  # compared on the device
        problem = _timed_outputs(ts, outputs, out_payloads, names, fail)
    if problem is not None:
        return problem
    timing = Timing.of(times)
    return {"ms": timing.median_ms, "timing": {**timing.to_json(), "wall_ms_per_run": wall * 1e3 / len(times)}}


def _timed_outputs(ts: _TimingSets, outputs: list, out_payloads: list, names: list[str], fail) -> dict[str, Any] | None:
    """What is wrong with the outputs of the timed loop's last runs (`fail`'s answer), or None."""
    from agent.harness.correctness import Verdict, _compare
    from agent.harness.wire import WireError, decode_tensor

    verdict = Verdict(True)
    for k, (metas, natives, refs) in enumerate(zip(outputs, ts.fresh_native, ts.fresh_refs, strict=True)):
        if not isinstance(metas, list) or len(metas) != len(natives):
            return fail(
                "harness.timed-mismatch",
                f"input set {k}: {len(metas) if isinstance(metas, list) else 0} outputs, not {len(natives)}",
            )
        for i, (meta, native, ref) in enumerate(zip(metas, natives, refs, strict=True)):
            try:
                out = decode_tensor(meta, out_payloads)
            except WireError as err:
                return fail("harness.timed-mismatch", f"input set {k}, output {i}: {err}")
            if out.numel() != native.numel() or out.dtype != native.dtype:
                return fail("harness.timed-mismatch", f"input set {k}, output {i} is {out.dtype} {list(out.shape)}")
            problem = _compare(ts.task, ts.fresh[k], names[i], out.reshape(native.shape), ref, native, verdict)
            if problem is not None:
                return fail(
                    "harness.timed-mismatch",
                    f"the last timed run on input set {k} (values it had not seen): output `{names[i]}`: {problem[1]}",
                    {"set": k},
                )
    return None


def _check_times(first: dict[str, Any], runs: int, ts: _TimingSets, wall: float, fail) -> dict[str, Any] | None:
    """What is wrong with a candidate's report of its timed runs (`fail`'s answer, with `retry`:
    only the checker's clock disagrees), or None. A host busy with other work can stall the
    candidate between its runs: such a candidate is timed again, and a second disagreement
    fails it, as a forged report fails every time."""
    import math
    import statistics

    def measured(values: object) -> TypeGuard[list[float]]:
        return isinstance(values, list) and all(
            isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t >= 0 for t in values
        )

    times = first.get("times")
    if not measured(times) or not 0 < len(times) <= runs + len(ts.sets):
        return fail("harness.timing-forged", "the candidate's times are not a list of measured durations")
    drains = first.get("drains", [])
    if not measured(drains):
        return fail("harness.timing-forged", "the candidate's drain times are not a list of measured durations")
    drain = statistics.median(drains) if drains else 0.0
    if drain > SIDE_STREAM_MS:
        return fail(
            "harness.side-stream",
            f"work was still running on the device {drain:.3f} ms (median of {len(drains)} runs) after the timed "
            f"stream finished: the events around the call left it out",
            {"drain_ms": drain, "event_ms": statistics.median(times)},
        )
    total = sum(times) / 1e3
    allowance = 0.05 + len(times) * OVERHEAD_PER_RUN_S + 3 * len(ts.sets) * ts.set_bytes() / REFRESH_RATE
    unexplained = wall - allowance - total
    gpu = str(ts.device).startswith("cuda")
    allowed = max(UNEXPLAINED_GPU_S, UNEXPLAINED_GPU_FACTOR * total) if gpu else max(UNEXPLAINED_S, 9 * total)
    if total > wall * 1.02 + 0.005 or unexplained > allowed:
        failed = fail(
            "harness.timing-forged",
            f"the candidate's runs add up to {total * 1e3:.3f} ms, but {wall * 1e3:.3f} ms passed on the checker's clock",
            {"reported_ms": total * 1e3, "wall_ms": wall * 1e3},
        )
        return {**failed, "retry": total <= wall * 1.02 + 0.005}  # more time reported than passed: no load explains it
    return None


def time_candidates(job: dict[str, Any], task, runners: list) -> dict[str, Any]:
    """Time candidates (their runners, one after another) and the peers (eager, torch.compile,
    in this process) on the same rotated input sets: the ratios between them are measured side
    by side. A candidate that fails while being timed gets a `failed` entry; the others go on."""
    spec = job["time"]
    device = job.get("device", "cpu")
    with device_work(device):
        ts = _TimingSets(task, job.get("preset", "test"), device, int(spec.get("sets", 3)))
        compiled = _compiled_peer(job, ts)  # compiled before the device is taken: it can take a minute
    return _peers(job, task, ts, [time_one(r, ts, spec) for r in runners], compiled)


def time_task(job: dict[str, Any], announce: Callable[[Any], None] = lambda process: None) -> dict[str, Any]:
    """A job of kind "time": every candidate in `job["candidates"]` (candidate specs as in a
    check job, already checked) timed with the peers, each in its own process."""
    from agent.harness import sandbox
    from agent.harness.failure import CandidateFailed
    from agent.tasks import TaskError, load_task
    from kir.parser import parse

    deadline = time.monotonic() + float(job.get("timeout", DEFAULT_TIMEOUT))
    # every candidate started now, while the checker may still fork; each loads (a CUDA context,
    # its kernels compiled) only when its turn comes
    started: list[Candidate | dict[str, Any]] = []
    for spec in job["candidates"]:
        try:
            started.append(Candidate(job, spec, deadline, announce))
        except OSError as err:
            started.append({"error": f"cannot read the candidate: {err}"})
    sandbox.allow_fork(False)

    def timed(candidate: Candidate | dict[str, Any], ts: _TimingSets, spec: dict[str, Any]) -> dict[str, Any]:
        if isinstance(candidate, dict):
            return candidate
        try:
            program = parse(candidate.source, candidate.file) if candidate.kind == "kir" else None
            entry = time_one(candidate.loaded(program), ts, spec)
        except (KirError, CandidateFailed) as err:
            entry = {"failed": err if isinstance(err, CandidateFailed) else CandidateFailed("lower", err.diagnostics)}
        late = candidate.finish()
        if late and "failed" not in entry:
            entry = {"failed": CandidateFailed("integrity", late)}
        return entry

    spec = job["time"]
    try:
        # the device's place taken only now: finding its lock starts CUDA in this process, after
        # which no candidate can be forked from it
        with device_share(str(job.get("device", "cpu"))):
            task = load_task(job["task"])
            task.module  # noqa: B018 - the reference imported now: its errors are the task's
            with device_work(str(job.get("device", "cuda"))):
                ts = _TimingSets(task, job.get("preset", "bench"), job.get("device", "cuda"), int(spec.get("sets", 3)))
                compiled = _compiled_peer(job, ts)
            entries = [timed(c, ts, spec) for c in started]
            result = _peers(job, task, ts, entries, compiled)
    except TaskError as err:
        return _record(False, "task", err.diagnostics)
    finally:
        for c in started:
            if isinstance(c, Candidate):
                c.finish()
    for i, entry in enumerate(result["candidates"]):
        if "failed" in entry:
            d = entry.pop("failed").diagnostics[0]
            result["candidates"][i] = {"error": f"{d.rule}: {d.message}"}
    return _record(True, "done", **result)


def _compiled_peer(job: dict[str, Any], ts: _TimingSets):
    """torch.compile's model, compiled now (one call on the first set), where the job times it."""
    import torch

    if "compile" not in job["time"].get("peers", ["eager", "compile"]):
        return None
    # Inductor's compile workers default to one per CPU, in every checker that compiles: with
    # a search per task on one machine that is hundreds of processes at once
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    compiled = torch.compile(ts.inst.model)
    with torch.no_grad():
        compiled(*ts.sets[0])
    return compiled


def _peers(job: dict[str, Any], task, ts: _TimingSets, entries: list[dict[str, Any]], compiled=None) -> dict[str, Any]:
    """The peers timed on the candidates' sets in this process (`compiled`: torch.compile's
    model, compiled already), and the instance's bytes and flops."""
    import torch

    from agent.harness.timing import Timer, exclusive

    spec = job["time"]
    preset = ts.preset
    runs = spec.get("runs", 50)
    timer = Timer(ts.device)
    model = ts.inst.model
    result: dict[str, Any] = {"candidates": entries, "timing": {}}
    peers = spec.get("peers", ["eager", "compile"])
    with torch.no_grad(), exclusive(ts.device):  # one timing at a time per GPU
        if "eager" in peers:
            eager = timer.time([lambda x=x: model(*x) for x in ts.sets], runs=runs)  # type: ignore[misc]  # a lambda binding x
            result["eager_ms"] = eager.median_ms
            result["timing"]["eager"] = eager.to_json()
        if "compile" in peers:
            compiled = compiled if compiled is not None else torch.compile(model)
            timed = timer.time([lambda x=x: compiled(*x) for x in ts.sets], warmup=3, runs=runs)  # type: ignore[misc]  # a lambda binding x
            result["compile_ms"] = timed.median_ms
            result["timing"]["compile"] = timed.to_json()
    tensors = [x for x in ts.sets[0] if isinstance(x, torch.Tensor)] + list(ts.native[0])
    tensors += [p for p in model.parameters()] + [b for b in model.buffers()]
    counted = task.counted_bytes(preset)
    result["bytes"] = counted if counted is not None else sum(t.numel() * t.element_size() for t in tensors)
    result["flops"] = task.counted_flops(preset)
    return result


def _stop(signum, frame) -> None:
    """Told to stop (the caller's timeout): take the candidates down first."""
    for process in list(_live):
        try:
            process.kill()
        except Exception:  # noqa: BLE001 - on the way out, whatever happens
            pass
    os._exit(128 + signum)


def main() -> None:
    args = sys.argv[1:]
    record_fd = int(args[args.index("--record-fd") + 1]) if "--record-fd" in args else None
    from agent.harness import sandbox

    sandbox.harden_checker()
    signal.signal(signal.SIGTERM, _stop)
    job = json.loads(sys.stdin.read())
    import torch  # imported once, here, for the candidates forked before any of it runs

    if str(job.get("device", "cpu")).startswith("cuda"):
        # its tensors' work is on the GPU: the host's threads would only contend with the other
        # checkers of a search (a pool of them per task, on one machine)
        torch.set_num_threads(CHECKER_THREADS)

    sandbox.allow_fork(True)
    out = os.fdopen(record_fd, "w") if record_fd is not None else sys.stdout

    def announce(process) -> None:
        # the caller cleans up after a candidate should this process die before it could (a
        # reference that exits at import): the candidate's uid and folder
        out.write(json.dumps({"candidate_uid": process.uid, "candidate_folder": str(process.sandbox.folder)}) + "\n")
        out.flush()

    try:
        record = evaluate(job, announce)
    except Exception as err:  # noqa: BLE001 - any escape is reported as a record, not a traceback
        record = _internal("internal", err)
    out.write(json.dumps({"kir_record": record}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
