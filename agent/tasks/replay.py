"""A task's replayed programs: `[programs.NAME]` entries made by a recorded tactic sequence
(tactics.replay says the format and how the parameters are derived).

    from agent.tasks import load_task
    from agent.tasks.replay import replay, params_for

    task = load_task("benchmarks/tasks/softmax")
    program = replay(task)                      # the `replayed` entry's program
    params = params_for(task, "replayed", "bench")

`program_of`, `params_of` and `backends_of` answer for any program of the task, with a file or
replayed, so that a caller (the bench runner) treats both alike. A replay runs once per task
object: its trace is kept on the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.tasks.task import Task, _error, _line_of
from kir.parser import parse_file
from tactics.replay import derive_params, trace

if TYPE_CHECKING:
    from kir.program import Program

DEFAULT = "replayed"


def names(task: Task) -> list[str]:
    """Every program of the task: those with a file, then the replayed ones, each in the order of
    task.toml."""
    return [*task.programs, *task.replays]


def _trace(task: Task, name: str) -> list[Program]:
    if name in task._traces:
        return task._traces[name]
    if name not in task.replays:
        known = ", ".join(task.replays) or "none"
        raise _error(
            "task.replay",
            f"task `{task.name}` has no replayed program `{name}`",
            task.folder / "task.toml",
            1,
            f"replayed programs: {known}",
        )
    entry = task.replays[name]
    found = trace(parse_file(task.programs[entry.base].file), entry.steps, label=f"program `{name}`")
    task._traces[name] = found
    return found


def replay(task: Task, name: str = DEFAULT) -> Program:
    """The program the recorded sequence of `[programs.NAME]` makes of its `from` program; a
    `KirError` where a step does not apply (located at its task.toml line, then the tactic's
    reasons)."""
    return _trace(task, name)[-1]


def params_for(task: Task, name: str, preset: str) -> dict[str, int]:
    """A replayed program's compile-time parameters for `preset`: the `from` program's, then the
    defaults its steps changed, then the entry's own (`tactics.replay.derive_params`)."""
    entry = task.replays[name]
    base = task.programs[entry.base]
    derived = derive_params(_trace(task, name), base.params, entry.params, [preset])
    return derived.get(preset, {})


def program_of(task: Task, name: str) -> Program:
    """Any program of the task: parsed from its file, or replayed."""
    if name in task.replays:
        return replay(task, name)
    if name not in task.programs:
        raise _error(
            "task.program",
            f"task `{task.name}` has no program `{name}`",
            task.folder / "task.toml",
            _line_of(task.folder / "task.toml", "programs"),
            f"programs: {', '.join(names(task))}",
        )
    return parse_file(task.programs[name].file)


def params_of(task: Task, name: str, preset: str) -> dict[str, int]:
    """Any program's parameters for `preset` (a replayed one's derived)."""
    return params_for(task, name, preset) if name in task.replays else task.programs[name].params_for(preset)


def backends_of(task: Task, name: str) -> tuple[str, ...]:
    """The only backends of its level a program runs through (empty: all); a replayed program
    without its own takes its `from` program's."""
    if name in task.replays:
        entry = task.replays[name]
        return entry.backends or task.programs[entry.base].backends
    return task.programs[name].backends


__all__ = ["DEFAULT", "backends_of", "names", "params_for", "params_of", "program_of", "replay"]
