"""`kir tactics`: list, explain and apply the tactics.

    kir tactics list [--json]
    kir tactics explain NAME
    kir tactics apply FILE NAME --param K=V ... [--target T] [--json]
    kir tactics replay TASK_DIR [--program NAME] [--json]

`apply` prints the new program (canonical text), or the located reasons the tactic does not
apply (exit status 1). The result is verified before it is printed: a verifier error in it is
reported with the text, exit status 1. Usage errors (an unknown tactic or parameter, a value
outside the parameter's domain, an unreadable file) exit 2. `replay` prints the program a
task's recorded tactic sequence makes (tactics/replay.py), or the located reason a step fails
(at its task.toml line) with exit status 1.

Start-up: this module imports typer, `kir.cli` and the tactics framework only (standard
library); the tactic modules and the IR load when a command runs, so `kir --help` does not pay
for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from kir.cli import (
    JSON_HELP,
    FileArg,
    JsonOpt,
    Outcome,
    TargetOpt,
    _check_target,
    _emit,
    _finish,
    _guarded,
    _internal,
    _parse,
    envelope,
)
from kir.diagnostics import Diagnostic, KirError

tactics_app = typer.Typer(
    name="tactics",
    help="List, explain and apply the tactics: the typed moves of the search.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="A tactic's name, e.g. warps.", show_default=False)]
TacticParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        metavar="NAME=VALUE",
        help="A value of one of the tactic's parameters: -p warps=16 (repeatable; see `kir tactics explain`).",
        show_default=False,
    ),
]


def _registry():
    """The tactics package with every tactic loaded; a tactic module that does not import is
    an internal error of the command, not a traceback."""
    try:
        import tactics

        tactics.all()
    except KirError as err:
        _emit("\n".join(d.render() for d in err.diagnostics))
        raise typer.Exit(1) from None
    except Exception as err:
        _emit(_internal(err, "loading the tactics").render())
        raise typer.Exit(1) from None
    return tactics


@tactics_app.command("list")
def tactics_list(
    json_out: Annotated[
        bool, typer.Option("--json", help=JSON_HELP + " Its tactics are full records (parameters, explanation).")
    ] = False,
) -> None:
    """List the tactics: name, numerics (exact, reassociates, approximate) and summary."""
    registry = _registry()
    found = registry.all()
    if json_out:
        records = [t.to_json() for t in found]
        _emit(json.dumps(envelope("tactics list", None, [], {"ok": True, "tactics": records}), indent=2))
        return
    rows = [("NAME", "NUMERICS", "SUMMARY")] + [(t.name, t.numerics, t.summary) for t in found]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    _emit("\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}" for a, b, c in rows))


@tactics_app.command("explain")
def tactics_explain(name: NameArg) -> None:
    """Explain a tactic: what it decides, when it applies, its parameters and their domains."""
    registry = _registry()
    try:
        tactic = registry.get(name)
    except KirError as err:
        _emit("\n".join(d.render() for d in err.diagnostics))
        raise typer.Exit(2) from None
    _emit(tactic.explanation())


def parse_params(tactic, specs: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` words as the tactic's typed values; `cli.param` errors for a word that is
    not `NAME=VALUE`, a name the tactic does not have, a value of the wrong type, a repeat."""
    values: dict[str, Any] = {}
    problems: list[Diagnostic] = []
    for spec in specs:
        name, eq, text = spec.partition("=")
        name = name.strip()
        if not eq or not name or not text.strip():
            problems.append(Diagnostic("cli.param", "error", None, f"bad --param '{spec}'", "write --param NAME=VALUE"))
            continue
        if name not in tactic.param_names:
            known = ", ".join(tactic.param_names) or "none"
            from kir.names import suggest

            hint = suggest(name, tactic.param_names) or f"its parameters: {known}"
            problems.append(
                Diagnostic("cli.param", "error", None, f"tactic {tactic.name} has no parameter '{name}'", hint)
            )
            continue
        if name in values:
            problems.append(Diagnostic("cli.param", "error", None, f"--param {name} is given twice"))
            continue
        try:
            values[name] = tactic.param(name).parse(tactic.name, text)
        except KirError as err:
            problems += [
                Diagnostic("cli.param", "error", None, f"bad --param '{spec}': {d.message}", d.hint)
                for d in err.diagnostics
            ]
    if problems:
        raise KirError(problems)
    return values


