"""The correctness protocol: what it takes for a candidate to be called correct.

The protocol runs in the checker; the candidate runs elsewhere (its own process, see
`agent.harness.sandbox`) and only ever sees copies of the inputs, as raw bytes. For each of
several seeds (fresh ones unless given), and then once more on other shapes the task allows
(its `vary` rule, drawn from the last seed; for a KIR program only shapes its `where` clause
admits):

1. make the instance (inputs with both signs, never all zeros) and keep bitwise copies;
2. compute, before the candidate runs, the model's outputs in the task's dtype (the shapes
   and dtypes to produce, and PyTorch's own error) and the reference in higher precision;
3. send the candidate the inputs (a KIR program: every argument bound, its outputs poisoned:
   NaN; integers alternate between their extremes across seeds) and receive what it produced;
4. reject outputs of another number, shape or dtype, outputs that share memory with an input
   (as the candidate's process saw it), inputs that changed (bitwise), parameters a KIR program
   changed, NaN or Inf anywhere in an output, and every element that differs from the
   reference: `|out - ref| <= rtol * |ref| + max(atol * rms(ref), 2 * e)` per element, with
   `e` the worst error of PyTorch's own result in the task's dtype, for floating outputs
   (tolerances by dtype, overridable per task), equality for integer ones, or the task's own
   comparison for outputs whose answer is not unique.

A failure is a `Diagnostic` (`harness.mismatch`, `harness.nan`, `harness.unwritten`,
`harness.input-mutated`, `harness.parameter-mutated`, `harness.alias`, `harness.shape`) at the
program's output argument, with the seed (and the varied shape), the worst element and the
counts in its counterexample. A candidate that cannot be judged on its outputs (it raised,
crashed, ran out of time or memory) raises `CandidateFailed`.

`check` takes either a `Remote` (a candidate process) or a candidate object (`KirRun`,
`PythonRun`, `ModuleRun`), which it runs through `LocalRunner`: the same requests and bytes in
this process, for trusted programs (the suite's own, in tests). Only the remote one is
separated from the checker.
"""

from __future__ import annotations

import math
import random
import secrets
from dataclasses import dataclass, field
from typing import Any

from agent.harness.candidate import Host, KirRun, ModuleRun, PythonRun
from agent.harness.failure import CandidateFailed
from agent.harness.instance import Instance, make_instance, native_outputs, reference_outputs, release, torch_dtype
from kir.diagnostics import Diagnostic, KirError, Span

__all__ = ["CandidateFailed", "KirRun", "LocalRunner", "ModuleRun", "PythonRun", "Remote", "Verdict", "check"]

