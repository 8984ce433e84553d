"""The `kir` command, assembled: the language's commands (`kir.cli`), the verifier's
(`verifier.cli`), and the candidate pipeline's, declared here: `check`, `cost`, `lower`,
`compile` and `run` are `agent.pipeline.evaluate` up to their stage, and their `--json` prints
its Record (schema kir.record/1); `bench` is the suite runner.

`kir run FILE --task TASK --backend B`: the correctness protocol for one program against a
task, in a child process with a timeout. `kir bench [TASK...]`: the suite runner
(agent.harness.bench) with a progress bar, a table, and JSON and markdown results.

The command line is checked here before any work: the task exists, the preset is one of its
presets, the parameters are the program's, a GPU backend has a CUDA device. The task is loaded
with `agent.tasks.load_task`, which reads its task.toml and leaves reference.py to the process
that runs it (the harness's checker), so a reference that exits, hangs or patches things at
import cannot take the command down with it.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.util
import json
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Annotated, Any, NoReturn, cast

import typer

from agent.frontend import cli as frontend_cli
from agent.kb import cli as kb_cli
from agent.learn import cli as learn_cli
from agent.search import cli as search_cli
from agent.search import report_cli
from agent.serve import cli as serve_cli
from kir import cli as kcli
from kir.cli import (
    DEFAULT_PRESET,
    MAX_SEED,
    ArchAlias,
    BackendOpt,
    BackendsOpt,
    FileArg,
    JsonOpt,
    Outcome,
    OutputAlias,
    ParamOpt,
    PresetOpt,
    ShapeOpt,
    TargetOpt,
    TimeoutOpt,
    ToAlias,
    _emit,
    _guarded,
    _in_range,
    _merged,
    _one_of,
    _render,
    _specs,
    _writable,
    exit_code,
    usage,
)
from kir.diagnostics import Diagnostic, KirError
from lowering import targets as registry
from tactics import cli as tactics_cli
from verifier import cli as verifier_cli

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "tasks"


# ---- the vocabulary: the targets and runtimes of lowering/targets/ (lowering.targets) ---------------


def _vocabulary() -> dict[str, tuple[str, ...]]:
    """The names the flags take, from the target registry (which imports only the folders'
    declarations). A broken target folder (two of one name, one without a TARGET) is a usage
    error of the whole command, said before any other."""
    try:
        found = registry.targets()
    except KirError as err:
        _emit("\n".join(d.render() for d in err.diagnostics))
        raise SystemExit(2) from None
    runtimes = [(r, t) for t in found.values() for r in t.runtimes]
    archs = tuple(dict.fromkeys(a for t in found.values() for a in t.archs))
    return {
        "lower": tuple(t.name for t in found.values() if t.emitter),
        "compile": tuple(t.name for t in found.values() if t.compiler),
        "run": tuple(r.name for r, _ in runtimes),
        "gpu": tuple(r.name for r, _ in runtimes if r.device == "cuda"),
        "cpu": tuple(r.name for r, _ in runtimes if r.device == "cpu"),
        "archs": archs,
        "targets": (*kcli.TARGETS, *(a for a in archs if a not in kcli.TARGETS)),
    }


NAMES = _vocabulary()
# kir cost's --target also takes a chip table by name (kir/targets/*.toml; kir.targets.TARGET_TABLES
# maps a KIR target to its own): those that are not a KIR target's spelling.
_TABLES = Path(
    cast(str, cast(ModuleSpec, importlib.util.find_spec("kir.targets")).origin)
).parent  # found, not imported
CHIP_TABLES = tuple(sorted(p.stem for p in _TABLES.glob("*.toml") if p.stem.replace("_", "-") not in kcli.TARGETS))


def _or(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


kcli.set_help(
    target=f"The target: {', '.join(NAMES['targets'])} (cost also takes a chip table: {', '.join(CHIP_TABLES)}). "
    "Default: the kernel's declared target (compile: the backend's own when it cannot compile for that one).",
    backend=f"The backend: {_or(NAMES['compile'])} (lower, compile); {_or(NAMES['run'])} (run); "
    f"{_or(NAMES['gpu'])} (bench).",
)


def _missing(name: str) -> KirError:
    names = sorted(p.name for p in SUITE.iterdir() if (p / "reference.py").is_file()) if SUITE.is_dir() else []
    return KirError(
        Diagnostic("task.missing", "error", None, f"no task `{name}`", f"a task folder, or one of: {', '.join(names)}")
    )


def find_task(name: str):
    """A task by folder path, KernelBench file, or name in the suite (`agent.tasks.load_task`,
    which reads task.toml and leaves reference.py to the process that runs it); `task.missing`
    (a usage error) when there is none. A FIFO or a device named as the task is refused unread."""
    from agent.tasks import load_task

    path = Path(name)
    if not path.exists():
        path = SUITE / name
        if not (path / "reference.py").is_file():
            raise _missing(name)
    elif path.is_dir() and not (path / "reference.py").is_file():
        raise KirError(
            Diagnostic("task.missing", "error", None, f"no task at {name}: it has no reference.py", "a task folder")
        )
    elif not (path.is_dir() or path.is_file()):
        raise KirError(
            Diagnostic(
                "task.missing",
                "error",
                None,
                f"no task at {name}: it is not a folder or a .py file",
                "a task folder or a KernelBench .py file",
            )
        )
    return load_task(path)


def _scale(value: float | None) -> float | None:
    """--scale: a factor in (0, 1]."""
    if value is not None and not 0 < value <= 1:
        raise typer.BadParameter(f"{value} is not in (0, 1]")
    return value


def preset_of(task, given: str | None) -> str:
    """--preset, checked against the task's presets; without it `test`, or `default` (the
    reference's own shapes) for a task that has no `test` preset (a bare KernelBench file)."""
    from agent.tasks.task import SCALE_PREFIX

    known = ("default", *task.presets)
    if given is None:
        return DEFAULT_PRESET if DEFAULT_PRESET in task.presets else "default"
    if given.startswith(SCALE_PREFIX):
        task.preset(given)  # the scale checked: a TaskError otherwise
        return given
    if given not in known:
        raise KirError(
            Diagnostic(
                "cli.preset",
                "error",
                None,
                f"task `{task.name}` has no preset `{given}`",
                f"presets: {', '.join(known)}, or {SCALE_PREFIX}F (every size of the reference times F)",
            )
        )
    return given


