"""The bodies of `kir run` and `kir bench` (declared in kir/cli.py, which imports this lazily).

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

import datetime
from pathlib import Path
from typing import Any

from kir.diagnostics import Diagnostic, KirError

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "tasks"
DEFAULT_PRESET = "test"  # kir.cli.DEFAULT_PRESET: why it is `test` is written there


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


def preset_of(task, given: str | None) -> str:
    """--preset, checked against the task's presets; without it `test`, or `default` (the
    reference's own shapes) for a task that has no `test` preset (a bare KernelBench file)."""
    known = ("default", *task.presets)
    if given is None:
        return DEFAULT_PRESET if DEFAULT_PRESET in task.presets else "default"
    if given not in known:
        raise KirError(
            Diagnostic(
                "cli.preset",
                "error",
                None,
                f"task `{task.name}` has no preset `{given}`",
                f"presets: {', '.join(known)}",
            )
        )
    return given


def _usage_record(diags: list[Diagnostic], stage: str = "usage") -> dict[str, Any]:
    return {"ok": False, "stage": stage, "diagnostics": [d.to_json() for d in diags], "metrics": {}}


def run_command(
    file: str, task_name: str, backend: str, preset: str | None, params: dict[str, int], seeds: list[int] | None,
    timeout: float, device: str | None,
) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """(the record, the program's source for rendering). Program parameters come from the
    task's entry for this file (if it is one of the task's programs), then from `params`. The
    record says which preset ran (`preset`)."""
    from agent.harness.backends import BACKENDS, CPU_BACKENDS

    if backend not in BACKENDS:
        diag = Diagnostic("cli.backend", "error", None, f"no backend `{backend}`", f"one of {', '.join(BACKENDS)}")
        return _usage_record([diag]), None
    try:
        task = find_task(task_name)
        chosen = preset_of(task, preset)
    except KirError as err:
        usage = all(d.rule in ("task.missing", "cli.preset") for d in err.diagnostics)
        return _usage_record(err.diagnostics, "usage" if usage else "task"), None
    from kir.check import read_source
    from kir.parser import parse

    source = None
    try:
        source = read_source(file)
        program = parse(source, file=file)
    except KirError as err:
        usage = any(d.rule == "io.read" for d in err.diagnostics)
        return _usage_record(err.diagnostics, "usage" if usage else "parse"), source
    unknown = sorted(set(params) - set(program.params))
    if unknown:
        from kir.parser import suggest

        diags = [
            Diagnostic(
                "cli.param",
                "error",
                None,
                f"no parameter {name} in kernel {program.name}",
                suggest(name, program.params) or f"parameters: {', '.join(program.params) or 'none'}",
            )
            for name in unknown
        ]
        return _usage_record(diags), source
    path = Path(file)
    merged: dict[str, int] = {}
    for spec in task.programs.values():
        if spec.file.resolve() == path.resolve():
            merged.update(spec.params_for(chosen))
    merged.update(params)
    job = {
        "task": str(task.folder if task.name == task.folder.name else task.folder / f"{task.name}.py"),
        "candidate": {"kind": "kir", "file": str(path.resolve()), "backend": backend, "params": merged},
        "preset": chosen,
        "device": device or ("cpu" if backend in CPU_BACKENDS else "cuda"),
        "seeds": seeds,
    }
    from agent.harness.isolate import run_job

    record = run_job(job, timeout=timeout)
    for d in record.get("diagnostics", []):
        if d.get("file") == "<input>":
            d["file"] = file
    record["preset"] = chosen
    return record, source


def describe(record: dict[str, Any], file: str, task: str, backend: str, preset: str) -> str:
    if record["ok"]:
        m = record.get("metrics", {})
        worst = ", ".join(f"{k} {v:.2f}" for k, v in m.get("max_error", {}).items())
        seeds = ", ".join(str(s) for s in m.get("seeds", []))
        cycles = f"; {m['cycles']:,} simulated cycles" if "cycles" in m else ""
        return (
            f"{file}: correct on task {task} (backend {backend}, preset {preset}, seeds {seeds}; "
            f"worst error / tolerance: {worst or 'exact'}{cycles})"
        )
    if record["stage"] in ("usage", "task"):
        return f"{file}: not run against task {task}: the {'command line' if record['stage'] == 'usage' else 'task'} is wrong"
    return f"{file}: not correct on task {task} (backend {backend}, preset {preset}): stopped at {record['stage']}"


def bench_usage(
    task_names: list[str], backends: list[str] | None, programs: list[str] | None, preset: str, out: str | None = None
) -> list[Diagnostic]:
    """What is wrong with a `kir bench` command line, from the task.toml files alone: a backend
    that is not a GPU one, a task that does not exist, a preset or a program name that none
    (for a preset: not every) of the tasks has, an --out that is there and is not a folder."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        return [Diagnostic("io.write", "error", None, f"cannot write results into {out}: it is not a folder")]
    from agent.harness.backends import GPU_BACKENDS

    wrong = [b for b in backends or [] if b not in GPU_BACKENDS]
    if wrong:
        return [
            Diagnostic(
                "cli.backend",
                "error",
                None,
                f"kir bench times GPU backends ({', '.join(GPU_BACKENDS)}), not {', '.join(repr(w) for w in wrong)}",
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
    known = {name for task in tasks for name in task.programs}
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
    from kir.cli import _emit, exit_code, no_cuda

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