# rtol, atol (atol in units of the reference's root mean square)
TOLERANCES = {
    "float64": (1e-9, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (5e-3, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}
MESSAGE_SLACK = 1 << 20


@dataclass
class Verdict:
    ok: bool
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    max_error: dict[str, float] = field(default_factory=dict)  # output -> worst error / tolerance
    varied: dict[str, Any] | None = None  # {"seed", "shape"} of the round on other shapes
    cycles: int | None = None  # mtia-sim: the simulated cycles of the last run at the preset's shape
    # outputs of the reference that say little about a candidate: constant in every round, or the
    # same for the inputs of every seed (output name -> why); the check passes, the task is weak
    degenerate: dict[str, str] = field(default_factory=dict)
    # per output, what each round's reference was: (constant value or None, a digest of it)
    _seen: dict[int, list[tuple[float | None, str]]] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seeds": self.seeds,
            "max_error": self.max_error,
            "varied": self.varied,
            "degenerate": self.degenerate,
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


# ---- the two ways of reaching a candidate ----


class LocalRunner:
    """A trusted candidate object served in this process, through the same requests and bytes
    as a candidate process."""

    cycles: int | None = None
    reply_times: list[float] = []

    def __init__(self, runnable, device: str = "cpu"):
        import time

        self._clock = time.monotonic
        self.runnable = runnable
        self.kind = runnable.kind
        self.program = runnable.program if self.kind == "kir" else None
        self.params = runnable.params if self.kind == "kir" else {}
        self.host = Host(runnable, device)

    def request(self, header: dict[str, Any], payloads: list | None = None, *, limit: int, replies: int = 1):
        # the bytes are copied, as a pipe would: the candidate never holds the checker's tensors
        answers = self.host.handle(header, [bytearray(memoryview(p).cast("B")) for p in payloads or []])
        self.reply_times = [self._clock()] * replies
        return [(h, [bytearray(memoryview(p).cast("B")) for p in data]) for h, data in answers[:replies]]


class Remote:
    """A candidate process (`sandbox.CandidateProcess`) already loaded, with what the checker
    knows of it: its kind, and for a KIR program the program it parsed itself."""

    cycles: int | None = None

    def __init__(self, process, kind: str, program=None, params: dict[str, int] | None = None):
        self.process, self.kind, self.program, self.params = process, kind, program, dict(params or {})

    def request(self, header: dict[str, Any], payloads: list | None = None, *, limit: int, replies: int = 1):
        return self.process.request(header, payloads, limit=limit, replies=replies)

    @property
    def reply_times(self) -> list[float]:
        """When each answer of the last request arrived (the checker's clock)."""
        return self.process.reply_times


def runner_of(candidate, device: str):
    return candidate if isinstance(candidate, LocalRunner | Remote) else LocalRunner(candidate, device)


def error_of(answer: dict[str, Any], stage: str = "run", file: str | None = None) -> CandidateFailed | None:
    """The `CandidateFailed` an error answer stands for (None for an answer without one). What
    the candidate says is wrapped in the checker's own rules: it can fail itself, never pass."""
    err = answer.get("error")
    if err is None:
        return None
    if not isinstance(err, dict):
        err = {"kind": "python", "message": str(err)[:2000]}
    if err.get("kind") == "kir":
        diags = []
        for d in err.get("diagnostics") or []:
            try:
                diags.append(Diagnostic.from_json(d))
            except (KeyError, TypeError, ValueError):
                continue
        if diags:
            return CandidateFailed(stage, diags)
    kind = str(err.get("type", "Error"))[:100]
    message = f"{kind}: {str(err.get('message', ''))[:2000]}"
    if err.get("oom"):
        rule, hint = "harness.out-of-memory", "the candidate's memory is limited (the job's `memory_mb`)"
    else:
        rule, hint = "harness.candidate-error", ""
    line = err.get("line")
    span = (
        Span(line, 1, line, 2, file)
        if file and isinstance(line, int) and not isinstance(line, bool) and line > 0
        else None
    )
    return CandidateFailed(
        stage, [Diagnostic(rule, "error", span, message, hint)], str(err.get("traceback", ""))[-4000:]
    )


# ---- the protocol ----


def poisoned_like(t, round_: int):
    import torch

    if t.is_floating_point():
        return torch.full_like(t, float("nan"))
    if t.dtype == torch.bool:
        return torch.full_like(t, round_ % 2 == 0)
    info = torch.iinfo(t.dtype)
    return torch.full_like(t, info.min if round_ % 2 == 0 else info.max)


def _bits(t):
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        return t
    return t.reshape(-1).view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _same_bits(a, b) -> bool:
    import torch

    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(_bits(a), _bits(b)))


def output_names(program, task, count: int) -> list[str]:
    if program is None:
        return [f"output {i}" for i in range(count)]
    if task.bind:
        by_index = {int(b.index): name for name, b in task.bind.items() if b.kind == "outputs"}
        return [by_index.get(i, f"output {i}") for i in range(count)]
    from agent.harness.backends import kernel_args

    return [name for name, t in kernel_args(program) if t.is_out]


def _span(program, name: str | None) -> Span | None:
    if program is None:
        return None
    return program.arg_spans.get(name) if name else program.span()


def check(
    task,
    candidate,
    preset: str = "test",
    *,
    seeds: list[int] | None = None,
    rounds: int = 3,
    device: str = "cpu",
    vary: bool = True,
) -> Verdict:
    """Run the protocol; the verdict holds every failure found (it stops at the first round
    that fails). A candidate that cannot be judged raises `CandidateFailed`; errors of the
    reference are `TaskError`."""
    runner = runner_of(candidate, device)
    seeds = list(seeds) if seeds else [secrets.randbelow(2**31) for _ in range(rounds)]
    verdict = Verdict(True, seeds=seeds)
    plan: list[tuple[int, dict | None]] = [(s, None) for s in seeds]
    if vary and task.vary and seeds:
        shape = draw_shape(task, runner, preset, seeds[-1], device)
        if shape is not None:
            verdict.varied = {"seed": seeds[-1], "shape": shape}
            plan.append((seeds[-1], shape))
    for round_, (seed, shape) in enumerate(plan):
        problems = _one_round(task, runner, preset, seed, round_, device, verdict, shape)
        if problems:
            verdict.ok = False
            verdict.diagnostics.extend(problems)
            break
        if shape is None:
            # the simulated time at the preset's shape (a varied round runs at another)
            verdict.cycles = runner.cycles
    if verdict.cycles is None:
        verdict.cycles = runner.cycles
    if verdict.ok:
        _degenerate(verdict, len([p for p in plan if p[1] is None]))
    return verdict


def _fingerprint(ref) -> tuple[float | None, str]:
    """(the value of a constant output, else None; a digest of its values)."""
    import hashlib

    import torch

    flat = ref.detach().reshape(-1)
    constant = None
    if flat.numel() and bool((flat == flat[0]).all()):
        constant = float(flat[0].to(torch.float64)) if flat.is_floating_point() else float(flat[0])
    raw = flat.to(torch.float64).cpu().numpy().tobytes() if flat.numel() else b""
    return constant, hashlib.sha256(raw).hexdigest()


def _degenerate(verdict: Verdict, rounds: int) -> None:
    """Outputs that every round's reference made constant, or the same from different inputs."""
    for i, seen in verdict._seen.items():
        if len(seen) < min(rounds, 2):
            continue
        if all(c is not None for c, _ in seen):
            values = sorted({c for c, _ in seen if c is not None})
            verdict.degenerate[f"output {i}"] = f"constant in every round ({', '.join(f'{v:g}' for v in values)})"
        elif len({d for _, d in seen}) == 1:
            verdict.degenerate[f"output {i}"] = "the same for the inputs of every seed: independent of the input"


def draw_shape(task, runner, preset: str, seed: int, device: str) -> dict[str, int] | None:
    """Other shapes for the last round: every `vary` variable drawn at once, else one at a time;
    for a KIR program only shapes its arguments and `where` admit (none: every draw is fixed by
    the program, and the round is left out)."""
    rng = random.Random(f"vary-{seed}")
    own = {k: v for k, v in task.variables(preset).items() if k in task.vary}
    draws = [task.draw_shape(rng) for _ in range(24)]
    draws += [task.draw_shape(rng, [name]) for name in task.vary for _ in range(8)]
    for shape in draws:
        if all(own.get(k) == v for k, v in shape.items()):
            continue
        if runner.kind != "kir" or _admits(task, runner, preset, seed, shape):
            return shape
    return None


def _admits(task, runner, preset: str, seed: int, shape: dict[str, int]) -> bool:
    from agent.harness.backends import bind
    from agent.tasks import TaskError
    from lowering.launch import bind_shapes

    try:
        inst = make_instance(task, preset, seed, "cpu", shape)
        outs = native_outputs(inst)
        tensors = bind(runner.program, task, inst.inputs, outs, inst.model)
        bind_shapes(runner.program, runner.params, tensors)
    except (KirError, TaskError):
        return False
    return True


def _one_round(task, runner, preset, seed, round_, device, verdict: Verdict, shape) -> list[Diagnostic]:
    import torch

    from agent.tasks.task import _error

    inst = make_instance(task, preset, seed, device, shape)
    # a KIR candidate is sent copies of the instance's inputs, which stay as they are; a Python
    # one is sent these host copies, and what comes back is held against them
    pristine = (
        list(inst.inputs)
        if runner.kind == "kir"
        else [x.detach().cpu().clone() if isinstance(x, torch.Tensor) else x for x in inst.inputs]
    )
    # kept where they were computed: the comparisons run on the task's device
    native = native_outputs(inst)
    refs = reference_outputs(inst)
    release(device)
    for i, ref in enumerate(refs):
        if ref.is_floating_point() and not bool(torch.isfinite(ref).all()):
            raise _error(
                "task.reference",
                f"the reference's output {i} holds NaN or Inf (seed {seed}): no candidate can be checked against it",
                task.reference_file,
                hint="draw inputs for which the reference is finite",
            )
    if shape is None:
        for i, ref in enumerate(refs):
            verdict._seen.setdefault(i, []).append(_fingerprint(ref))
    where = {"seed": seed, "preset": preset, **({"shape": shape} if shape else {})}
    program = runner.program
    names = output_names(program, task, len(native))

    def diag(rule: str, i: int | None, message: str, hint: str = "", extra: dict | None = None) -> Diagnostic:
        span = _span(program, names[i] if i is not None and i < len(names) else None)
        return Diagnostic(rule, "error", span, message, hint, counterexample={**where, **(extra or {})})

    if runner.kind == "kir":
        got, problems = _run_kir(task, runner, inst, native, round_, diag)
    else:
        got, problems = _run_python(runner, inst, pristine, native, diag)
    if problems:
        return problems
    for i, (out, ref) in enumerate(zip(got, refs, strict=True)):
        problem = _compare(task, pristine, names[i], out, ref, native[i], verdict)
        if problem is not None:
            rule, message, extra = problem
            problems.append(diag(rule, i, f"output `{names[i]}`: {message}", extra=extra))
    return problems


def _limit(tensors) -> int:
    return 2 * sum(t.numel() * t.element_size() for t in tensors) + MESSAGE_SLACK


def _run_kir(task, runner, inst: Instance, native: list, round_: int, diag):
    """Bind, send every argument, and check what came back: (outputs, problems)."""
    import torch

    from agent.harness.backends import bind, sources
    from agent.harness.wire import Encoder, WireError, decode_tensor
    from lowering.launch import bind_shapes

    program = runner.program
    outputs = [poisoned_like(o, round_) for o in native]
    try:
        where_from = sources(program, task, len(inst.inputs) if task.bind else len(inst.tensors()), len(outputs))
        tensors = bind(program, task, inst.inputs, outputs, inst.model)
        bind_shapes(program, runner.params, tensors)
    except KirError as err:  # the program does not fit the task: its error, found before it runs
        raise CandidateFailed("run", list(err.diagnostics)) from None
    sent = {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}
    enc = Encoder()
    header = {"op": "run", "args": {name: enc.tensor(t) for name, t in sent.items()}}
    ((answer, payloads),) = runner.request(header, enc.payloads, limit=_limit(sent.values()))
    failed = error_of(answer)
    if failed:
        raise failed
    if isinstance(answer.get("cycles"), int) and not isinstance(answer.get("cycles"), bool):
        inst_cycles = answer["cycles"]
    else:
        inst_cycles = None
    returned = answer.get("args")
    if not isinstance(returned, dict) or set(returned) != set(sent):
        raise CandidateFailed("run", [diag("harness.protocol", None, "the candidate did not send back every argument")])
    got: dict[str, torch.Tensor] = {}
    for name, meta in returned.items():
        try:
            t = decode_tensor(meta, payloads)
        except WireError as err:
            raise CandidateFailed("run", [diag("harness.protocol", None, f"argument `{name}`: {err}")]) from None
        if t.shape != sent[name].shape or t.dtype != sent[name].dtype:
            raise CandidateFailed("run", [diag("harness.protocol", None, f"argument `{name}` came back reshaped")])
        got[name] = t
    runner.cycles = inst_cycles if inst_cycles is not None else runner.cycles
    problems = []
    for name, (kind, index) in where_from.items():
        if kind == "outputs" or _same_bits(got[name], sent[name]):
            continue
        changed = int((_bits(got[name]) != _bits(sent[name])).sum())
        if kind == "model":
            problems.append(
                Diagnostic(
                    "harness.parameter-mutated",
                    "error",
                    _span(program, name),
                    f"the model's `{index}` (argument `{name}`) changed during the run ({changed} of {got[name].numel()} elements)",
                    "a kernel may only write its outputs",
                    counterexample={"seed": inst.seed},
                )  # fmt: skip
            )
        else:
            problems.append(
                Diagnostic(
                    "harness.input-mutated",
                    "error",
                    _span(program, name),
                    f"input {index} (argument `{name}`) changed during the run ({changed} of {got[name].numel()} elements)",
                    "a kernel may only write its outputs",
                    counterexample={"seed": inst.seed},
                )  # fmt: skip
            )
    out_of = {int(index): name for name, (kind, index) in where_from.items() if kind == "outputs"}
    result = [got[out_of[i]].reshape(native[i].shape) for i in range(len(native))]
    return result, problems


def _run_python(runner, inst: Instance, pristine: list, native: list, diag):
    import torch

    from agent.harness.wire import Encoder, WireError, decode_tensor, decode_value

    enc = Encoder()
    # one model per seed and shape: the varied round builds its own, for its own shapes
    key = f"{inst.seed}:{sorted(inst.shape.items())}"
    header: dict[str, Any] = {"op": "run", "key": key, "inputs": [enc.value(x) for x in pristine]}
    if runner.kind == "module":
        header["model"] = {
            "init": enc.value(list(inst.init)),
            "rng": enc.tensor(inst.rng_state),
            "dtype": str(torch_dtype(inst.task.dtype)).removeprefix("torch.") if inst.task.dtype else None,
            "mode": inst.task.mode,
        }
    tensors = [x for x in pristine if isinstance(x, torch.Tensor)]
    ((answer, payloads),) = runner.request(header, enc.payloads, limit=_limit([*tensors, *native]))
    failed = error_of(answer)
    if failed:
        raise failed
    outs = answer.get("outputs")
    if not isinstance(outs, list):
        raise CandidateFailed("run", [diag("harness.protocol", None, "the candidate sent no outputs")])
    if len(outs) != len(native):
        return [], [diag("harness.shape", None, f"{len(outs)} outputs; the reference has {len(native)}")]
    got, problems = [], []
    for i, (meta, want) in enumerate(zip(outs, native, strict=True)):
        try:
            out = decode_tensor(meta, payloads)
        except WireError as err:
            return [], [diag("harness.shape", i, f"output {i} is not a tensor that can be read: {err}")]
        if out.shape != want.shape or out.dtype != want.dtype:
            problems.append(
                diag(
                    "harness.shape",
                    i,
                    f"output {i} is {out.dtype} {list(out.shape)}; the reference's is {want.dtype} {list(want.shape)}",
                )  # fmt: skip
            )
        got.append(out)
    alias = answer.get("alias") or []
    for i in sorted({i for i in alias if isinstance(i, int) and 0 <= i < len(native)}):
        problems.append(diag("harness.alias", i, f"output {i} shares memory with an input"))
    returned = answer.get("inputs")
    if isinstance(returned, list) and len(returned) == len(pristine):
        for i, (meta, before) in enumerate(zip(returned, pristine, strict=True)):
            if not isinstance(before, torch.Tensor):
                continue
            try:
                now = decode_value(meta, payloads)
            except WireError:
                now = None
            if not isinstance(now, torch.Tensor) or not _same_bits(now, before):
                changed = (
                    int((_bits(now) != _bits(before)).sum())
                    if isinstance(now, torch.Tensor) and now.shape == before.shape and now.dtype == before.dtype
                    else before.numel()
                )
                problems.append(
                    Diagnostic(
                        "harness.input-mutated",
                        "error",
                        None,
                        f"input {i} changed during the run ({changed} of {before.numel()} elements)",
                        "a kernel may only write its outputs",
                        counterexample={"seed": inst.seed},
                    )  # fmt: skip
                )
    return got, problems


COMPARE_CHUNK = 1 << 22  # elements of an output compared at once


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The index in `shape` of a row-major flat position."""
    index = []
    for d in reversed(shape):
        index.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return list(reversed(index))


def _compare(task, inputs: list, name: str, out, ref, native, verdict: Verdict):
    import torch

    # on the reference's device (a GPU compares a bench-size output in milliseconds, a host in
    # seconds); the candidate's output arrives in host memory
    ref = ref.detach()
    out = out.detach().to(ref.device)
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
        widened = [
            x.detach().to(ref.device, precision) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in inputs
        ]
        message = fn(widened, out.to(precision) if out.is_floating_point() else out, ref, rtol, atol)
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
    # in chunks of the flattened tensors, so that the comparison's temporaries (the widened
    # output, the errors, the allowances) stay a few chunks in size whatever the output's
    flat_ref, flat_out, flat_nat = ref.reshape(-1), out.reshape(-1), native.detach().reshape(-1)
    n = flat_ref.numel()
    spans = [(i, min(i + COMPARE_CHUNK, n)) for i in range(0, n, COMPARE_CHUNK)]
    squares = sum(float((flat_ref[a:b] * flat_ref[a:b]).sum()) for a, b in spans)
    scale = math.sqrt(squares / n) if n else 0.0
    # PyTorch's own result in the task's dtype sets a floor on the absolute allowance: a kernel
    # is never asked to be more accurate than twice the worst error of the reference model run
    # in that dtype (bf16 attention rounds its probabilities; so does every fast kernel).
    baseline = 0.0
    if flat_nat.numel() == n:
        for a, b in spans:
            part = float((flat_nat[a:b].to(ref.device, ref.dtype) - flat_ref[a:b]).abs().max())
            baseline = max(baseline, part) if math.isfinite(part) else baseline
    absolute = max(atol * scale, 2 * baseline)
    worst, worst_at, count = -1.0, 0, 0
    tiny = torch.finfo(ref.dtype).tiny
    for a, b in spans:
        r = flat_ref[a:b]
        err = (flat_out[a:b].to(ref.dtype) - r).abs()
        allowed = rtol * r.abs() + absolute
        ratio = err / torch.clamp(allowed, min=tiny)
        peak = int(torch.argmax(ratio))
        if float(ratio[peak]) > worst:
            worst, worst_at = float(ratio[peak]), a + peak
        count += int((err > allowed).sum())
    worst = max(worst, 0.0)
    verdict.max_error[name] = max(verdict.max_error.get(name, 0.0), worst)
    if count:
        index = _unravel(worst_at, tuple(ref.shape))
        at = tuple(index)
        got = out[at].to(ref.dtype) if ref.dim() else out.to(ref.dtype)
        want = ref[at] if ref.dim() else ref
        return (
            "harness.mismatch",
            f"{count} of {out.numel()} elements differ beyond rtol {rtol:g} and an absolute {absolute:.3g} "
            f"(atol {atol:g} x rms {scale:.3g}, or twice PyTorch's own worst error in {out.dtype}, {baseline:.3g}); "
            f"the worst at {index}: got {got.item():.6g}, want {want.item():.6g}",
            {"index": index, "count": count},
        )
    return None
