"""The benchmark runner: every task's programs through the chosen backends, against PyTorch
eager and torch.compile, each figure a ratio measured side by side in one run.

    from agent.harness.bench import run_suite
    result = run_suite(tasks, backends=["triton"], programs=["seed", "tuned"], out_dir=...)

Phases: (1) the ceilings (copy rate, bf16 matmul rate) in a child process; (2) every row
through the candidate pipeline (`agent.pipeline.evaluate`: verified, costed, then the
harness's correctness check on the bench preset), `jobs` at a time, each check in child
processes that also compile the kernels and warm torch.compile's caches; (3) the timing, one task at a time:
every correct row of the task, eager and torch.compile on the same rotated inputs, in one child.
A row's `floor_ms` is max(bytes / copy rate, flops / matmul rate); a time under a tenth of the
floor is flagged `implausible` rather than reported as a win.

The JSON written under `out_dir`: `{"date", "gpu", "versions", "ceilings", "rows": [{"task",
"program", "backend", "correct", "ms", "eager_ms", "compile_ms", "floor_ms", "predicted_ms", "stage",
"message", "bytes", "flops", "flags"}]}` (`predicted_ms`: the cost model's time for the row, from
its Record); the markdown table beside it holds the same rows with ratios.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.harness.isolate import run_job
from agent.harness.timing import floor_ms
from agent.pipeline import Candidate, Record, evaluate
from kir.diagnostics import Diagnostic, KirError
from kir.parser import parse_file
from kir.program import Program


@dataclass
class Row:
    task: str
    program: str
    backend: str
    correct: bool = False
    ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    floor_ms: float | None = None
    predicted_ms: float | None = None
    stage: str = ""
    message: str = ""
    bytes: int | None = None
    flops: float | None = None
    flags: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "record"}


def default_backends(program_file: Path | Program) -> list[str]:
    """The GPU backends that time a program of its level by default (each runtime says which
    levels it times, lowering.targets: tile: triton; explicit: gluon, cuda). A program written
    for mtia-sim has none: the simulator's cycles are its measure (benchmarks/mtia_speedups.py),
    not the GPU timing protocol."""
    from lowering.emit.base import program_level
    from lowering.targets import runtimes

    program = program_file if isinstance(program_file, Program) else parse_file(program_file)
    if program.kernel.target.data == "mtia-sim":
        return []
    level = program_level(program)
    return [name for name, (_, runtime) in runtimes().items() if runtime.device == "cuda" and level in runtime.bench]


def level_backends(level: str) -> list[str]:
    """The backends that take a program of `level`: the targets whose emitter takes it (the tile
    level goes through Triton and the C backends, the explicit level through Gluon and CUDA C++)."""
    from lowering.targets import lowers_on

    return lowers_on(level)


def plan(tasks, backends: list[str] | None, programs: list[str] | None) -> list[tuple[Any, str, str]]:
    """(task, program, backend) to check and time: each program through the backends asked for
    that its level takes (`-b triton -b gluon` times tile programs through Triton and explicit
    ones through Gluon), or its default ones."""
    from agent.tasks.replay import backends_of, names, program_of
    from lowering.emit.base import program_level

    rows: list[tuple[Any, str, str]] = []
    for task in tasks:
        for name in names(task):  # those with a file, then the replayed ones
            if programs and name not in programs:
                continue
            try:
                program = program_of(task, name)
            except KirError:  # a step that does not apply: the row says so (check_row)
                program = program_of(task, task.replays[name].base)
            if backends and program.kernel.target.data != "mtia-sim":
                chosen = [b for b in backends if b in level_backends(program_level(program))]
            else:
                chosen = default_backends(program)
            if only := backends_of(task, name):  # the program says which backends of its level lower it
                chosen = [b for b in chosen if b in only]
            rows.extend((task, name, backend) for backend in chosen)
    return rows


def check_row(
    task, name: str, backend: str, preset: str, device: str, *, timeout: float = 600.0, warm: bool = False
) -> Record:
    """One row's check, through the one pipeline: the program with the task's parameters for
    `preset`, verified, costed at the preset's shapes (the prediction goes beside the measured
    time), then the harness's correctness protocol (two rounds; `warm` also runs torch.compile
    once, filling its caches before the timing)."""
    try:
        candidate = _candidate(task, name, preset)
    except KirError as err:  # a replayed program whose sequence does not replay
        return Record(
            candidate="", file=f"<{task.name}.{name}>", stage="parse", ok=False, until="run", backend=backend,
            task=task.name, preset=preset, diagnostics=tuple(err.diagnostics),
        )  # fmt: skip
    return evaluate(
        candidate, until="run", backend=backend, task=task, preset=preset, device=device, timeout=timeout,
        with_cost=True, harness={"rounds": 2, "warm": warm},
    )  # fmt: skip


def _candidate(task, name: str, preset: str) -> Candidate:
    """A row's candidate: the program's file, or the program its recorded tactic sequence
    makes (agent.tasks.replay), with its parameters for `preset`."""
    if name in task.replays:
        from agent.tasks.replay import params_for, replay

        return Candidate.from_program(replay(task, name), params_for(task, name, preset))
    spec = task.programs[name]
    return Candidate.from_file(spec.file, spec.params_for(preset))


def _spec(task, name: str, backend: str, preset: str) -> dict[str, Any]:
    """The harness's candidate of a row, for the timing job (a replayed program as its text)."""
    if name in task.replays:
        candidate = _candidate(task, name, preset)
        return {"kind": "kir", "text": candidate.text, "file": f"<{task.name}.{name}>", "backend": backend,
                "params": candidate.param_values}  # fmt: skip
    spec = task.programs[name]
    return {"kind": "kir", "file": str(spec.file), "backend": backend, "params": spec.params_for(preset)}