def usage_record(file: str | None, until: str, diags: list[Diagnostic], stage: str = "usage", **values: Any):
    """The Record of a command line that stopped before the candidate was looked at."""
    from agent.pipeline import Record

    return Record(candidate="", file=file or "", stage=stage, ok=False, until=until, diagnostics=tuple(diags), **values)


def run_command(
    file: str, task_name: str, backend: str, preset: str | None, params: dict[str, int], seeds: list[int] | None,
    timeout: float, device: str | None,
) -> tuple[Any, str | None]:  # fmt: skip
    """(the Record of `evaluate(..., until="run")`, the program's source for rendering). Program
    parameters come from the task's entry for this file (if it is one of the task's programs),
    then from `params`. The Record says which preset ran."""
    from agent.pipeline import Candidate, evaluate

    if backend not in NAMES["run"]:
        diag = Diagnostic("cli.backend", "error", None, f"no backend `{backend}`", f"one of {', '.join(NAMES['run'])}")
        return usage_record(file, "run", [diag], backend=backend), None
    try:
        task = find_task(task_name)
        chosen = preset_of(task, preset)
    except KirError as err:
        is_usage = all(d.rule in ("task.missing", "cli.preset") for d in err.diagnostics)
        return usage_record(file, "run", err.diagnostics, "usage" if is_usage else "task", backend=backend), None
    merged: dict[str, int] = {}
    for spec in task.programs.values():
        if spec.file.resolve() == Path(file).resolve():
            merged.update(spec.params_for(chosen))
    merged.update(params)
    try:
        candidate = Candidate.from_file(file, merged)
    except KirError as err:
        return usage_record(file, "run", err.diagnostics, backend=backend, task=task.name, preset=chosen), None
    record = evaluate(
        candidate, until="run", backend=backend, task=task, preset=chosen, seeds=seeds, timeout=timeout, device=device
    )
    if record.stage == "parse" and any(d.rule == "cli.param" for d in record.errors):
        record = dataclasses.replace(record, stage="usage")  # a --param the program does not have
    return record, candidate.text


