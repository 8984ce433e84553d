"""The child process of `agent.harness.isolate`: evaluate one job, print one record.

A job is plain JSON:

    {"task": "benchmarks/tasks/softmax",          # a task folder (or a KernelBench .py file)
     "candidate": {"kind": "kir", "file": "benchmarks/tasks/softmax/tuned.kir",   # or "text"
                   "backend": "triton", "params": {"BLOCK": 8192}},
     # or {"kind": "python", "file": "solution.py"}: a KernelBench solution defining ModelNew
     "preset": "bench", "device": "cuda",
     "seeds": null, "rounds": 3,                  # null: fresh seeds
     "verify": true,                              # run the KIR verifier first
     "check": true,                               # run the correctness protocol
     "warm": false,                               # run torch.compile once (fills its caches)
     "time": {"sets": 3, "runs": 50, "peers": ["eager", "compile"]}}   # or null: no timing

Two other kinds of job: `{"kind": "ceilings", "device": "cuda"}` measures the copy and bf16
matmul rates and reports the GPU and versions; `{"kind": "time", "task": ..., "candidates":
[candidate, ...], "time": {...}}` times several already-checked candidates of one task and the
peers side by side (`time_candidates`).

The record (see isolate.py) says how far the candidate got: `stage` is the first stage that
stopped it ("task", "parse", "verify", "lower", "run", "correctness", "timing") or "done";
`metrics` holds the correctness figures and, when timed, `ms`, `eager_ms`, `compile_ms`, the
bytes and flops of the instance and the timing details.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from kir.diagnostics import Diagnostic, KirError


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


def _candidate(job: dict[str, Any], task):
    """(the candidate the correctness protocol runs, the KirCandidate behind it or None for a
    Python solution). Raises `KirError` for a program that does not parse."""
    from agent.harness.correctness import KirRun, ModuleRun

    spec = job["candidate"]
    if spec["kind"] == "python":
        import importlib.util

        module_spec = importlib.util.spec_from_file_location("kir_solution", spec["file"])
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return ModuleRun(module.ModelNew), None
    from agent.harness.backends import KirCandidate
    from kir.parser import parse, parse_file

    program = parse(spec["text"]) if "text" in spec else parse_file(spec["file"])
    candidate = KirCandidate(program, spec["backend"], dict(spec.get("params") or {}))
    return KirRun(candidate), candidate


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


def evaluate(job: dict[str, Any]) -> dict[str, Any]:
    from agent.harness.correctness import Verdict, check
    from agent.tasks import TaskError, load_task

    if job.get("kind") == "time":
        return time_task(job)
    if job.get("kind") == "ceilings":
        from agent.harness.timing import Timer, measure_ceilings

        return _record(True, "done", ceilings=measure_ceilings(Timer(job.get("device", "cuda"))), environment=environment())
    try:
        task = load_task(job["task"])
    except TaskError as err:
        return _record(False, "task", err.diagnostics)
    preset = job.get("preset", "test")
    device = job.get("device", "cpu")
    try:
        run, kir = _candidate(job, task)
    except KirError as err:
        return _record(False, "parse", err.diagnostics)
    if kir is not None and job.get("verify", True):
        from kir.check import check_program

        program = kir.program.with_params(**kir.params) if kir.params else kir.program
        errors = [d for d in check_program(program) if d.is_error]
        if errors:
            return _record(False, "verify", errors)
    if kir is not None:
        try:
            kir.prepare()
        except KirError as err:
            return _record(False, "lower", err.diagnostics)
    if not job.get("check", True):
        verdict = Verdict(True)
    else:
        try:
            verdict = check(task, run, preset, seeds=job.get("seeds"), rounds=job.get("rounds", 3), device=device)
        except TaskError as err:
            return _record(False, "task", err.diagnostics)
        except KirError as err:
            return _record(False, "run", err.diagnostics)
        except Exception as err:  # noqa: BLE001 - the candidate's own failure (a Python error, a launch error)
            return _internal("run", err, "harness.candidate-error")
    metrics = {"seeds": verdict.seeds, "max_error": verdict.max_error}
    if kir is not None and "cycles" in kir._cache:
        metrics["cycles"] = kir._cache["cycles"]  # mtia-sim: simulated cycles of the last run
    if not verdict.ok:
        return _record(False, "correctness", verdict.diagnostics, **metrics)
    if job.get("warm"):
        _warm(task, preset, device)
    if not job.get("time"):
        return _record(True, "done", **metrics)
    try:
        metrics.update(_time(job, task, kir, run))
    except KirError as err:
        return _record(False, "timing", err.diagnostics, **metrics)
    return _record(True, "done", **metrics)


def _warm(task, preset: str, device: str) -> None:
    """Run torch.compile once on the instance, so that its caches on disk are warm for timing."""
    import torch

    from agent.harness.instance import make_instance

    inst = make_instance(task, preset, 1000, device)
    with torch.no_grad():
        torch.compile(inst.model)(*inst.inputs)


def _time(job: dict[str, Any], task, kir, run) -> dict[str, Any]:
    """Time one candidate and the peers on the same rotated input sets."""
    timed = time_candidates(job, task, [(kir, run)])
    first = timed.pop("candidates")[0]
    if "error" in first:
        raise KirError(Diagnostic("harness.timing", "error", None, first["error"]))
    return {**timed, "ms": first["ms"], "timing": {**timed["timing"], "ours": first["timing"]}}


def time_candidates(job: dict[str, Any], task, candidates: list) -> dict[str, Any]:
    """Time several candidates of one task and the peers (eager, torch.compile) in this process,
    on the same rotated input sets: the ratios between them are measured side by side. A
    candidate that fails while being timed gets an `error` entry; the others go on."""
    import torch

    from agent.harness.backends import bind
    from agent.harness.correctness import poisoned_like
    from agent.harness.instance import make_instance, native_outputs
    from agent.harness.timing import Timer

    spec = job["time"]
    preset = job.get("preset", "bench")
    device = job.get("device", "cuda")
    timer = Timer(device)
    instances = [make_instance(task, preset, 1000 + i, device) for i in range(spec.get("sets", 3))]
    native = [native_outputs(inst) for inst in instances]
    runs = spec.get("runs", 50)
    result: dict[str, Any] = {"candidates": [], "timing": {}}
    for kir, run in candidates:
        try:
            if kir is not None:
                fns = []
                for inst, outs in zip(instances, native, strict=True):
                    tensors = bind(kir.program, task, inst.inputs, [poisoned_like(o, 0) for o in outs], inst.model)
                    fns.append(kir.launcher(tensors))
            else:
                fns = [run.callable_for(inst) for inst in instances]
            timed = timer.time(fns, runs=runs)
            result["candidates"].append({"ms": timed.median_ms, "timing": timed.to_json()})
        except Exception as err:  # noqa: BLE001 - one candidate's failure does not stop the others
            result["candidates"].append({"error": f"{type(err).__name__}: {err}"})
    peers = spec.get("peers", ["eager", "compile"])
    with torch.no_grad():
        if "eager" in peers:
            eager = timer.time([lambda inst=inst: inst.model(*inst.inputs) for inst in instances], runs=runs)
            result["eager_ms"] = eager.median_ms
            result["timing"]["eager"] = eager.to_json()
        if "compile" in peers:
            compiled = torch.compile(instances[0].model)
            compiled_fns = [lambda inst=inst: compiled(*inst.inputs) for inst in instances]
            timed = timer.time(compiled_fns, warmup=3, runs=runs)
            result["compile_ms"] = timed.median_ms
            result["timing"]["compile"] = timed.to_json()
    inst = instances[0]
    tensors = [x for x in inst.inputs if isinstance(x, torch.Tensor)] + list(native[0])
    tensors += [p for p in inst.model.parameters()] + [b for b in inst.model.buffers()]
    counted = task.counted_bytes(preset)
    result["bytes"] = counted if counted is not None else sum(t.numel() * t.element_size() for t in tensors)
    result["flops"] = task.counted_flops(preset)
    return result


def time_task(job: dict[str, Any]) -> dict[str, Any]:
    """A job of kind "time": every candidate in `job["candidates"]` (candidate specs as in a
    check job, already checked) timed with the peers."""
    from agent.tasks import TaskError, load_task

    try:
        task = load_task(job["task"])
    except TaskError as err:
        return _record(False, "task", err.diagnostics)
    candidates = []
    for spec in job["candidates"]:
        try:
            run, kir = _candidate({**job, "candidate": spec}, task)
            if kir is not None:
                kir.prepare()
        except KirError as err:
            return _record(False, "lower", err.diagnostics)
        candidates.append((kir, run))
    return _record(True, "done", **time_candidates(job, task, candidates))


def main() -> None:
    job = json.loads(sys.stdin.read())
    try:
        record = evaluate(job)
    except Exception as err:  # noqa: BLE001 - any escape is reported as a record, not a traceback
        record = _internal("internal", err)
    sys.stdout.write("\n" + json.dumps({"kir_record": record}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
