"""Recorded tactic sequences: a program of a task written as the moves that make it from another.

A task's `task.toml` may hold, beside its `file = ...` programs, a program made by replaying a
sequence of tactics on one of them:

    [programs.replayed]
    from = "seed"                       # the program the steps start from (default "seed")
    replay = [
      { tactic = "reciprocal" },        # one step a line: the tactic's name, then its parameters
      { tactic = "warps", warps = 16 },
    ]
    params.test = { BLOCK = 256 }       # optional: see "Parameters" below

A step is an inline table: `tactic` names the tactic, every other key is one of its parameters
(an integer or a string, as `kir tactics explain NAME` lists them; a parameter left out takes its
default). The sequence is checked when the task is loaded: an unknown tactic, a parameter the
tactic does not have or a value outside its domain is a `task.replay` error at the step's
line of task.toml. Whether each step applies is known only by running it (`trace`): a step whose
precondition fails is a `tactic.replay.step` error at its line, followed by the tactic's own
located reasons (in the program the step was given: spans into the `from` program's file, where
the ops it looked at were written).

Parameters. A task gives a program's compile-time parameters per preset, and those override the
defaults a step writes (a `retile` of BLOCK to 512 would be undone by the preset's BLOCK = 8192).
So the replayed program's parameters are derived (`derive_params`): for each preset, the `from`
program's values; then every parameter whose default a step changed takes the new default in
every preset; a parameter the result no longer declares is dropped; then the entry's own
`params.<preset>`, for a preset where the step's value does not fit (a test shape smaller than
the tile).

The steps' lines are found by reading the text of task.toml (`tomllib` gives values, not
positions): the `replay = [` key under the entry's `[programs.NAME]` header, then each element
of the array in turn. A sequence written in another spelling (a dotted key, a table array) is
still read; its steps are then located at the entry's header line.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tactics
from kir.diagnostics import Diagnostic, KirError, Span
from tactics.base import Value

if TYPE_CHECKING:
    from kir.program import Program

DEFAULT_FROM = "seed"


@dataclass(frozen=True)
class Step:
    """One move of a recorded sequence: a tactic, its parameter values, and where it is written."""

    tactic: str
    params: tuple[tuple[str, Value], ...]
    span: Span

    @property
    def values(self) -> dict[str, Value]:
        return dict(self.params)

    def describe(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.tactic} {args}".strip()

    def to_json(self) -> dict[str, Any]:
        return {"tactic": self.tactic, "params": dict(self.params), "line": self.span.line}


@dataclass(frozen=True)
class Recorded:
    """A program entry of task.toml made by replaying `steps` on the program `base`."""

    name: str
    base: str
    steps: tuple[Step, ...]
    span: Span  # the entry's header


# ---- reading the entry ---------------------------------------------------------------------------


def _error(rule: str, span: Span | None, message: str, hint: str = "") -> KirError:
    return KirError(Diagnostic(rule, "error", span, message, hint))


def _header_line(lines: list[str], name: str) -> int | None:
    header = re.compile(rf"^\s*\[\s*programs\s*\.\s*(\"?){re.escape(name)}\1\s*\]")
    for n, text in enumerate(lines, 1):
        if header.match(text):
            return n
    return None


def element_lines(text: str, name: str) -> tuple[int, list[tuple[int, int]]]:
    """(the line of `[programs.NAME]`, else 1; the line and column of each element of its
    `replay` array).

    The elements are found by a scan of the array's text that skips strings and comments and
    counts brackets: an element starts at the first character after `[` or after a comma at
    the array's own depth."""
    lines = text.splitlines()
    header = _header_line(lines, name)
    if header is None:
        return 1, []
    start = None
    for n in range(header, len(lines)):
        if re.match(r"^\s*\[", lines[n]):
            break  # the next table
        if re.match(r"^\s*replay\s*=", lines[n]):
            start = n
            break
    if start is None:
        return header, []
    found: list[tuple[int, int]] = []
    depth, expecting, quote = 0, False, ""
    for n in range(start, len(lines)):
        line = lines[n]
        col = line.index("=") + 1 if n == start else 0
        while col < len(line):
            ch = line[col]
            if quote:
                if ch == "\\" and quote[0] == '"':
                    col += 2
                elif line.startswith(quote, col):
                    col += len(quote)
                    quote = ""
                else:
                    col += 1
                continue
            if ch == "#":
                break
            elif ch in "\"'":
                if depth == 1 and expecting:
                    found.append((n + 1, col + 1))
                    expecting = False
                quote = ch * 3 if line.startswith(ch * 3, col) else ch
                col += len(quote) - 1
            elif ch in "[{":
                if depth == 1 and expecting:
                    found.append((n + 1, col + 1))
                    expecting = False
                depth += 1
                if depth == 1:
                    expecting = True
            elif ch in "]}":
                depth -= 1
                if depth == 0:
                    return header, found
            elif ch == "," and depth == 1:
                expecting = True
            elif not ch.isspace() and depth == 1 and expecting:
                found.append((n + 1, col + 1))
                expecting = False
            col += 1
    return header, found