def describe(record, file: str, task: str, backend: str, preset: str) -> str:
    """A run's Record in one line for people."""
    verdict = record.verdict or {}
    if record.ok:
        m = verdict.get("metrics", {})
        worst = ", ".join(f"{k} {v:.2f}" for k, v in m.get("max_error", {}).items())
        seeds = ", ".join(str(s) for s in m.get("seeds", []))
        cycles = f"; {m['cycles']:,} simulated cycles" if "cycles" in m else ""
        weak = "".join(
            f"\n  note: the reference's {name} is {why}: passing says little"
            for name, why in m.get("degenerate", {}).items()
        )
        return (
            f"{file}: correct on task {task} (backend {backend}, preset {preset}, seeds {seeds}; "
            f"worst error / tolerance: {worst or 'exact'}{cycles}){weak}"
        )
    if record.stage in ("usage", "task"):
        return (
            f"{file}: not run against task {task}: the {'command line' if record.stage == 'usage' else 'task'} is wrong"
        )
    stopped = verdict.get("stage", record.stage) if record.stage == "run" else record.stage
    return f"{file}: not correct on task {task} (backend {backend}, preset {preset}): stopped at {stopped}"


def bench_usage(
    task_names: list[str], backends: list[str] | None, programs: list[str] | None, preset: str, out: str | None = None
) -> list[Diagnostic]:
    """What is wrong with a `kir bench` command line, from the task.toml files alone: a backend
    that is not a GPU one, a task that does not exist, a preset or a program name that none
    (for a preset: not every) of the tasks has, an --out that is there and is not a folder."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        return [Diagnostic("io.write", "error", None, f"cannot write results into {out}: it is not a folder")]
    wrong = [b for b in backends or [] if b not in NAMES["gpu"]]
    if wrong:
        return [
            Diagnostic(
                "cli.backend",
                "error",
                None,
                f"kir bench times GPU backends ({', '.join(NAMES['gpu'])}), not {', '.join(repr(w) for w in wrong)}",
            )
        ]
    try:
        tasks = _bench_tasks(task_names)
    except KirError as err:
        return list(err.diagnostics)
    diags = []
    for task in tasks:
        try:
            preset_of(task, preset)
        except KirError as err:
            diags += err.diagnostics
    known = {name for task in tasks for name in [*task.programs, *task.replays]}
    for name in programs or []:
        if known and name not in known:
            hint = ", ".join(sorted(known))
            diags.append(
                Diagnostic("cli.usage", "error", None, f"no task here has a program `{name}`", f"programs: {hint}")
            )
    return diags


def _bench_tasks(task_names: list[str]) -> list:
    names = task_names or sorted(p.name for p in SUITE.iterdir() if (p / "reference.py").is_file())
    return [find_task(n) for n in names]


def bench_command(
    task_names: list[str], backends: list[str] | None, programs: list[str] | None, preset: str, out: str | None,
    jobs: int, timeout: float, runs: int,
) -> int:  # fmt: skip
    problems = bench_usage(task_names, backends, programs, preset, out)
    if not problems and (missing := no_cuda("kir bench (the timing protocol uses CUDA events)")) is not None:
        problems = [missing]
    if problems:  # before anything is started (a task.toml error is the task's: status 1)
        _emit("\n".join(d.render() for d in problems))
        return exit_code(problems)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agent.harness.bench import run_suite, summary_lines, table_lines, write

    console = Console(stderr=True)
    tasks = _bench_tasks(task_names)  # bench_usage loaded them once: a task.toml error stopped it
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        handle = bar.add_task("starting", total=1)

        def progress(what: str, done: int, total: int) -> None:
            bar.update(handle, description=what[:60], completed=done, total=total)

        def folder_of(result: dict) -> Path:
            gpu = (result["gpu"] or "nogpu").replace("NVIDIA ", "").replace(" ", "-").lower()
            return Path(out) if out else SUITE.parent / "results" / f"{gpu}-{datetime.date.today().isoformat()}"

        try:
            result = run_suite(
                tasks, backends=backends, programs=programs, preset=preset, jobs=jobs, timeout=timeout, runs=runs,
                progress=progress, on_timed=lambda partial: write(partial, folder_of(partial)),
            )  # fmt: skip
        except KirError as err:
            bar.stop()
            _emit("\n".join(d.render() for d in err.diagnostics))
            return 1
    print("\n".join(table_lines(result)))
    print("\n".join(summary_lines(result)))
    json_path, md_path = write(result, folder_of(result))
    print(f"wrote {json_path} and {md_path}")
    return 0 if all(r["correct"] for r in result["rows"]) else 1


# ---- the commands of the candidate pipeline ---------------------------------------------------------

app = kcli.new_app()
# the commands whose --json prints a Record (schema kir.record/1, agent.pipeline.RECORD_FIELDS)
RECORD_COMMANDS = ("check", "lower", "compile", "cost", "run")
for _command in RECORD_COMMANDS:
    _until = "verify" if _command == "check" else _command
    kcli.USAGE_OBJECTS[_command] = lambda diag, until=_until: usage_record(None, until, [diag]).to_json()  # type: ignore[misc]  # a lambda binding until


def _evaluate(outcome: Outcome, file: str, params: dict[str, int], program=None, **options: Any):
    """`evaluate` on the file's candidate; its diagnostics and its Record's JSON go to `outcome`."""
    from agent.pipeline import Candidate, evaluate

    candidate = Candidate.from_file(file, params)  # io.read, syntax.encoding: a KirError for _guarded
    if program is not None:
        candidate = dataclasses.replace(candidate, program=program)
    outcome.source = candidate.text
    record = evaluate(candidate, **options)
    outcome.diagnostics += record.diagnostics
    outcome.json = record.to_json()
    return record


def _finish(outcome: Outcome, json_out: bool, command: str, until: str) -> None:
    """`kir.cli._finish`, with a Record as the JSON object: a usage record where the command line
    stopped before the candidate was looked at."""
    if json_out and outcome.json is None:
        outcome.json = usage_record(outcome.file, until, list(outcome.diagnostics)).to_json()
    kcli._finish(outcome, json_out, command)


FilesArg = Annotated[
    list[str],
    typer.Argument(metavar="FILE...", help="KIR source files, each checked on its own.", show_default=False),
]
SarifOpt = Annotated[
    bool,
    typer.Option(
        "--sarif", help="Print one SARIF 2.1.0 log of every file's diagnostics (docs/cli.md) instead of text."
    ),
]


def check(
    files: FilesArg,
    target: TargetOpt = None,
    param: ParamOpt = None,
    json_out: JsonOpt = False,
    sarif: SarifOpt = False,
) -> None:
    """Parse and verify programs (types, target legality, resources, bounds, synchronization,
    learned rules) for their declared target or --target, with --param's values; print their
    diagnostics: as text, as one file's Record (--json) or as one SARIF log of them all (--sarif)."""

    def command_line(out: Outcome) -> None:
        if sarif and json_out:
            raise usage("--sarif and --json exclude each other", "--sarif prints a SARIF log, --json a Record")
        if json_out and len(files) > 1:
            raise usage(
                f"--json prints the Record of one file, not of {len(files)}",
                "give one FILE, or --sarif for one log of every file",
            )
        kcli._check_target(target)
        _specs(param)

    def one(file: str) -> Outcome:
        def body(out: Outcome) -> None:
            record = _evaluate(out, file, _specs(param), until="verify", target=target)
            which = "kernels" if " + " in (record.kernel or "") else "kernel"  # several: `a + b`, in launch order
            out.lines.append(f"{out.file}: ok ({which} {record.kernel}, {record.ops} ops)")

        return _guarded(file, body, "checking the program")

    stopped = _guarded(files[0] if len(files) == 1 else None, command_line, "reading the command line")
    if stopped.diagnostics:
        if sarif and not json_out:
            _print_sarif([(None, stopped.diagnostics)])
        _finish(stopped, json_out, "check", "verify")
    outcomes = [one(file) for file in files]
    if sarif:
        _print_sarif([(out.file, out.diagnostics) for out in outcomes])
    if len(outcomes) == 1:
        _finish(outcomes[0], json_out, "check", "verify")
    for out in outcomes:
        kcli._print(out, False, "check")
    raise typer.Exit(exit_code([d for out in outcomes for d in out.diagnostics]))


