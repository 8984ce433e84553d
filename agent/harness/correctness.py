"""The correctness protocol: what it takes for a candidate to be called correct.

For each of several seeds (fresh ones unless given):
1. make the instance (inputs with both signs, never all zeros) and keep bitwise copies;
2. run the model in the task's dtype on clones (the shapes and dtypes to produce; these
   tensors stay alive, so a candidate that hands one of them back is caught);
3. allocate the outputs poisoned (NaN; integers alternate between their extremes across seeds)
   and run the candidate;
4. reject outputs that share storage with an input or with the reference's tensors, inputs that
   changed (bitwise), NaN or Inf anywhere in an output, and every element that differs from the
   reference computed in higher precision: `|out - ref| <= rtol * |ref| + max(atol * rms(ref),
   2 * e)` per element, with `e` the worst error of PyTorch's own result in the task's dtype,
   for floating outputs (tolerances by dtype, overridable per task), equality for
   integer ones, or the task's own comparison for outputs whose answer is not unique.

A failure is a `Diagnostic` (`harness.mismatch`, `harness.nan`, `harness.unwritten`,
`harness.input-mutated`, `harness.alias`, `harness.shape`) at the program's output argument,
with the seed, the worst element and the counts in its counterexample.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.harness.instance import Instance, make_instance, native_outputs, reference_outputs, torch_dtype
from kir.diagnostics import Diagnostic, KirError, Span

# rtol, atol (atol in units of the reference's root mean square)
TOLERANCES = {
    "float64": (1e-9, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (5e-3, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}


@dataclass
class Verdict:
    ok: bool
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    max_error: dict[str, float] = field(default_factory=dict)  # output -> worst error / tolerance

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seeds": self.seeds,
            "max_error": self.max_error,
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


class Candidate:
    """What the harness runs. `run(inst, outputs)` gets the instance and poisoned output tensors
    and returns the output tensors (a KIR candidate writes into `outputs` and returns them; a
    Python candidate may return its own)."""

    span_of_output: Callable[[int], Span | None] = staticmethod(lambda i: None)

    def run(self, inst: Instance, outputs: list) -> list:  # pragma: no cover - interface
        raise NotImplementedError


class KirRun(Candidate):
    """A KIR program through a backend (see `agent.harness.backends`)."""

    def __init__(self, candidate):
        self.candidate = candidate
        self.out_names: list[str] = []

    def run(self, inst: Instance, outputs: list) -> list:
        from agent.harness.backends import bind

        tensors = bind(self.candidate.program, inst.task, inst.inputs, outputs, inst.model)
        self.out_names = _output_names(self.candidate.program, inst.task, len(outputs))
        self.candidate.launcher(tensors)()
        _synchronize(inst.device)
        return outputs

    def span_of_output(self, i: int) -> Span | None:
        names = self.out_names
        program = self.candidate.program
        return program.arg_spans.get(names[i]) if i < len(names) else program.span()


class PythonRun(Candidate):
    """A Python function `fn(*inputs) -> outputs` (the KernelBench `ModelNew.forward` shape)."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def run(self, inst: Instance, outputs: list) -> list:
        from agent.harness.instance import as_outputs

        result = as_outputs(self.callable_for(inst)())
        _synchronize(inst.device)
        return result

    def callable_for(self, inst: Instance) -> Callable[[], object]:
        """The call to time on this instance's inputs."""
        return lambda: self.fn(*inst.inputs)


class ModuleRun(PythonRun):
    """A KernelBench solution: `ModelNew(*get_init_inputs())`, built for each instance under the
    seed its `Model` was built with (so parameters created in the same order are equal, as
    KernelBench assumes), in the task's dtype and on its device."""

    def __init__(self, cls: type):
        self.cls = cls
        self._models: dict[tuple[int, str], Any] = {}

    def model(self, inst: Instance):
        import torch

        from agent.harness.instance import torch_dtype

        key = (inst.seed, inst.device)
        if key not in self._models:
            task = inst.task
            task._apply(task.preset(inst.preset))
            torch.manual_seed(inst.seed)
            init = task.call("get_init_inputs()", task.module.get_init_inputs)
            model = self.cls(*init).to(inst.device)
            if task.dtype:
                model = model.to(torch_dtype(task.dtype))
            self._models[key] = model.eval()
        return self._models[key]

    def callable_for(self, inst: Instance) -> Callable[[], object]:
        model = self.model(inst)
        return lambda: model(*inst.inputs)