def _line_span(file: Path, line: int, col: int = 1) -> Span:
    return Span(line, col, line, col + 1, str(file))


def read_entry(name: str, entry: Mapping[str, Any], toml: Path, text: str | None = None) -> Recorded:
    """The recorded sequence of the program entry `[programs.NAME]` of `toml` (its parsed value
    `entry`, which holds a `replay` key), each step checked against the tactic it names: a
    `KirError` located at the step's line of task.toml otherwise. `text`: task.toml's text,
    where the caller has read it already."""
    if text is None:
        text = toml.read_text()
    header, element_at = element_lines(text, name)
    where = _line_span(toml, header)
    if "file" in entry:
        raise _error(
            "task.replay",
            where,
            f"program `{name}` has both a file and a replay sequence",
            "a replayed program is made from its `from` program: leave `file` out",
        )
    base = entry.get("from", DEFAULT_FROM)
    if not isinstance(base, str) or base == name:
        raise _error("task.replay", where, f"program `{name}`: `from` names another program of the task, not {base!r}")
    raw = entry["replay"]
    if not isinstance(raw, list) or not raw:
        raise _error(
            "task.replay",
            where,
            f"program `{name}`: `replay` is a non-empty list of steps",
            'write replay = [{ tactic = "warps", warps = 16 }, ...]',
        )
    steps = []
    for i, item in enumerate(raw):
        span = _line_span(toml, *element_at[i]) if i < len(element_at) else where
        steps.append(_step(name, i, item, span))
    return Recorded(name, base, tuple(steps), where)


def _step(name: str, i: int, item: object, span: Span) -> Step:
    label = f"program `{name}`, step {i + 1}"
    if not isinstance(item, dict) or not isinstance(item.get("tactic"), str):
        raise _error(
            "task.replay",
            span,
            f"{label}: a step is a table {{ tactic = NAME, PARAM = VALUE ... }}, not {item!r}",
            'e.g. { tactic = "warps", warps = 16 }',
        )
    try:
        tactic = tactics.get(item["tactic"])
    except KirError as err:
        raise KirError([_at(d, span, label) for d in err.diagnostics]) from None
    problems = []
    params: list[tuple[str, Value]] = []
    for key, value in item.items():
        if key == "tactic":
            continue
        if key not in tactic.param_names:
            problems.append(_at(tactic._unknown_param(key, span), span, label))
            continue
        bad = tactic.param(key).check(tactic.name, value, span)
        if bad is not None:
            problems.append(_at(bad, span, label))
        else:
            params.append((key, value))
    missing = [p.name for p in tactic.params if p.default is None and p.name not in item]
    for p in missing:
        problems.append(
            Diagnostic(
                "task.replay",
                "error",
                span,
                f"{label}: tactic {tactic.name} needs a value for {p}",
                f"{p}: {tactic.param(p).doc}",
            )
        )
    if problems:
        raise KirError(problems)
    return Step(tactic.name, tuple(params), span)


