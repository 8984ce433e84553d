"""The candidate's side: how a KIR program or a Python solution is run, and the process that
runs it for the checker.

`main()` is the candidate process (started by `sandbox.CandidateProcess`): it applies the
containment (`sandbox.contain`), takes the timer's clock functions (`timing.capture`), and only
then loads the candidate and answers the checker's requests on its private pipes, one message
per request (see `Host.handle`). Nothing it sends decides a verdict: the checker compares the
outputs it receives, as raw bytes, with a reference this process never sees.

| request | answer |
| --- | --- |
| `load {candidate, device}` | `{loaded, containment}` once the solution is imported (a KIR program: parsed, lowered, compiled) |
| `run {args}` (KIR) | every argument after the launch, `cycles` on mtia-sim |
| `run {key, model, inputs}` (Python) | the outputs, the inputs after the call, which outputs share an input's memory |
| `time-setup {sets, fresh, warmup, ...}` | `{ready}` after the warm-up |
| `time {runs, min_runs, budget_s}` | `{times}`, then a second message with the outputs of the last run of each set |
| `quit` | the process exits (its `atexit` handlers run; their output is still read) |

Any error is an answer `{"error": ...}`: a KIR diagnostic, or a Python exception's type,
message and traceback (a `SyntaxError` with its line; running out of memory flagged as such).

`Host` serves the same requests in the caller's process too (`correctness.LocalRunner`), for
the suite's own trusted programs in tests: the same bytes cross, without the separation.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any, cast

from agent.harness.sandbox import contain

MAX_TEXT = 4000  # characters of an error message or traceback that cross


class KirRun:
    """A KIR program through a backend (see `agent.harness.backends`): launched on tensors the
    checker bound to its arguments."""

    kind = "kir"

    def __init__(self, candidate):
        self.candidate = candidate

    @property
    def program(self):
        return self.candidate.program

    @property
    def params(self) -> dict[str, int]:
        return self.candidate.params

    def prepare(self) -> None:
        self.candidate.prepare()

    def launcher(self, tensors: dict[str, Any]) -> Callable[[], None]:
        return self.candidate.launcher(tensors)


class PythonRun:
    """A Python function `fn(*inputs) -> outputs` (the KernelBench `ModelNew.forward` shape)."""

    kind = "python"

    def __init__(self, fn: Callable):
        self.fn = fn

    def callable_for(self, key: Any, model: dict | None, inputs: list, device: str) -> Callable[[], object]:
        return lambda: self.fn(*inputs)


class ModuleRun(PythonRun):
    """A KernelBench solution: `ModelNew(*get_init_inputs())` built once per key (a seed) from the
    generator state the reference's `Model` was built with (so parameters created in the same
    order are equal, as KernelBench assumes), in the task's dtype and on its device."""

    kind = "module"

    def __init__(self, cls: type):
        self.cls = cls
        self._models: dict[Any, Any] = {}

    def model(self, key: Any, spec: dict, device: str):
        import torch

        if key not in self._models:
            torch.set_rng_state(spec["rng"])
            model = self.cls(*spec["init"]).to(device)
            if spec.get("dtype"):
                model = model.to(getattr(torch, spec["dtype"]))
            self._models[key] = model.train(spec.get("mode") == "train")
        return self._models[key]

    def callable_for(self, key: Any, model: dict | None, inputs: list, device: str) -> Callable[[], object]:
        m = self.model(key, model or {}, device)
        return lambda: m(*inputs)


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _overlaps(a, b) -> bool:
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() > 0 and sb.nbytes() > 0


def _is_oom(err: BaseException) -> bool:
    text = str(err)
    return isinstance(err, MemoryError) or (
        isinstance(err, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)
    )


def describe_error(err: BaseException) -> dict[str, Any]:
    """An exception as plain data (the checker wraps it in its own diagnostic)."""
    from kir.diagnostics import KirError

    if isinstance(err, KirError):
        return {"kind": "kir", "diagnostics": [d.to_json() for d in err.diagnostics][:20]}
    info: dict[str, Any] = {
        "kind": "python",
        "type": type(err).__name__[:100],
        "message": str(err)[:MAX_TEXT],
        "traceback": "".join(traceback.format_exception(err)[-8:])[-MAX_TEXT:],
        "oom": _is_oom(err),
    }
    if isinstance(err, SyntaxError):
        info["line"] = err.lineno or 1
    return info