@tactics_app.command("apply")
def tactics_apply(
    file: FileArg,
    name: NameArg,
    param: TacticParamOpt = None,
    target: TargetOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Apply a tactic to a program and print the new program, or the located reasons the tactic
    does not apply to it; the result is verified before it is printed."""

    def body(out: Outcome) -> None:
        _check_target(target)
        registry = _registry()
        tactic = registry.get(name)  # tactic.unknown: a usage error
        out.fields["tactic"] = tactic.name
        values = parse_params(tactic, param or [])
        out.fields["params"] = values
        program = _parse(out)
        out.fields["kernel"] = program.name
        reasons = tactic.precondition(program, target)
        if reasons:
            out.fail(reasons)
            return
        result = tactic.apply(program, target=target, **values)
        out.fields["params"] = tactic.bind(program, values)
        text = result.text()
        from verifier.check import check_program

        found = [d for d in check_program(result, target) if d.is_error]
        out.fields["text"] = text
        if found:
            # the result's diagnostics point into the input's text where its ops survive
            out.fail(
                [
                    Diagnostic(
                        "tactic.result-invalid",
                        "error",
                        program.span(),
                        f"tactic {tactic.name} gave a program the verifier rejects ({len(found)} errors)",
                        "this is a bug in the tactic, or the input did not verify either: run `kir check` on it",
                    ),
                    *found,
                ]
            )
        if not json_out:
            out.text = text

    _finish(_guarded(file, body, "applying the tactic"), json_out, "tactics apply")


TaskDirArg = Annotated[
    str,
    typer.Argument(
        metavar="TASK_DIR", help="A task folder whose task.toml records a replay sequence.", show_default=False
    ),
]
ReplayProgramOpt = Annotated[
    str | None,
    typer.Option(
        "--program",
        metavar="NAME",
        help="Which replayed program of the task (default: `replayed`, or the task's only one).",
        show_default=False,
    ),
]


@tactics_app.command("replay")
def tactics_replay(task_dir: TaskDirArg, program: ReplayProgramOpt = None, json_out: JsonOpt = False) -> None:
    """Replay a task's recorded tactic sequence (a `[programs.NAME]` entry with `replay = [...]`)
    on its `from` program and print the result, or the located reason a step fails; the result
    is verified at every preset's parameters before it is printed."""
    toml = str(Path(task_dir) / "task.toml")

    def body(out: Outcome) -> None:
        _registry()  # a tactic module that does not load: said before the task is read
        from tactics import replay

        meta, recorded = replay.read_task(task_dir)
        out.fields["task"] = Path(task_dir).resolve().name
        name = program or ("replayed" if "replayed" in recorded or len(recorded) != 1 else next(iter(recorded)))
        if name not in recorded:
            raise KirError(
                Diagnostic(
                    "cli.usage",
                    "error",
                    None,
                    f"{toml} records no replay sequence for a program `{name}`",
                    f"replayed programs: {', '.join(recorded)}"
                    if recorded
                    else "add [programs.replayed] with from = ... and replay = [...] (docs/tactics.md)",
                )
            )
        entry = recorded[name]
        out.fields.update(program=name, **{"from": entry.base}, steps=[s.to_json() for s in entry.steps])
        programs = meta.get("programs", {})
        base = _program_file(programs, entry, Path(task_dir))
        from kir.parser import parse_file
        from kir.program import same_ir

        start = parse_file(base)
        trace = replay.trace(start, entry.steps, label=f"program `{name}`")
        result = trace[-1]
        out.fields["kernel"] = result.name
        presets = list(meta.get("presets", {})) if isinstance(meta.get("presets"), dict) else []
        params = replay.derive_params(trace, _params(programs.get(entry.base)), _params(programs.get(name)), presets)
        out.fields["params"] = params
        text = result.text()
        out.fields["text"] = text
        found = _verify(result, params)
        if found:
            out.fail(
                [
                    Diagnostic(
                        "tactic.result-invalid",
                        "error",
                        entry.span,
                        f"program `{name}`: the replayed program does not verify ({len(found)} errors)",
                        "a step gave a program the verifier rejects, or a preset's parameters do not fit it",
                    ),
                    *found,
                ]
            )
        out.fields["same_ir_as"] = [
            other
            for other, spec in programs.items()
            if isinstance(spec, dict)
            and isinstance(spec.get("file"), str)
            and (Path(task_dir) / spec["file"]).is_file()
            and same_ir(result, parse_file(Path(task_dir) / spec["file"]))
        ]
        if not json_out:
            out.text = text

    _finish(_guarded(toml, body, "replaying the tactics"), json_out, "tactics replay")


def _program_file(programs: Any, entry: Any, folder: Path) -> Path:
    """The file of a replayed entry's `from` program (`task.replay` at the entry when there is none)."""
    spec = programs.get(entry.base) if isinstance(programs, dict) else None
    file = spec.get("file") if isinstance(spec, dict) else None
    if not isinstance(file, str) or not (folder / file).is_file():
        raise KirError(
            Diagnostic(
                "task.replay",
                "error",
                entry.span,
                f"program `{entry.name}` is replayed from `{entry.base}`, which is not a program of the task with a file",
            )
        )
    return folder / file


def _params(spec: Any) -> dict[str, dict[str, int]]:
    """A program entry's `params.<preset>` tables, the integer values only (the task loader
    checks them: `agent.tasks`)."""
    params = spec.get("params", {}) if isinstance(spec, dict) else {}
    if not isinstance(params, dict):
        return {}
    return {
        preset: {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
        for preset, values in params.items()
        if isinstance(values, dict)
    }


def _verify(program, params: dict[str, dict[str, int]]) -> list[Diagnostic]:
    """The verifier's errors for `program` at its defaults and at each preset's parameters."""
    from verifier.check import check_program

    found: list[Diagnostic] = []
    for values in [{}, *params.values()]:
        try:
            bound = program.with_params(**values) if values else program
        except KirError as err:
            found += [d for d in err.diagnostics if d not in found]
            continue
        found += [d for d in check_program(bound) if d.is_error and d not in found]
    return found


def register(app: typer.Typer) -> None:
    """Mount `kir tactics` on the `kir` group."""
    app.add_typer(tactics_app, name="tactics")
