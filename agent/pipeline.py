"""The one path of a candidate: `evaluate(candidate, ..., until=stage) -> Record`.

    parse -> verify -> cost -> lower -> compile -> run

Each stage can stop the candidate; what it says is diagnostics (one type, `kir.diagnostics`)
and the figures it produced, all in one frozen `Record` that serializes to JSON and back
unchanged (`Record.to_json`, `Record.from_json`). `kir check`, `cost`, `lower`, `compile` and
`run` are this function with a different `until`; so is what the agent will send through it.

A verifier error stops the candidate before any compiler or run: a program that `kir check`
rejects is never compiled, and the Record carries the same diagnostics `kir check` prints.
`cost` may take the compiler's registers and shared memory instead of the model's estimates
(`cost_from_compile`): the candidate is then compiled before it is costed.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, cast

from agent.harness.isolate import run_job
from costmodel.model import CostModel
from kir.check import op_count, read_source, unique_sorted, unknown_params
from kir.diagnostics import Diagnostic, KirError
from kir.dialect.structure import TARGETS
from kir.parser import parse
from kir.program import Program
from lowering import lower, targets
from lowering.compile import compile_program
from lowering.emit.base import program_level
from verifier.check import check_program, read_fixes_held
from verifier.facts import CHECKS

STAGES = ("parse", "verify", "cost", "lower", "compile", "run")
SCHEMA = "kir.record/1"


@dataclass(frozen=True)
class Candidate:
    """A program plus the values of its compile-time parameters. `key` identifies it: the
    sha256 of its canonical text (comments left out) and of the parameters that differ from
    the program's defaults, so that two spellings of one program with one binding are one
    candidate. Text that does not parse is identified by its bytes."""

    text: str
    params: tuple[tuple[str, int], ...] = ()
    file: str = "<candidate>"
    program: Program | None = field(default=None, compare=False, repr=False)  # parsed already

    @classmethod
    def from_file(cls, path: str | Path, params: Mapping[str, int] | None = None) -> Candidate:
        """The candidate in a file (`io.read` or `syntax.encoding` as a `KirError`)."""
        return cls(read_source(path), tuple(sorted((params or {}).items())), str(path))

    @classmethod
    def from_program(cls, program: Program, params: Mapping[str, int] | None = None) -> Candidate:
        return cls(program.text(), tuple(sorted((params or {}).items())), program.file, program)

    def parsed(self) -> Candidate:
        """This candidate with its program parsed (a `KirError` where the text does not parse)."""
        if self.program is not None:
            return self
        return replace(self, program=parse(self.text, file=self.file))

    @property
    def param_values(self) -> dict[str, int]:
        return dict(self.params)

    def key(self, program: Program | None = None) -> str:
        program = program or self.program
        if program is None:
            return "text:" + hashlib.sha256(self.text.encode()).hexdigest()
        bound = {k: v for k, v in self.params if program.params.get(k) != v}
        digest = hashlib.sha256(program.content_hash().encode())
        digest.update(json.dumps(bound, sort_keys=True).encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class Record:
    """What one candidate came to. `stage` is the stage that stopped it, or the last one asked
    for; `ok` says it got through every stage asked for without an error. The figures are plain
    JSON data: `estimate` (`costmodel.Estimate.to_json`), `lowered` (backend, entry, source),
    `report` (`lowering.CompileReport.to_json`), `verdict` (the harness's record: correctness,
    seeds, worst error per output, timings where it timed). `seconds` is the wall time of each
    stage that ran."""

    candidate: str
    file: str
    stage: str
    ok: bool
    until: str
    kernel: str | None = None
    target: str | None = None
    backend: str | None = None
    task: str | None = None
    preset: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    ops: int | None = None
    diagnostics: tuple[Diagnostic, ...] = ()
    estimate: dict[str, Any] | None = None
    lowered: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    seconds: tuple[tuple[str, float], ...] = ()

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "diagnostics":
                value = [d.to_json() for d in value]
            elif f.name in ("params", "seconds"):
                value = dict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} record: schema {data.get('schema')!r}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name == "diagnostics":
                value = tuple(Diagnostic.from_json(d) for d in value)
            elif f.name in ("params", "seconds"):
                value = tuple(value.items())
            values[f.name] = value
        return cls(**values)


RECORD_FIELDS = ("schema", *(f.name for f in fields(Record)))  # the keys of `Record.to_json`, in order


# `evaluate` may be called from several threads (kir bench checks rows in parallel): the stages
# that work in this process take turns, since z3's context and the IR are not thread-safe; a run
# waits on a child process and holds nothing.
_IN_PROCESS = threading.RLock()


@dataclass
class _Run:
    """The Record being filled in, stage by stage."""

    candidate: Candidate
    until: str
    values: dict[str, Any] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    stage: str = "parse"

    def record(self, program: Program | None) -> Record:
        diags = unique_sorted(self.diagnostics)
        ok = self.stage == self.until and not any(d.is_error for d in diags)
        if self.stage == "run" and self.values.get("verdict") is not None:
            ok = ok and bool(self.values["verdict"].get("ok"))
        return Record(
            candidate=self.candidate.key(program),
            file=self.candidate.file,
            stage=self.stage,
            ok=ok,
            until=self.until,
            params=self.candidate.params,
            diagnostics=tuple(diags),
            seconds=tuple(self.seconds.items()),
            **self.values,
        )

    def step(self, stage: str, work) -> bool:
        """Run one stage; False when it (or an earlier one) stopped the candidate."""
        self.stage = stage
        start = time.perf_counter()
        try:
            if stage == "run":  # a wait on the harness's child process: other threads go on
                work()
            else:
                with _IN_PROCESS:
                    work()
        except KirError as err:
            self.diagnostics += err.diagnostics
        except Exception as err:  # a stage's bug is the candidate's record, not the caller's crash
            self.diagnostics.append(
                Diagnostic(
                    "internal.error",
                    "error",
                    None,
                    f"internal error in the {stage} stage: {type(err).__name__}: {err}",
                    "this is a bug in KIR; please report it with the input",
                )
            )
        self.seconds[stage] = time.perf_counter() - start
        return not any(d.is_error for d in self.diagnostics)


def evaluate(
    candidate: Candidate,
    *,
    until: str = "verify",
    target: str | None = None,
    backend: str | None = None,
    task=None,
    preset: str | None = None,
    shapes: Mapping[str, int] | None = None,
    cost_model: CostModel | None = None,
    with_cost: bool = False,
    cost_from_compile: bool = False,
    seeds: list[int] | None = None,
    timeout: float = 600.0,
    device: str | None = None,
    harness: Mapping[str, Any] | None = None,
) -> Record:
    """Take `candidate` through the stages up to `until` (one of `STAGES`) and say what came of it.

    `target` is what it is verified and costed for (default: the kernel's declared target; a
    chip table name such as h100 for the cost) and compiled for (default: the declared target
    where the backend compiles for it, else the backend's first). `backend` is the emitter for
    lower and compile, and the harness backend for run. `task` (an `agent.tasks.Task`) gives
    the run its reference and the cost its shapes under `preset`; `shapes` override them.

    The cost stage runs when `until` is "cost" or `with_cost` asks for it on the way to a later
    stage; `cost_from_compile` compiles first and takes the compiler's registers, shared memory
    and spills. A run (`until="run"`) is verified first and then handed to the harness, whose
    checker lowers and compiles the candidate in its own process; `harness` adds fields to the
    harness's job (`rounds`, `vary`, `warm`, `time`: agent/harness/worker.py)."""
    if until not in STAGES:
        raise ValueError(f"no stage {until!r}: one of {', '.join(STAGES)}")
    run = _Run(candidate, until)
    state: dict[str, Any] = {}

    def parse_stage() -> None:
        try:
            program = candidate.program or parse(candidate.text, file=candidate.file)
        except KirError as err:  # its fixes checked by the rules, as a verified program's are
            raise KirError(read_fixes_held(candidate.text, candidate.file, err.diagnostics)) from None
        state["program"] = program
        run.values.update(kernel=" + ".join(k.name for k in program.kernels()))  # several: in launch order
        unknown = unknown_params(program, candidate.param_values)
        if unknown:
            raise KirError(unknown)
        state["bound"] = program.with_params(**candidate.param_values) if candidate.params else program
        run.values["ops"] = op_count(program)

    if not run.step("parse", parse_stage):
        return run.record(state.get("program"))
    program: Program = state["program"]
    params = candidate.param_values
    declared = program.kernel.target.data
    run.values.update(target=target or declared, backend=backend, preset=preset)
    if task is not None:
        run.values["task"] = task.name
    if until == "parse":
        return run.record(program)

    # A cost on another chip is a what-if of the program as written (the model's own hints say
    # what does not fit there): verified for its declared target, as are a chip table (h100)
    # and an arch only a compiler knows (sm_90a).
    verify_for = target if target in TARGETS and until != "cost" else None
    if not run.step("verify", lambda: run.diagnostics.extend(check_program(state["bound"], verify_for))):
        return run.record(program)
    if until == "verify":
        return run.record(program)

    all_shapes = {**_task_shapes(task, preset), **(shapes or {})}
    cost_shapes = {k: v for k, v in all_shapes.items() if k not in program.params}
    compiled: dict[str, Any] = {}

    def compile_for_cost() -> None:
        chosen = target or declared
        # the target that reports registers and shared memory for this level on this arch, as
        # the targets declare it (lowering.targets)
        cost_backend = targets.cost_compiler(chosen, program_level(program))
        if cost_backend is None:
            note = f"--compile: no compiler reports registers for this program on {chosen}; the model's estimates stand"
            run.diagnostics.append(Diagnostic("cost.compile", "hint", program.span(), note))
            return
        compiled["report"] = _take_report(
            run, program, compile_program(program, cost_backend, chosen, params, symbols=cost_shapes)
        )

    def cost_stage() -> None:
        # The verifier's answers (what another target lacks, parameters that leave no shapes):
        # the cost model asks them of what it is handed, as it does not import the verifier.
        model = cost_model or CostModel()
        est = model.predict(program, target, params, cost_shapes, report=compiled.get("report"), checks=CHECKS)
        run.values["estimate"] = est.to_json()
        run.diagnostics.extend(est.hints)

    if until == "cost" or with_cost:
        if cost_from_compile and not run.step("compile", compile_for_cost):
            return run.record(program)
        if not run.step("cost", cost_stage) or until == "cost":
            return run.record(program)

    if until == "run":  # the checker lowers and compiles in its own process
        job = {"preset": preset, "seeds": seeds, **(harness or {})}
        run.step("run", lambda: _run_stage(run, candidate, backend, task, job, timeout, device))
        return run.record(program)

    def lower_stage() -> None:
        if backend is None:
            raise KirError(Diagnostic("cli.backend", "error", None, "lowering needs a backend"))
        if program.is_multi:  # each kernel lowered on its own, in launch order
            kernels = [
                (k, lower(k, backend, {n: v for n, v in params.items() if n in k.params})) for k in program.kernels()
            ]
            run.values["lowered"] = {
                "backend": backend,
                "entry": kernels[0][1].entry,
                "source": "\n\n".join(f"# kernel {k.name}\n{low.source}" for k, low in kernels),
                "kernels": [
                    {"kernel": k.name, "entry": low.entry, "grid": [str(g) for g in low.grid]} for k, low in kernels
                ],
            }
            for _, low in kernels:
                run.diagnostics.extend(low.diagnostics)
            return
        lowered = lower(program, backend, params)
        run.values["lowered"] = {
            "backend": backend,
            "entry": lowered.entry,
            "source": lowered.source,
            # what the launch takes beside the source: the same source runs other tiles, warps
            # or grids (Triton's constexpr parameters and num_warps)
            "launch": {
                "params": dict(sorted(lowered.params.items())),
                "grid": [str(g) for g in lowered.grid],
                "num_warps": lowered.num_warps,
                "options": {k: lowered.options[k] for k in sorted(lowered.options)},
            },
        }
        run.diagnostics.extend(lowered.diagnostics)  # the lowering passes' warnings

    if until == "lower":  # a compile lowers on its own, and reports a refusal as a failed report
        run.step("lower", lower_stage)
        return run.record(program)

    def compile_stage() -> None:
        if backend is None:
            raise KirError(Diagnostic("cli.backend", "error", None, "compiling needs a backend"))
        arch = compile_target(backend, target, declared)
        run.values["target"] = arch
        report = _take_report(run, program, compile_program(program, backend, arch, params, symbols=dict(all_shapes)))
        run.values["target"] = report.arch

    run.step("compile", compile_stage)
    return run.record(program)


def compile_target(backend: str, target: str | None, declared: str) -> str:
    """What a compile is for: `target`, checked against what the backend compiles for; without
    it the kernel's declared target where the backend compiles for it, else the backend's own
    default one (hip: gfx90a, mtia-sim: mtia-sim)."""
    chosen = targets.target(backend, "cli.backend")
    if chosen.compiler is None:
        hint = f"one of {', '.join(targets.compiling())}"
        raise KirError(Diagnostic("cli.backend", "error", None, f"no compiler for '{backend}'", hint))
    allowed = chosen.archs
    if target is None:
        return declared if declared in allowed else cast(str, chosen.default_arch)  # a compiler has its archs
    if target not in allowed:
        raise KirError(
            Diagnostic("cli.target", "error", None, f"{backend} compiles for {', '.join(allowed)}, not {target}")
        )
    return target


def _take_report(run: _Run, program: Program, report):
    """A compile report into the Record (its texts cut to 4,000 characters), its diagnostics
    into the Record's, and an error where it failed without saying why."""
    data = report.to_json(max_text=4000)
    data.pop("diagnostics")
    run.values["report"] = data
    run.diagnostics.extend(report.diagnostics)
    if not report.ok and not any(d.is_error for d in report.diagnostics):
        message = f"the {report.backend} compile failed: {report.log[-300:]}"
        run.diagnostics.append(Diagnostic("lower.compile", "error", program.span(), message))
    return report


def _task_shapes(task, preset: str | None) -> dict[str, int]:
    """The integer shape values of a task's preset (none for the reference's own shapes)."""
    if task is None or preset is None:
        return {}
    return task.shape_values(preset)


def _run_stage(run: _Run, candidate: Candidate, backend, task, job: dict[str, Any], timeout, device) -> None:
    """The harness's correctness protocol in a checker process of its own (`agent.harness`):
    the candidate's text (the one just verified, so the checker does not verify it again) and
    parameters go to the checker, never its objects."""
    if task is None:
        raise KirError(Diagnostic("cli.usage", "error", None, "a run needs a task (its reference and shapes)"))
    _, runtime = targets.runtime(backend, "cli.backend")  # with the nearest name where there is none
    job = {
        **job,
        "task": str(task.folder if task.name == task.folder.name else task.folder / f"{task.name}.py"),
        "candidate": {"kind": "kir", "text": candidate.text, "backend": backend, "params": candidate.param_values},
        "device": device or runtime.device,
        "verify": False,
    }
    verdict = run_job(job, timeout=timeout)
    diags = [Diagnostic.from_json(d) for d in verdict.pop("diagnostics", [])]
    for i, d in enumerate(diags):
        if d.span is not None and d.span.file == "<input>":
            diags[i] = _in_file(d, candidate.file)
    run.values["verdict"] = verdict
    run.diagnostics.extend(diags)
    if not verdict.get("ok") and not any(d.is_error for d in diags):
        message = f"the harness stopped the candidate at {verdict.get('stage')}"
        run.diagnostics.append(Diagnostic("harness.failed", "error", None, message))


def _in_file(d: Diagnostic, file: str) -> Diagnostic:
    data = d.to_json()
    data["file"] = file
    return Diagnostic.from_json(data)