class Host:
    """Serves the checker's requests for one candidate (in its process, or in-process)."""

    def __init__(self, runnable=None, device: str = "cpu", containment: str = "none"):
        self.runnable = runnable
        self.device = device
        self.containment = containment
        self._timing: dict[str, Any] | None = None

    def handle(self, header: dict[str, Any], payloads: list) -> list[tuple[dict[str, Any], list]]:
        op = header.get("op")
        try:
            if op == "load":
                return [self.load(header)]
            if op == "run":
                return [self.run(header, payloads)]
            if op == "time-setup":
                return [self.time_setup(header, payloads)]
            if op == "time":
                return self.time(header)
            return [({"error": {"kind": "python", "type": "Protocol", "message": f"no request {op!r}"}}, [])]
        except BaseException as err:  # noqa: BLE001 - whatever the candidate raised becomes an answer
            return [({"error": describe_error(err)}, [])]

    # ---- load ----

    def load(self, header: dict[str, Any]) -> tuple[dict[str, Any], list]:
        spec = header["candidate"]
        self.device = header.get("device", "cpu")
        if self.device.startswith("cuda") and header.get("device_fraction"):
            import torch

            torch.cuda.set_per_process_memory_fraction(float(header["device_fraction"]))
        if spec["kind"] == "python":
            import importlib.util

            path = Path.cwd() / "solution.py"
            path.write_text(spec["source"])
            module_spec = importlib.util.spec_from_file_location("kir_solution", path)
            module = importlib.util.module_from_spec(cast(ModuleSpec, module_spec))  # a .py file has a spec
            sys.modules["kir_solution"] = module
            cast(Loader, cast(ModuleSpec, module_spec).loader).exec_module(module)
            if not isinstance(getattr(module, "ModelNew", None), type):
                raise TypeError("the solution defines no class ModelNew")
            self.runnable = ModuleRun(module.ModelNew)
        else:
            from agent.harness.backends import KirCandidate
            from kir.parser import parse

            program = parse(spec["text"], spec.get("file", "<input>"))
            self.runnable = KirRun(KirCandidate(program, spec["backend"], dict(spec.get("params") or {})))
            self.runnable.prepare()
        return {"loaded": True, "containment": self.containment}, []

    # ---- run ----

    def _tensors(self, encoded: dict[str, Any], payloads: list) -> dict[str, Any]:
        from agent.harness.wire import decode_tensor

        return {name: decode_tensor(meta, payloads, self.device) for name, meta in encoded.items()}

    def _values(self, encoded: list, payloads: list) -> list:
        from agent.harness.wire import decode_value

        return [decode_value(v, payloads, self.device) for v in encoded]

    def _model_spec(self, header: dict[str, Any], payloads: list) -> dict | None:
        from agent.harness.wire import decode_tensor, decode_value

        model = header.get("model")
        if model is None:
            return None
        return {
            "init": decode_value(model["init"], payloads),
            "rng": decode_tensor(model["rng"], payloads),
            "dtype": model.get("dtype"),
        }

    def run(self, header: dict[str, Any], payloads: list) -> tuple[dict[str, Any], list]:
        from agent.harness.wire import Encoder

        enc = Encoder()
        if self.runnable.kind == "kir":
            tensors = self._tensors(header["args"], payloads)
            self.runnable.launcher(tensors)()
            _synchronize(self.device)
            answer: dict[str, Any] = {"args": {name: enc.tensor(t) for name, t in tensors.items()}}
            cycles = self.runnable.candidate._cache.get("cycles")
            if cycles is not None:
                answer["cycles"] = cycles
            return answer, enc.payloads
        from agent.harness.instance import as_outputs

        inputs = self._values(header["inputs"], payloads)
        call = self.runnable.callable_for(header.get("key"), self._model_spec(header, payloads), inputs, self.device)
        outputs = as_outputs(call())
        _synchronize(self.device)
        import torch

        tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
        alias = [i for i, o in enumerate(outputs) if any(_overlaps(o, x) for x in tensors_in)]
        answer = {
            "outputs": [enc.tensor(o) for o in outputs],
            "inputs": [enc.value(x) for x in inputs],
            "alias": alias,
        }
        return answer, enc.payloads

    # ---- timing ----

    def time_setup(self, header: dict[str, Any], payloads: list) -> tuple[dict[str, Any], list]:
        """Build one function per input set, and what refreshes each set before its last run."""
        import torch

        from agent.harness.timing import Timer

        fns: list = []
        refresh: list[list] = []
        kept_outputs: list[list | None] = []
        if self.runnable.kind == "kir":
            outs = header["outputs"]
            for s, fresh in zip(header["sets"], header["fresh"], strict=True):
                tensors = self._tensors(s, payloads)
                new = self._tensors(fresh, payloads)
                poison = {name: tensors[name].clone() for name in outs}
                fns.append(self.runnable.launcher(tensors))
                refresh.append([(tensors[n], t) for n, t in new.items()] + [(tensors[n], p) for n, p in poison.items()])
                kept_outputs.append([tensors[n] for n in outs])
        else:
            model = self._model_spec(header, payloads)
            for s, fresh in zip(header["sets"], header["fresh"], strict=True):
                inputs = self._values(s, payloads)
                fresh_inputs = self._values(fresh, payloads)
                fns.append(self.runnable.callable_for(header.get("key"), model, inputs, self.device))
                refresh.append(
                    [(a, b) for a, b in zip(inputs, fresh_inputs, strict=True) if isinstance(a, torch.Tensor)]
                )
                kept_outputs.append(None)
        timer = Timer(self.device)
        timer.warm(fns, int(header.get("warmup", 5)))
        self._timing = {"timer": timer, "fns": fns, "refresh": refresh, "outs": kept_outputs}
        return {"ready": True}, []

    def time(self, header: dict[str, Any]) -> list[tuple[dict[str, Any], list]]:
        from agent.harness.instance import as_outputs
        from agent.harness.wire import Encoder

        t = cast(dict[str, Any], self._timing)  # set by `time_setup`, which the checker sends first
        last: dict[int, list] = {}

        def before_last(k: int) -> None:
            for dst, src in t["refresh"][k]:
                dst.copy_(src)

        def keep(k: int, value: object) -> None:
            outs = t["outs"][k] if t["outs"][k] is not None else as_outputs(value)
            last[k] = [o.clone() for o in outs]

        timing = t["timer"].time(
            t["fns"], warmup=0, runs=int(header.get("runs", 50)), min_runs=int(header.get("min_runs", 10)),
            budget_s=float(header.get("budget_s", 2.0)), before_last=before_last, keep=keep,
        )  # fmt: skip
        enc = Encoder()
        outputs = [[enc.tensor(o) for o in last[k]] for k in range(len(t["fns"]))]
        return [
            ({"times": list(timing.times), "drains": list(timing.drains)}, []),
            ({"outputs": outputs}, enc.payloads),
        ]


def main() -> None:
    """The candidate process started as `python -I -c ...`: its plan is its argument."""
    serve(json.loads(sys.argv[1]))


def serve(plan: dict[str, Any]) -> None:
    """Contain, take the clock, then answer the checker until it says quit."""
    containment = contain(plan)
    from agent.harness import timing, wire

    timing.capture()  # before the candidate's code exists in this process
    fd_in, fd_out = plan["fd_in"], plan["fd_out"]
    host = Host(containment=containment)
    while True:
        try:
            header, payloads = wire.receive(fd_in, limit=1 << 62)
        except wire.WireError:
            break
        if header.get("op") == "quit":
            break
        for answer, data in host.handle(header, payloads):
            try:
                wire.send(fd_out, answer, data)
            except (wire.WireError, OSError):
                os._exit(71)  # the checker is gone, or stopped reading
    sys.stdout.flush()
