"""The bodies of `kir run` and `kir bench` (declared in kir/cli.py, which imports this lazily).

`kir run FILE --task TASK --backend B`: the correctness protocol for one program against a
task, in a child process with a timeout. `kir bench [TASK...]`: the suite runner
(agent.harness.bench) with a progress bar, a table, and JSON and markdown results.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from agent.harness.backends import BACKENDS, CPU_BACKENDS
from agent.harness.isolate import run_job
from agent.tasks import TaskError, load_suite, load_task
from kir.diagnostics import Diagnostic, KirError, Span

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "tasks"


def find_task(name: str):
    """A task by folder path, KernelBench file, or name in the suite."""
    path = Path(name)
    if path.exists():
        return load_task(path)
    if (SUITE / name / "reference.py").is_file():
        return load_task(SUITE / name)
    names = sorted(p.name for p in SUITE.iterdir() if (p / "reference.py").is_file()) if SUITE.is_dir() else []
    raise TaskError(
        Diagnostic("task.missing", "error", None, f"no task `{name}`", f"a task folder, or one of: {', '.join(names)}")
    )


def run_command(
    file: str, task_name: str, backend: str, preset: str, params: dict[str, int], seeds: list[int] | None,
    timeout: float, device: str | None,
) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """(the record, the program's source for rendering). Program parameters come from the
    task's entry for this file (if it is one of the task's programs), then from `params`."""
    if backend not in BACKENDS:
        diag = Diagnostic("cli.usage", "error", None, f"no backend `{backend}`", f"one of {', '.join(BACKENDS)}")
        return {"ok": False, "stage": "usage", "diagnostics": [diag.to_json()], "metrics": {}}, None
    try:
        task = find_task(task_name)
    except TaskError as err:
        return {"ok": False, "stage": "task", "diagnostics": [d.to_json() for d in err.diagnostics], "metrics": {}}, None
    path = Path(file)
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        diag = Diagnostic("io.read", "error", Span(1, 1, 1, 2, file), f"cannot read {file}: {err}")
        return {"ok": False, "stage": "usage", "diagnostics": [diag.to_json()], "metrics": {}}, None
    merged: dict[str, int] = {}
    for spec in task.programs.values():
        if spec.file.resolve() == path.resolve():
            merged.update(spec.params_for(preset))
    merged.update(params)
    job = {
        "task": str(task.folder if task.name == task.folder.name else task.folder / f"{task.name}.py"),
        "candidate": {"kind": "kir", "file": str(path.resolve()), "backend": backend, "params": merged},
        "preset": preset,
        "device": device or ("cpu" if backend in CPU_BACKENDS else "cuda"),
        "seeds": seeds,
    }
    record = run_job(job, timeout=timeout)
    for d in record.get("diagnostics", []):
        if d.get("file") == "<input>":
            d["file"] = file
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


def bench_command(
    task_names: list[str], backends: list[str] | None, programs: list[str] | None, preset: str, out: str | None,
    jobs: int, timeout: float, runs: int,
) -> int:  # fmt: skip
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agent.harness.bench import run_suite, summary_lines, table_lines, write

    console = Console(stderr=True)
    from agent.harness.backends import GPU_BACKENDS

    wrong = [b for b in backends or [] if b not in GPU_BACKENDS]
    if wrong:
        console.print(
            f"error[cli.usage]: kir bench times GPU backends ({', '.join(GPU_BACKENDS)}), not {', '.join(wrong)}",
            markup=False,
        )
        return 2
    try:
        tasks = [find_task(n) for n in task_names] if task_names else load_suite(SUITE)
    except TaskError as err:
        for d in err.diagnostics:
            console.print(d.render(), markup=False)
        return 2
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
            for d in err.diagnostics:
                console.print(d.render(), markup=False)
            console.print("kir bench needs a CUDA GPU (the timing protocol uses CUDA events)", markup=False)
            return 1
    print("\n".join(table_lines(result)))
    print("\n".join(summary_lines(result)))
    json_path, md_path = write(result, folder_of(result))
    print(f"wrote {json_path} and {md_path}")
    return 0 if all(r["correct"] for r in result["rows"]) else 1


def record_json(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2)