def _print_sarif(checked: list[tuple[str | None, list[Diagnostic]]]) -> NoReturn:
    """Print the SARIF log of the files checked (verifier.sarif) and exit with `kir check`'s status."""
    from verifier.sarif import known_rules, sarif_log

    try:
        rules = known_rules()
    except Exception as err:  # a broken rule module: said in the log, its rules left undescribed
        checked = [*checked, (None, [kcli._internal(err, "loading the verifier's rules")])]
        rules = {}
    _emit(json.dumps(sarif_log(checked, rules), indent=2))
    raise typer.Exit(exit_code([d for _, diags in checked for d in diags]))


def _backend(backend: str | None, to: str | None, allowed: tuple[str, ...], command: str) -> str:
    chosen = _merged(backend, to, "--backend", "--to")
    if chosen is None:
        raise usage(f"kir {command} needs --backend", f"one of {', '.join(allowed)}")
    _one_of("backend", chosen, allowed, "cli.backend", f" for kir {command}")
    return chosen


def lower_cmd(
    file: FileArg,
    backend: BackendOpt = None,
    out: Annotated[
        str | None, typer.Option("--out", "-o", metavar="OUT", help="Write the source here.", show_default=False)
    ] = None,
    param: ParamOpt = None,
    json_out: JsonOpt = False,
    to: ToAlias = None,
    output: OutputAlias = None,
) -> None:
    """Verify a program, then lower it to target source (Triton, Gluon, CUDA C++, HIP C++ or C++
    for the mtia-sim simulator) and print it or write it to --out."""

    def body(outcome: Outcome) -> None:
        chosen = _backend(backend, to, NAMES["lower"], "lower")
        dest = _merged(out, output, "--out", "--output")
        overrides = _specs(param)
        if dest:
            _writable(dest)
        record = _evaluate(outcome, file, overrides, until="lower", backend=chosen)
        if record.lowered is None:
            return
        source, entry = record.lowered["source"], record.lowered["entry"]
        if dest:
            try:
                Path(dest).write_text(source)
            except OSError as err:
                raise usage(f"cannot write {dest}: {err.strerror or err}", rule="io.write") from None
            outcome.lines.append(f"{outcome.file}: wrote {dest} ({chosen}, entry {entry})")
        elif not json_out:
            outcome.text = source

    _finish(_guarded(file, body, "lowering the program"), json_out, "lower", "lower")