def _output_names(program, task, count: int) -> list[str]:
    if task.bind:
        by_index = {int(b.index): name for name, b in task.bind.items() if b.kind == "outputs"}
        return [by_index.get(i, f"output {i}") for i in range(count)]
    return [name for name, arg in program.kernel.args if arg.type.is_out]


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _storage(t) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _overlaps(a, b) -> bool:
    (a0, a1), (b0, b1) = _storage(a), _storage(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def _bits(t):
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def poisoned_like(t, round_: int):
    import torch

    if t.is_floating_point():
        return torch.full_like(t, float("nan"))
    if t.dtype == torch.bool:
        return torch.full_like(t, round_ % 2 == 0)
    info = torch.iinfo(t.dtype)
    return torch.full_like(t, info.min if round_ % 2 == 0 else info.max)


def check(
    task,
    candidate: Candidate,
    preset: str = "test",
    *,
    seeds: list[int] | None = None,
    rounds: int = 3,
    device: str = "cpu",
) -> Verdict:
    """Run the protocol; the verdict holds every failure found (it stops at the first seed that
    fails). Errors of the candidate itself (a compile error, a launch failure) propagate as
    `KirError`; errors of the reference are `TaskError`."""
    seeds = list(seeds) if seeds else [secrets.randbelow(2**31) for _ in range(rounds)]
    verdict = Verdict(True, seeds=seeds)
    for round_, seed in enumerate(seeds):
        problems = _one_seed(task, candidate, preset, seed, round_, device, verdict)
        if problems:
            verdict.ok = False
            verdict.diagnostics.extend(problems)
            break
    return verdict


def _one_seed(task, candidate, preset, seed, round_, device, verdict: Verdict) -> list[Diagnostic]:
    import torch

    inst = make_instance(task, preset, seed, device)
    pristine = [x.clone() if isinstance(x, torch.Tensor) else x for x in inst.inputs]
    native = native_outputs(inst)
    outputs = [poisoned_like(o, round_) for o in native]
    got = candidate.run(inst, outputs)
    where = {"seed": seed, "preset": preset}

    def diag(rule: str, i: int | None, message: str, hint: str = "", extra: dict | None = None) -> Diagnostic:
        span = candidate.span_of_output(i) if i is not None else None
        return Diagnostic(rule, "error", span, message, hint, counterexample={**where, **(extra or {})})

    problems: list[Diagnostic] = []
    if len(got) != len(native):
        return [diag("harness.shape", None, f"{len(got)} outputs; the reference has {len(native)}")]
    for i, (out, want) in enumerate(zip(got, native, strict=True)):
        if not isinstance(out, torch.Tensor):
            return [diag("harness.shape", i, f"output {i} is a {type(out).__name__}, not a tensor")]
        others = [x for x in inst.inputs if isinstance(x, torch.Tensor)] + native
        if any(_overlaps(out, x) for x in others if x.numel() and out.numel()):
            problems.append(
                diag("harness.alias", i, f"output {i} shares memory with an input or with the reference's own output")
            )
        elif out.shape != want.shape or out.dtype != want.dtype:
            problems.append(
                diag(
                    "harness.shape",
                    i,
                    f"output {i} is {out.dtype} {list(out.shape)}; the reference's is {want.dtype} {list(want.shape)}",
                )
            )
    for i, (now, before) in enumerate(zip(inst.inputs, pristine, strict=True)):
        if isinstance(now, torch.Tensor) and not torch.equal(_bits(now), _bits(before)):
            changed = int((_bits(now) != _bits(before)).sum())
            problems.append(
                Diagnostic(
                    "harness.input-mutated",
                    "error",
                    None,
                    f"input {i} changed during the run ({changed} of {now.numel()} elements)",
                    "a kernel may only write its outputs",
                    counterexample=where,
                )
            )
    if problems:
        return problems
    refs = reference_outputs(inst)
    for i, ref in enumerate(refs):
        if ref.is_floating_point() and not bool(torch.isfinite(ref).all()):
            from agent.tasks.task import _error

            raise _error(
                "task.reference",
                f"the reference's output {i} holds NaN or Inf (seed {seed}): no candidate can be checked against it",
                task.reference_file,
                hint="draw inputs for which the reference is finite",
            )
    names = getattr(candidate, "out_names", []) or [f"output {i}" for i in range(len(got))]
    for i, (out, ref) in enumerate(zip(got, refs, strict=True)):
        name = names[i] if i < len(names) else f"output {i}"
        problem = _compare(task, inst, name, out, ref, native[i], verdict)
        if problem is not None:
            rule, message, extra = problem
            problems.append(diag(rule, i, f"output `{name}`: {message}", extra=extra))
    return problems


def _compare(task, inst: Instance, name: str, out, ref, native, verdict: Verdict):
    import torch

    out = out.detach().cpu()
    ref = ref.detach().cpu()
    how = task.compare.get(name, "close" if out.is_floating_point() else "exact")
    if out.is_floating_point():
        bad = ~torch.isfinite(out)
        if bad.any():
            first = [int(v) for v in torch.nonzero(bad)[0]]
            nan = torch.isnan(out)
            rule = "harness.unwritten" if nan.all() else "harness.nan"
            what = "NaN (never written, or computed)" if nan[tuple(first)] else "Inf"
            return (
                rule,
                f"{int(bad.sum())} of {out.numel()} elements are NaN or Inf; the first at {first} is {what}",
                {"index": first},
            )
    rtol, atol = TOLERANCES.get(str(out.dtype).removeprefix("torch."), (0.0, 0.0))
    rtol, atol = task.tolerance.get("rtol", rtol), task.tolerance.get("atol", atol)
    if how.startswith("reference.py:"):
        fn = getattr(task.module, how.split(":", 1)[1])
        precision = ref.dtype if ref.is_floating_point() else torch_dtype(task.reference_precision)
        inputs = [
            x.detach().cpu().to(precision) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in inst.inputs
        ]
        message = fn(inputs, out.to(precision) if out.is_floating_point() else out, ref, rtol, atol)
        return None if message is None else ("harness.mismatch", str(message), {})
    if how == "exact" or not out.is_floating_point():
        if out.is_floating_point():
            diff = out.to(ref.dtype) != ref
        else:
            diff = out.to(torch.int64) != ref.to(torch.int64)
        if diff.any():
            first = [int(v) for v in torch.nonzero(diff)[0]]
            return (
                "harness.mismatch",
                f"{int(diff.sum())} of {out.numel()} elements differ; the first at {first}: got {out[tuple(first)].item()}, want {ref[tuple(first)].item()}",
                {"index": first},
            )
        verdict.max_error[name] = 0.0
        return None
    got = out.to(ref.dtype)
    scale = float(torch.sqrt(torch.mean(ref * ref))) if ref.numel() else 0.0
    err = (got - ref).abs()
    # PyTorch's own result in the task's dtype sets a floor on the absolute allowance: a kernel
    # is never asked to be more accurate than twice the worst error of the reference model run
    # in that dtype (bf16 attention rounds its probabilities; so does every fast kernel).
    baseline = float((native.detach().cpu().to(ref.dtype) - ref).abs().max()) if native.numel() else 0.0
    if not math.isfinite(baseline):
        baseline = 0.0
    absolute = max(atol * scale, 2 * baseline)
    allowed = rtol * ref.abs() + absolute
    ratio = err / torch.clamp(allowed, min=torch.finfo(ref.dtype).tiny)
    worst = float(ratio.max()) if ratio.numel() else 0.0
    verdict.max_error[name] = max(verdict.max_error.get(name, 0.0), worst)
    bad = err > allowed
    if bad.any():
        index = [int(v) for v in torch.nonzero(ratio == ratio.max())[0]]
        at = tuple(index)
        return (
            "harness.mismatch",
            f"{int(bad.sum())} of {out.numel()} elements differ beyond rtol {rtol:g} and an absolute {absolute:.3g} "
            f"(atol {atol:g} x rms {scale:.3g}, or twice PyTorch's own worst error in {out.dtype}, {baseline:.3g}); "
            f"the worst at {index}: got {got[at].item():.6g}, want {ref[at].item():.6g}",
            {"index": index, "count": int(bad.sum())},
        )
    return None


def run_error(err: KirError) -> list[Diagnostic]:
    return list(err.diagnostics)