def _at(d: Diagnostic, span: Span, label: str) -> Diagnostic:
    """`d` (a tactic's `tactic.unknown` or `tactic.param`) as the task's error: `task.replay` at
    the step's line, its message saying which step. It is task.toml that is wrong, not a
    command line (a usage error, exit status 2, where `kir tactics apply` is given the same)."""
    return Diagnostic("task.replay", d.severity, span, f"{label}: {d.message}", d.hint, d.related)


def read_task(folder: str | Path) -> tuple[dict[str, Any], dict[str, Recorded]]:
    """A task folder's task.toml (its parsed table) and every recorded sequence in it, by
    program name. The rest of task.toml is the task loader's to check (`agent.tasks`); what
    this reads of it is the `programs` table."""
    toml = Path(folder) / "task.toml"
    if not Path(folder).is_dir():  # nothing to point at: a usage error
        raise _error("task.missing", None, f"no task folder at {folder}", "a folder with a task.toml")
    try:
        text = toml.read_text()
    except OSError as err:
        raise _error(
            "task.missing", None, f"cannot read {toml}: {err.strerror or err}", "a folder with a task.toml"
        ) from None
    try:
        meta = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"line (\d+)", str(err))
        raise _error("task.toml", _line_span(toml, int(m.group(1)) if m else 1), f"not valid TOML: {err}") from None
    programs = meta.get("programs", {})
    found = {}
    if isinstance(programs, dict):
        for name, entry in programs.items():
            if isinstance(entry, dict) and "replay" in entry:
                found[name] = read_entry(name, entry, toml, text)
    return meta, found


# ---- replaying -----------------------------------------------------------------------------------


def trace(program: Program, steps: Sequence[Step], target: str | None = None, label: str = "") -> list[Program]:
    """The programs of a replay: `program`, then the result of each step in turn. A `KirError`
    when a step does not apply: `tactic.replay.step` at the step's line, then the tactic's
    reasons (located in the program the step was given)."""
    out = [program]
    for i, step in enumerate(steps):
        tactic = tactics.get(step.tactic)
        current = out[-1]
        try:
            out.append(tactic.apply(current, target=target, **step.values))
        except KirError as err:
            head = Diagnostic(
                "tactic.replay.step",
                "error",
                step.span,
                f"{label or 'replay'}: step {i + 1} ({step.describe()}) does not apply to the program of step {i}",
                f"the {len(steps)} steps run in order, each on the result of the one before; the reasons follow",
            )
            raise KirError([head, *err.diagnostics]) from None
    return out


def run(program: Program, steps: Sequence[Step], target: str | None = None, label: str = "") -> Program:
    """The program the steps make of `program` (`trace`'s last)."""
    return trace(program, steps, target, label)[-1]


def derive_params(
    programs: Sequence[Program],
    base: Mapping[str, Mapping[str, int]],
    own: Mapping[str, Mapping[str, int]],
    presets: Sequence[str],
) -> dict[str, dict[str, int]]:
    """The replayed program's parameters per preset (see the module docstring): `base`'s (the
    `from` program's, per preset), then each parameter whose default a step of the trace
    `programs` changed, at its last default, those the result still declares; then `own` (the
    entry's `params.<preset>`)."""
    changed: dict[str, int] = {}
    for before, after in zip(programs, programs[1:], strict=False):
        for name, value in after.params.items():
            if before.params.get(name) != value:
                changed[name] = value
    declared = set(programs[-1].params)
    out: dict[str, dict[str, int]] = {}
    for preset in presets:
        values = {k: v for k, v in {**base.get(preset, {}), **changed}.items() if k in declared}
        values.update(own.get(preset, {}))  # the entry's own are checked against the program with the rest
        if values:
            out[preset] = values
    return out