def _message(diagnostics: list[Diagnostic]) -> str:
    errors = [d for d in diagnostics if d.is_error]  # a row's hints (the cost model's) are not its message
    if not errors:
        return ""
    d = errors[0]
    where = f"{Path(d.span.file).name}:{d.span.line}: " if d.span is not None and d.span.file else ""
    return f"{where}{d.rule}: {d.message}"[:300]


def _harness_message(record: dict[str, Any]) -> str:
    return _message([Diagnostic.from_json(d) for d in record.get("diagnostics") or []])


def run_suite(
    tasks,
    *,
    backends: list[str] | None = None,
    programs: list[str] | None = None,
    preset: str = "bench",
    device: str = "cuda",
    jobs: int = 4,
    timeout: float = 600.0,
    runs: int = 50,
    progress: Callable[[str, int, int], None] | None = None,
    on_timed: Callable[[dict[str, Any]], object] | None = None,  # what it returns is not read
) -> dict[str, Any]:
    """Check every planned program, then time each task's correct ones with the peers;
    `on_timed` gets the result so far after each task's timing (so that a run cut short keeps
    them)."""
    planned = plan(tasks, backends, programs)
    total = 1 + 2 * len(planned)
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(what, done, total)

    ceilings_record = run_job({"kind": "ceilings", "device": device}, timeout=timeout)
    if not ceilings_record["ok"]:
        diags = [Diagnostic.from_json(d) for d in ceilings_record["diagnostics"]]
        raise KirError(
            diags or Diagnostic("harness.device", "error", None, f"cannot measure the ceilings on `{device}`")
        )
    ceilings = ceilings_record.get("metrics", {}).get("ceilings", {})
    environment = ceilings_record.get("metrics", {}).get("environment", {})
    tick("ceilings")
    rows = [Row(task.name, name, backend) for task, name, backend in planned]

    def result() -> dict[str, Any]:
        return {
            "date": datetime.date.today().isoformat(),
            "gpu": environment.get("gpu", ""),
            "versions": environment.get("versions", {}),
            "ceilings": ceilings,
            "preset": preset,
            "rows": [r.to_json() for r in rows],
        }

    def check(i: int) -> None:
        task, name, backend = planned[i]
        first = next(j for j, (t, _, _) in enumerate(planned) if t is task)
        record = check_row(task, name, backend, preset, device, timeout=timeout, warm=i == first)
        row = rows[i]
        stage = (record.verdict or {}).get("stage", "done") if record.stage == "run" else record.stage
        row.correct, row.stage, row.message = record.ok, stage, _message(list(record.diagnostics))
        row.record = record.to_json()
        if record.estimate is not None:
            row.predicted_ms = record.estimate["time_s"] * 1e3
        tick(f"{task.name}/{name}/{backend}: {'correct' if record.ok else stage}")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(check, range(len(planned))))

    for task in tasks:
        mine = [i for i, (t, _, _) in enumerate(planned) if t is task and rows[i].correct]
        for _ in range(sum(1 for t, _, _ in planned if t is task) - len(mine)):
            tick(f"{task.name}: skipped (not correct)")
        if not mine:
            continue
        specs = [_spec(task, planned[i][1], planned[i][2], preset) for i in mine]
        job = {"kind": "time", "task": str(task.folder), "candidates": specs, "preset": preset, "device": device,
               "time": {"sets": 3, "runs": runs}}  # fmt: skip
        record = run_job(job, timeout=timeout)
        metrics = record.get("metrics", {})
        timed = metrics.get("candidates", [])
        for k, i in enumerate(mine):
            row = rows[i]
            entry = timed[k] if k < len(timed) else {}
            if not record["ok"] or "error" in entry:
                row.stage = "timing" if record["ok"] else record["stage"]
                row.message = entry.get("error", "") or _harness_message(record)
            row.ms = entry.get("ms")
            row.eager_ms, row.compile_ms = metrics.get("eager_ms"), metrics.get("compile_ms")
            row.bytes, row.flops = metrics.get("bytes"), metrics.get("flops")
            if ceilings and row.bytes is not None:
                row.floor_ms = floor_ms(row.bytes, row.flops or 0.0, ceilings)
                if row.ms is not None and row.ms < row.floor_ms / 10:
                    row.flags.append("implausible: under a tenth of the roofline floor")
            tick(f"{task.name}/{planned[i][1]}/{planned[i][2]}: {row.ms:.3f} ms" if row.ms else task.name)
        if on_timed:
            on_timed(result())

    return result()


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def table_lines(result: dict[str, Any]) -> list[str]:
    """A markdown table: times and the ratios (peer time / ours: above 1 is faster; ours / floor),
    and the cost model's predicted time beside the measured one."""
    lines = [
        "| task | program | backend | correct | ms | eager ms | compile ms | floor ms | eager/ours | compile/ours | ours/floor "
        "| predicted ms | note |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def f(x: float | None, digits: int = 3) -> str:
        return "" if x is None else f"{x:.{digits}f}"

    for r in result["rows"]:
        note = "; ".join([*r["flags"], r["message"]] if r["message"] else r["flags"]).replace("|", "/")
        lines.append(
            f"| {r['task']} | {r['program']} | {r['backend']} | {'yes' if r['correct'] else 'no: ' + r['stage']} | "
            f"{f(r['ms'])} | {f(r['eager_ms'])} | {f(r['compile_ms'])} | {f(r['floor_ms'])} | "
            f"{f(ratio(r['eager_ms'], r['ms']), 2)} | {f(ratio(r['compile_ms'], r['ms']), 2)} | "
            f"{f(ratio(r['ms'], r['floor_ms']), 2)} | {f(r.get('predicted_ms'))} | {note} |"
        )
    return lines


def summary_lines(result: dict[str, Any], program: str = "tuned") -> list[str]:
    """The suite-level figures for one program: the geometric mean of compile / ours, and the
    best compiled backend per task."""
    best: dict[str, dict[str, Any]] = {}
    for r in result["rows"]:
        if r["program"] == program and r["correct"] and r["ms"]:
            if r["task"] not in best or r["ms"] < best[r["task"]]["ms"]:
                best[r["task"]] = r
    ratios = [x for r in best.values() if (x := ratio(r["compile_ms"], r["ms"]))]
    if not ratios:
        return [f"no timed `{program}` rows"]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    slower = sorted(t for t, r in best.items() if (ratio(r["compile_ms"], r["ms"]) or 0) < 1)
    return [
        f"`{program}` programs, best backend per task: geometric mean of torch.compile time / ours = {geo:.2f} "
        f"over {len(ratios)} tasks; slower than torch.compile on: {', '.join(slower) or 'none'}"
    ]


def write(result: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "bench.json"
    md_path = out_dir / "bench.md"
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    head = [
        f"# Benchmark run {result['date']}",
        "",
        f"GPU: {result['gpu']}; versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}",
        f"Ceilings measured in this run: copy {result['ceilings'].get('copy_gbps', 0):.0f} GB/s, "
        f"bf16 matmul {result['ceilings'].get('bf16_tflops', 0):.0f} TFLOP/s; preset `{result['preset']}`.",
        "Ratios: eager/ours and compile/ours above 1 mean ours is faster; ours/floor is 1 at the roofline.",
        "",
    ]
    md_path.write_text("\n".join([*head, *table_lines(result), "", *summary_lines(result)]) + "\n")
    return json_path, md_path