def _compile_usage(backend: str, target: str) -> None:
    """A --target the backend does not compile for, as a usage error before any work."""
    allowed = registry.target(backend).archs
    if target not in allowed:
        _one_of("target", target, NAMES["targets"], "cli.target")
        raise usage(f"{backend} compiles for {', '.join(allowed)}, not {target}", rule="cli.target")


def compile_cmd(
    file: FileArg,
    backend: BackendOpt = None,
    target: TargetOpt = None,
    param: ParamOpt = None,
    shape: ShapeOpt = None,
    json_out: JsonOpt = False,
    to: ToAlias = None,
    arch: ArchAlias = None,
) -> None:
    """Verify a program, then compile it ahead of time (no GPU needed) and report registers,
    spills, shared memory and the instructions that matter; compile errors point at the KIR op
    that produced the failing line. A verifier error stops it before any compiler runs.
    --shape specializes Triton code as a launch for that shape would."""

    def body(outcome: Outcome) -> None:
        chosen = _backend(backend, to, NAMES["compile"], "compile")
        wanted = _merged(target, arch, "--target", "--arch")
        overrides = _specs(param)
        symbols = _specs(shape, "--shape")
        if wanted is not None:
            _compile_usage(chosen, wanted)
        record = _evaluate(outcome, file, overrides, until="compile", backend=chosen, target=wanted, shapes=symbols)
        if record.report is None:
            return
        verdict = "compiled" if record.report["ok"] else "failed"
        outcome.lines.append(f"{outcome.file}: {verdict} (backend {chosen}, target {record.report['arch']})")
        outcome.lines += _report_lines(record.report)

    _finish(_guarded(file, body, "compiling the program"), json_out, "compile", "compile")


def _report_lines(record: dict) -> list[str]:
    """The compile report for people: the figures that are known, the instructions found, and
    where the artefacts are (the texts themselves are in --json)."""
    texts = ("ptx", "sass", "asm", "log", "seconds", "cached")
    lines = []
    for key, value in record.items():
        if key in texts or value in (None, "", {}, []):
            continue
        if key == "instructions":
            found = ", ".join(f"{name} {n}" for name, n in value.items() if n)
            lines.append(f"  instructions: {found or 'none of note'}")
        elif key == "extra":
            lines += [f"  {k}: {v}" for k, v in value.items() if v not in (None, "", [], {})]
        else:
            lines.append(f"  {key}: {value}")
    return lines


TaskOpt = Annotated[
    str,
    typer.Option(
        "--task",
        metavar="TASK",
        help="A task folder, a KernelBench .py file, or a suite task name.",
        show_default=False,
    ),
]


def default_run_backend() -> str:
    """`kir run`'s backend when none is given: triton on a machine with a CUDA device, else the
    simulated accelerator (mtia-sim is the toolchain's target where no GPU is present)."""
    from lowering.targets.triton.runtime import cuda_available

    return "triton" if cuda_available() else "mtia-sim"


def no_cuda(what: str) -> Diagnostic | None:
    """A `cli.no-cuda` error when torch sees no CUDA device, before any work that would need one."""
    from lowering.targets.triton.runtime import cuda_available

    if cuda_available():
        return None
    return Diagnostic(
        "cli.no-cuda",
        "error",
        None,
        f"{what} needs a CUDA GPU, and torch sees none on this machine",
        f"on a CPU: kir run -b {_or(NAMES['cpu'])}",
    )


def run_cmd(
    file: FileArg,
    task: TaskOpt,
    backend: BackendOpt = None,
    preset: PresetOpt = None,
    param: ParamOpt = None,
    seed: Annotated[
        list[int] | None,
        typer.Option(
            "--seed",
            callback=_in_range(0, MAX_SEED),
            help=f"A seed, 0 to {MAX_SEED} (repeatable); default: three fresh ones.",
            show_default=False,
        ),
    ] = None,
    timeout: TimeoutOpt = 600.0,
    json_out: JsonOpt = False,
    scale: Annotated[
        float | None,
        typer.Option(
            "--scale",
            metavar="F",
            callback=_scale,
            help="Every size variable of the reference times F, derived values computed again (the preset scale:F).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Verify a program, then check it against a task's reference: the harness's correctness
    protocol (fresh seeds, poisoned outputs, inputs checked unchanged, a higher-precision
    reference), in a child process with a timeout. Parameters come from the task's entry for
    this file, then --param. The backend defaults to triton where torch sees a CUDA device,
    else mtia-sim."""
    if scale is not None:
        preset = f"scale:{scale:g}"  # agent.tasks.task.SCALE_PREFIX, not imported at start-up
    state: dict[str, Any] = {"backend": backend, "preset": preset or DEFAULT_PRESET}

    def body(outcome: Outcome) -> None:
        overrides = _specs(param)
        if backend is not None:
            _one_of("backend", backend, NAMES["run"], "cli.backend", " for kir run")
        chosen = backend or default_run_backend()
        state["backend"] = chosen
        if chosen in NAMES["gpu"] and (missing := no_cuda(f"backend {chosen}")) is not None:
            raise KirError(missing)
        record, outcome.source = run_command(file, task, chosen, preset, overrides, seed, timeout, None)
        outcome.diagnostics += record.diagnostics
        outcome.json = record.to_json()
        state["record"] = record
        state["preset"] = record.preset or state["preset"]

    outcome = _guarded(file, body, "running the program")
    record = state.get("record")
    if record is None:  # stopped before the harness: a usage error, or a bug of ours
        stage = "usage" if exit_code(outcome.diagnostics) == 2 else "internal"
        record = usage_record(file, "run", list(outcome.diagnostics), stage, backend=state["backend"])
        outcome.json = record.to_json()
    code = 0 if record.ok else max(1, exit_code(outcome.diagnostics))
    if json_out:
        _emit(json.dumps(outcome.json, indent=2, default=str))
    elif code == 2:
        _emit(_render([d for d in outcome.diagnostics if d.is_error], outcome.source))
    else:
        if outcome.diagnostics:
            _emit(_render(outcome.diagnostics, outcome.source))
        _emit(describe(record, file, task, state["backend"], state["preset"]))
        log_tail = (record.verdict or {}).get("log_tail")
        if not record.ok and log_tail:
            _emit(log_tail)
    raise typer.Exit(code)


def bench_cmd(
    tasks: Annotated[
        list[str] | None, typer.Argument(metavar="TASK...", help="Suite task names (default: all).")
    ] = None,
    backend: BackendsOpt = None,
    program: Annotated[
        list[str] | None,
        typer.Option("--program", metavar="NAME", help="Which of each task's programs (repeatable; default: all)."),
    ] = None,
    preset: PresetOpt = None,
    out: Annotated[
        str | None,
        typer.Option("--out", "-o", metavar="DIR", help="Results folder (default: benchmarks/results/<gpu>-<date>)."),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", callback=_in_range(1, 256), help="Correctness checks run in parallel.")
    ] = 4,
    timeout: TimeoutOpt = 600.0,
    runs: Annotated[
        int, typer.Option("--runs", callback=_in_range(1, 100000), help="Timed runs per figure (at most).")
    ] = 50,
) -> None:
    """Run the benchmark suite on a CUDA GPU against PyTorch eager and torch.compile: a table of
    times and ratios, written as JSON and markdown under benchmarks/results/. Each program goes
    through the backends its level takes (triton for the tile level, gluon and cuda for the
    explicit level) unless --backend names them. Time the GPU shapes with --preset bench."""
    raise typer.Exit(bench_command(tasks or [], backend, program, preset or DEFAULT_PRESET, out, jobs, timeout, runs))


def cost_cmd(
    file: FileArg,
    target: TargetOpt = None,
    param: ParamOpt = None,
    shape: ShapeOpt = None,
    preset: PresetOpt = None,
    calibration: Annotated[
        str | None, typer.Option("--calibration", metavar="FILE", help="A saved calibration (CostModel.save).")
    ] = None,
    json_out: JsonOpt = False,
    compile_first: Annotated[
        bool,
        typer.Option(
            "--compile",
            help="Compile first (Triton, or Gluon for an explicit-level program; seconds) and take the compiler's "
            "registers, shared memory and spills instead of the model's estimates.",
        ),
    ] = False,
) -> None:
    """Verify a program, then estimate its time on a chip: the bottleneck, a breakdown tied to
    the ops that cause it, and performance hints as diagnostics. A task program takes its shapes
    and parameters from the task's --preset; --shape and --param override them."""

    def body(outcome: Outcome) -> None:
        overrides = _specs(param)
        symbols = _specs(shape, "--shape")
        if target is not None:
            from costmodel.spec import chip

            try:
                chip(target)
            except KeyError:
                _one_of("target", target, (*NAMES["targets"], *CHIP_TABLES), "cli.target", " for kir cost")
                raise usage(
                    f"no chip table for '{target}'", f"chip tables: {', '.join(CHIP_TABLES)}", "cli.target"
                ) from None
        chosen_preset = preset or DEFAULT_PRESET
        if calibration is not None:
            from kir.check import read_bytes

            read_bytes(calibration)  # a missing file or a FIFO is a usage error, before the model reads it
        from costmodel.cli import estimate_lines, task_bindings
        from costmodel.model import CostModel

        task_params, task_shapes = task_bindings(file, chosen_preset)  # cli.preset for a preset it lacks
        program = kcli._parse_with_params(outcome, overrides)
        params = {k: v for k, v in {**task_params, **overrides}.items() if k in program.params}
        shapes = {**{k: v for k, v in task_shapes.items() if k not in program.params}, **symbols}
        model = None
        if calibration:
            try:
                model = CostModel.load(calibration)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:  # (JSON and UTF-8 errors too)
                raise usage(
                    f"--calibration {calibration} is not a calibration: {err}",
                    "a file CostModel.save or kir learn --calibrate wrote (costmodel/learned/)",
                    rule="io.read",
                ) from None
        record = _evaluate(
            outcome, file, params, program, until="cost", target=target, preset=chosen_preset, shapes=shapes,
            cost_model=model, cost_from_compile=compile_first,
        )  # fmt: skip
        if record.estimate is None:
            return
        lines = estimate_lines(record.file, record.kernel, record.estimate, record.report)
        if (Path(file).parent / "task.toml").is_file() and lines:
            # the default preset is `test`: say which shapes the figures are for
            lines.insert(1, f"  shapes and parameters: the task's `{chosen_preset}` preset, then --shape and --param")
        outcome.lines += lines

    outcome = _guarded(file, body, "estimating the cost")
    if not json_out and not outcome.has_errors and outcome.diagnostics:
        outcome.text = "\n".join(outcome.lines) + "\n\n"
        outcome.lines = []
    _finish(outcome, json_out, "cost", "cost")


def _assemble() -> typer.Typer:
    """Every package's commands on the one `kir` group, in the order of the help."""
    app.command("check")(check)
    kcli.register(app)
    app.command("lower")(lower_cmd)
    app.command("compile")(compile_cmd)
    app.command("cost")(cost_cmd)
    app.command("run")(run_cmd)
    app.command("bench")(bench_cmd)
    verifier_cli.register(app)
    tactics_cli.register(app)
    search_cli.register(app)
    report_cli.register(app)
    frontend_cli.register(app)
    learn_cli.register(app)
    kb_cli.register(app)
    serve_cli.register(app)
    return app


_assemble()


def main() -> None:  # pragma: no cover - the console script calls `app`
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
