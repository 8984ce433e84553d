"""The `kir` command: check, format, run, lower, compile, cost and hash KIR programs.

Every outcome is a list of `Diagnostic`s, printed rustc-style on stdout, or with `--json` as
one JSON object (`envelope`: `{"schema": "kir.<command>/1", "file", "ok", "diagnostics", ...}`,
each command's own fields in `SCHEMAS`). Exit status: 0 when there is no error, 1 when the
program (or an input) has errors, 2 when the command line is wrong or the machine lacks what
it asks for (`is_usage`: an unknown option, target, backend, preset or parameter, a bad value,
a file that cannot be read, no CUDA device for a GPU backend, a compiler that is not
installed). A usage error is one `error[...]` line and at most a hint line; no input, however
malformed, gets a Python traceback: an unexpected exception becomes an `internal.error`
diagnostic.

The flags mean the same in every command (`--target/-t`, `--backend/-b`, `--shape/-s`,
`--param/-p`, `--preset`, `--json`, `--out/-o`, `--timeout`): each is one `Annotated` type
below, with one help text.

Start-up: this module imports typer and the standard library only. The xdsl dialect, the
parser, numpy and the packages above `kir` are imported by the command that needs them, so
`kir --help` and `kir version` do not pay for them (`tests/cli/test_startup.py`).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from typer import _click
from typer.core import TyperGroup

from kir import __version__
from kir.diagnostics import Diagnostic, KirError
from kir.names import suggest

if TYPE_CHECKING:
    from kir.program import Program

# ---- the vocabulary ------------------------------------------------------------------------------
# Written out rather than imported, so that naming them costs no import of the dialect;
# tests/cli/test_flags.py keeps it equal to its source. The backends are the lowering's targets,
# which this package does not know: the command assembled above it says them (`set_help`).

TARGETS = ("sm_90", "sm_80", "gfx942", "gfx90a", "mtia-sim", "interp")  # kir.dialect.structure.TARGETS
# One default for every command: `test` is the preset every machine can run (the CPU interpreters
# and the simulator finish it in seconds; the bench shapes take them hours), and the same file
# then means the same shapes and parameters in `run`, `cost` and `bench` unless --preset says
# otherwise. A task without a `test` preset (a bare KernelBench file) runs at its own shapes.
DEFAULT_PRESET = "test"
MAX_TIMEOUT_S = 86400.0  # a day: past that a number is a mistake (and subprocess timeouts overflow)
MAX_SEED = 2**32 - 1  # the harness's fresh seeds are under 2**31; torch would overflow past 2**63

TARGET_HELP = (
    f"The target: {', '.join(TARGETS)} (cost also takes a chip table: h100, h200, a100, mi250x, mi300x). "
    "Default: the kernel's declared target (compile: the backend's own when it cannot compile for that one)."
)
BACKEND_HELP = "The backend: a target to lower and compile for, or a runtime to run on."
PRESET_HELP = (
    f"A task's shape preset: test (small shapes, what a CPU runs) or bench (the GPU shapes), or another "
    f"that the task's task.toml names, or scale:F (every size of the reference times F). Default: {DEFAULT_PRESET}."
)
PARAM_HELP = "A compile-time parameter's value, an integer: -p BLOCK=256 (repeatable)."
SHAPE_HELP = "A shape symbol's value, a positive integer: -s N=4096 (repeatable)."
JSON_HELP = "Print one JSON object (schema kir.COMMAND/1, docs/cli.md) instead of text."


def _in_range(low: int, high: int) -> Callable[[Any], Any]:
    """A callback that checks an integer option (or each value of a repeatable one)."""

    def check(value):
        for v in value if isinstance(value, list | tuple) else [] if value is None else [value]:
            if not low <= v <= high:
                raise typer.BadParameter(f"{v} is not in {low}..{high}")
        return value

    return check


def _seconds(value: float | None) -> float | None:
    """A timeout: a finite number of seconds, more than 0 and at most a day."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise typer.BadParameter(f"{value:g} is not a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    return value


FileArg = Annotated[
    str,
    typer.Argument(
        metavar="FILE", help="A KIR source file (one kernel, or several launched in order).", show_default=False
    ),
]
_TARGET = typer.Option("--target", "-t", metavar="TARGET", help=TARGET_HELP, show_default=False)
_BACKEND = typer.Option("--backend", "-b", metavar="BACKEND", help=BACKEND_HELP, show_default=False)
_BACKENDS = typer.Option("--backend", "-b", metavar="BACKEND", help=BACKEND_HELP + " Repeatable.", show_default=False)
TargetOpt = Annotated[str | None, _TARGET]
BackendOpt = Annotated[str | None, _BACKEND]
BackendsOpt = Annotated[list[str] | None, _BACKENDS]  # bench's: the same flag, repeatable


def set_help(target: str | None = None, backend: str | None = None) -> None:
    """The help of --target and --backend in every command, for the command assembled above this
    package, which knows the targets and backends (typer reads it when it builds the commands)."""
    if target is not None:
        _TARGET.help = target
    if backend is not None:
        _BACKEND.help = backend
        _BACKENDS.help = backend + " Repeatable."


ParamOpt = Annotated[
    list[str] | None, typer.Option("--param", "-p", metavar="NAME=VALUE", help=PARAM_HELP, show_default=False)
]
ShapeOpt = Annotated[
    list[str] | None, typer.Option("--shape", "-s", metavar="SYMBOL=VALUE", help=SHAPE_HELP, show_default=False)
]
PresetOpt = Annotated[str | None, typer.Option("--preset", metavar="PRESET", help=PRESET_HELP, show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help=JSON_HELP)]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        callback=_seconds,
        help="Seconds before a child process is killed (at most a day).",
    ),
]
# The old spellings, kept working and left out of the help: `--to` is --backend, `--arch` is
# --target, lower's `--output` is --out.
ToAlias = Annotated[str | None, typer.Option("--to", hidden=True, show_default=False)]
ArchAlias = Annotated[str | None, typer.Option("--arch", hidden=True, show_default=False)]
OutputAlias = Annotated[str | None, typer.Option("--output", hidden=True, show_default=False)]

# ---- JSON: one object per command ----------------------------------------------------------------

# Every object has "schema" ("kir.check/1", "kir.rules.add/1"), "file" (the input, or null),
# "ok" (no error; for run: the program is correct) and "diagnostics" (Diagnostic JSON, errors
# first); then the command's fields, null where the command did not get that far.
COMMON_FIELDS = ("schema", "file", "ok", "diagnostics")
SCHEMAS: dict[str, tuple[str, ...]] = {
    "fmt": ("canonical", "written", "text"),
    "hash": ("kernel", "hash"),
    "interp": ("kernel", "out", "arrays"),
    "version": ("version",),
    "rules list": ("rules",),
    "rules add": ("rule", "dry_run", "installed"),
    "rules learned": ("rules",),
    "rules retire": ("rule", "removed"),
    "tactics list": ("tactics",),
    "tactics apply": ("kernel", "tactic", "params", "text"),
    "tactics replay": ("task", "program", "from", "steps", "kernel", "params", "same_ir_as", "text"),
}


# The JSON object of a usage error, for the commands whose --json prints something other than an
# envelope (the pipeline's commands print a Record): set by the package that declares them.
USAGE_OBJECTS: dict[str, Callable[[Diagnostic], dict[str, Any]]] = {}


def envelope(command: str, file: str | None, diags: list[Diagnostic], fields: dict[str, Any]) -> dict[str, Any]:
    """The JSON object of `command`: the common fields, then the command's own (null when absent)."""
    out: dict[str, Any] = {
        "schema": f"kir.{command.replace(' ', '.')}/1" if command else "kir/1",  # no command: `kir --json`
        "file": file,
        "ok": fields.get("ok", not any(d.is_error for d in diags)),
        "diagnostics": [d.to_json() for d in diags],
    }
    for key in SCHEMAS.get(command, ()):
        out[key] = fields.get(key)
    return out


# ---- exit status ---------------------------------------------------------------------------------

# Besides every `cli.*` rule: what means "the command line is wrong" or "this machine cannot do
# what it asks" rather than "the program is wrong" (a tactic's name or parameter value is the
# command line's: `kir tactics apply`).
USAGE_RULES = frozenset(
    {"io.read", "io.write", "task.missing", "compile.tool-missing", "tactic.unknown", "tactic.param"}
)


def is_usage(rule: str) -> bool:
    return rule.startswith("cli.") or rule in USAGE_RULES


def exit_code(diags: list[Diagnostic]) -> int:
    errors = [d for d in diags if d.is_error]
    if any(is_usage(d.rule) for d in errors):
        return 2
    return 1 if errors else 0


def usage(message: str, hint: str = "", rule: str = "cli.usage") -> KirError:
    return KirError(Diagnostic(rule, "error", None, message, hint))


_suggest = suggest  # "did you mean 'X'?"


def _one_of(what: str, value: str, allowed, rule: str, context: str = "") -> None:
    """A usage error unless `value` is one of `allowed`."""
    if value not in allowed:
        hint = _suggest(value, allowed) or f"one of {', '.join(allowed)}"
        raise usage(f"unknown {what} '{value}'{context}", hint, rule)


def _merged(new: str | None, old: str | None, new_flag: str, old_flag: str) -> str | None:
    """A flag given in its new or its old (hidden) spelling; both must agree."""
    if old is None or new == old:
        return new
    if new is None:
        return old
    raise usage(f"{new_flag} {new} and {old_flag} {old} disagree", f"give {new_flag} alone")


# ---- typer's value coercion, without pydantic ------------------------------------------------------

# typer 0.29 converts every parameter through a pydantic TypeAdapter, and importing pydantic
# costs ~0.1 s: more than the rest of `kir version` together. The annotations the commands use
# (str, int, float, bool and lists of them; ranges are checked by callbacks) need no pydantic,
# so `KirGroup` gives their parameters this conversion. It leans on typer's internals
# (`_runtime_param`, `RuntimeParam`, pinned by typer<0.30): where they are not as expected,
# typer's own conversion stays (slower, and tests/cli/test_startup.py says so).
_PLAIN = (str, int, float, bool)


def _plain_coercion(param) -> Any | None:
    try:
        from typer._coercion import RuntimeParam
    except ImportError:
        return None
    descriptor = getattr(param, "type_descriptor", None)
    annotation: Any = getattr(descriptor, "annotation", None)  # typer's internals: untyped here
    item: Any = annotation.__args__[0] if getattr(annotation, "__origin__", None) is list else annotation
    if descriptor is None or item not in _PLAIN or descriptor.is_ranged or descriptor.is_choice:
        return None

    class Plain(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if isinstance(value, list | tuple):
                return [self._one(v, param, ctx) for v in value]
            return self._one(value, param, ctx)

        def _one(self, value: Any, param: Any, ctx: Any) -> Any:
            if item is bool:
                if isinstance(value, bool):
                    return value
                raise _click.exceptions.BadParameter(f"{value!r} is not a flag's value", ctx=ctx, param=param)
            if isinstance(value, item) and not isinstance(value, bool) or item is str:
                return value if isinstance(value, item) else str(value)
            try:
                return item(str(value).strip())
            except ValueError:
                kind = {int: "an integer", float: "a number", str: "text"}[item]
                raise _click.exceptions.BadParameter(f"{value!r} is not {kind}", ctx=ctx, param=param) from None

    return Plain(parameter_info=descriptor.parameter_info, annotation=annotation)


def _lighten(param) -> None:
    if getattr(param, "_runtime_param", False) is None:  # typer's, not built yet
        plain = _plain_coercion(param)
        if plain is not None:
            param._runtime_param = plain


def _without_pydantic(command) -> None:
    for param in getattr(command, "params", []):
        _lighten(param)
    # the --help option is made when a command is parsed: lighten it as it is made
    original = getattr(command, "get_help_option", None)
    if original is not None and not getattr(original, "lightened", False):

        def get_help_option(ctx):
            option = original(ctx)
            if option is not None:
                _lighten(option)
            return option

        get_help_option.lightened = True  # type: ignore[attr-defined]  # a mark on the function
        command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        _without_pydantic(sub)


# ---- click's usage errors: one line ----------------------------------------------------------------


class KirGroup(TyperGroup):
    """The `kir` group: click's own usage errors (an unknown option, a missing argument or
    value, a value of the wrong type) are printed like every other diagnostic: one
    `error[cli.usage]` line and a hint naming the help, on stdout, or the command's JSON
    object when `--json` is on the command line; exit status 2. No command at all prints the
    help (exit status 2, as click has it)."""

    def main(  # type: ignore[override]  # click's other arguments pass through **extra
        self,
        args=None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        _without_pydantic(self)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
        except _click.exceptions.NoArgsIsHelpError as err:
            typer.echo(err.format_message())
            code = 2
        except _click.exceptions.UsageError as err:
            _print_usage_error(err, argv)
            code = 2
        except _click.exceptions.ClickException as err:  # FileError and the like: not raised today
            _emit(Diagnostic("cli.usage", "error", None, _sentence(err.format_message())).render())
            code = err.exit_code
        except typer.Abort:  # end of input at a prompt (no command prompts today)
            _emit(Diagnostic("cli.usage", "error", None, "aborted").render())
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code)


def _sentence(message: str) -> str:
    """click's "No such option: --x." as a diagnostic message: "no such option: --x"."""
    message = " ".join(message.split()).rstrip(".")
    return message[:1].lower() + message[1:]


def _print_usage_error(err: _click.exceptions.UsageError, argv: list[str]) -> None:
    ctx = err.ctx
    path = ctx.command_path if ctx is not None else "kir"
    diag = Diagnostic("cli.usage", "error", None, _sentence(err.format_message()), f"see `{path} --help`")
    options = argv[: argv.index("--")] if "--" in argv else argv  # after `--`, a file named --json
    if "--json" in options:
        names = []  # the subcommand's own names: the program's name may be `python -m agent.cli`
        while ctx is not None and ctx.parent is not None:
            names.append(ctx.info_name or "")
            ctx = ctx.parent
        command = " ".join(reversed(names))
        make = USAGE_OBJECTS.get(command)
        _emit(json.dumps(make(diag) if make else envelope(command, None, [diag], {}), indent=2))
    else:
        _emit(diag.render())


def new_app() -> typer.Typer:
    """The `kir` command group, without commands: each package adds its own (`register`), and
    the top of the tree (`agent.cli`) assembles them."""
    return typer.Typer(
        name="kir",
        cls=KirGroup,
        help="KIR: a typed, hardware-explicit kernel IR. Check, format, lower, compile, cost, run and hash KIR "
        "programs. Exit status: 0 clean, 1 the program has errors, 2 a usage error (README: 'The command line').",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


# ---- outcomes ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a command has to say: diagnostics, the source they point into, the lines to print
    when there is no error, and the fields of its JSON object."""

    file: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: str | None = None
    lines: list[str] = field(default_factory=list)  # printed when there is no error
    text: str = ""  # printed as is, before the diagnostics (canonical text, a diff)
    fields: dict[str, Any] = field(default_factory=dict)  # the command's JSON fields
    json: dict[str, Any] | None = None  # the JSON object to print instead of the envelope (a Record)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def fail(self, diags: list[Diagnostic]) -> Outcome:
        self.diagnostics += diags
        return self


def _guarded(file: str | None, body: Callable[[Outcome], Outcome | None], during: str) -> Outcome:
    """Run a command's body; a `KirError` adds its diagnostics, anything else is an
    `internal.error`, never a traceback."""
    outcome = Outcome(file)
    try:
        body(outcome)
    except KirError as err:
        outcome.diagnostics += err.diagnostics
    except Exception as err:
        outcome.diagnostics.append(_internal(err, during))
    try:
        outcome.diagnostics = _unique_sorted(outcome.diagnostics)
    except Exception as err:  # a malformed diagnostic (say, an unknown severity) from a plug-in
        outcome.diagnostics.append(_internal(err, "sorting the diagnostics"))
    return outcome


def _internal(err: BaseException, during: str) -> Diagnostic:
    from kir.check import internal_error

    return internal_error(err, None, during)


def _unique_sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in sorted(diags, key=Diagnostic.sort_key):
        if d not in out:
            out.append(d)
    return out


def _finish(outcome: Outcome, json_out: bool, command: str) -> None:
    """Print the outcome and exit with its status."""
    raise typer.Exit(_print(outcome, json_out, command))


def _print(outcome: Outcome, json_out: bool, command: str) -> int:
    """Print the outcome; its exit status."""
    diags = outcome.diagnostics
    code = exit_code(diags)
    if json_out:
        # Already in order (`_guarded` sorts), so no second sort that could fail here.
        payload = outcome.json if outcome.json is not None else envelope(command, outcome.file, diags, outcome.fields)
        _emit(json.dumps(payload, indent=2, default=str))
    elif code == 2:  # a usage error: its line (and hint), nothing else
        _emit(_render([d for d in diags if d.is_error], outcome.source))
    else:
        if outcome.text:
            _emit(outcome.text, newline=False)
        if diags:
            _emit(_render(diags, outcome.source))
            if outcome.has_errors or outcome.lines:
                _emit("")
        if outcome.has_errors:
            _emit(f"{outcome.file}: {_counts(diags)}")
        else:
            for line in outcome.lines:
                _emit(line)
    return code


def _render(diags: list[Diagnostic], source: str | None) -> str:
    from kir.diagnostics import render_all

    try:
        return render_all(diags, source)
    except Exception:  # never lose the diagnostics to a rendering bug: print them bare
        return "\n".join(f"{d.span or ''}: {d.severity}[{d.rule}]: {d.message}" for d in diags)


def _counts(diags: list[Diagnostic]) -> str:
    parts = []
    for severity in ("error", "warning"):
        n = sum(1 for d in diags if d.severity == severity)
        if n:
            parts.append(f"{n} {severity}{'s' if n != 1 else ''}")
    return ", ".join(parts) or "ok"


# ---- output: plain text unless stdout is a terminal ---------------------------------------------

_STYLES = (
    (r"\berror\[[^\]]*\]", "bold red"),
    (r"\bwarning\[[^\]]*\]", "bold yellow"),
    (r"\bhint\[[^\]]*\]", "bold cyan"),
    (r"(?m)^\s*\d* \| +\^+.*$", "red"),
    (r"(?m)^  = (hint|counterexample):", "cyan"),
    (r"(?m)^  note:", "blue"),
    (r"(?m)(?<=: )ok\b.*$", "green"),
)


def _colour() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _emit(text: str, newline: bool = True) -> None:
    if not _colour():
        try:
            typer.echo(text, nl=newline)
        except UnicodeEncodeError:  # a source line the terminal's encoding cannot show
            encoding = getattr(sys.stdout, "encoding", None) or "ascii"
            safe = text.encode(encoding, errors="backslashreplace").decode(encoding)
            typer.echo(safe, nl=newline)
        return
    from rich.console import Console  # only on a terminal: rich costs start-up time
    from rich.text import Text

    styled = Text(text)
    for pattern, style in _STYLES:
        styled.highlight_regex(re.compile(pattern), style)
    Console(force_terminal=True, highlight=False, soft_wrap=True).print(styled, end="\n" if newline else "")


# ---- NAME=VALUE flags ----------------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(-?(?:0[xX][0-9a-fA-F]+|[0-9]+))\s*$")
_INT64 = 2**63  # values past a 64-bit integer are a mistake, and would overflow the C backends


def parse_param_specs(specs: list[str], flag: str = "--param") -> tuple[dict[str, int], list[Diagnostic]]:
    """`NAME=VALUE` strings (decimal or 0x hex, optionally negative; a shape value positive) as a
    dict, or `cli.param` / `cli.shape` diagnostics."""
    rule = "cli.shape" if flag == "--shape" else "cli.param"
    values: dict[str, int] = {}
    diags: list[Diagnostic] = []
    for spec in specs:
        m = _ASSIGNMENT.match(spec)
        # decimal (a leading zero too: 010 is ten, not an error) or 0x hex
        value = int(m.group(2), 16 if "x" in m.group(2).lower() else 10) if m else None
        if value is None or not -_INT64 < value < _INT64 or (flag == "--shape" and value <= 0):
            kind = "a positive integer" if flag == "--shape" else "an integer"
            diags.append(
                Diagnostic(rule, "error", None, f"bad {flag} '{spec}'", f"write {flag} NAME=VALUE with {kind} value")
            )
            continue
        name = cast(re.Match[str], m).group(1)  # it matched: value is not None
        if name in values:
            diags.append(Diagnostic(rule, "error", None, f"{flag} {name} is given twice"))
            continue
        values[name] = value
    return values, diags


def _specs(specs: list[str] | None, flag: str = "--param") -> dict[str, int]:
    values, bad = parse_param_specs(specs or [], flag)
    if bad:
        raise KirError(bad)
    return values


def _check_target(target: str | None) -> None:
    if target is not None:
        _one_of("target", target, TARGETS, "cli.target")


# ---- reading the program -------------------------------------------------------------------------


def _parse(outcome: Outcome) -> Program:
    from kir.check import read_source
    from kir.parser import parse

    file = cast(str, outcome.file)  # a command that parses reads a file
    outcome.source = read_source(file)
    return parse(outcome.source, file=file)


def _parse_with_params(outcome: Outcome, overrides: dict[str, int]) -> Program:
    """The program, or a `KirError` for a parameter it does not have."""
    from kir.check import unknown_params

    program = _parse(outcome)
    usage_errors = unknown_params(program, overrides)
    if usage_errors:
        raise KirError(usage_errors)
    return program


def _writable(path: str) -> None:
    """Refuse, before any work, an output path that cannot take the file: one in a folder that
    does not exist, a directory, and a FIFO or a socket (opening one for writing blocks until a
    reader comes). A regular file is replaced; a device (/dev/null) is written to."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        parent = Path(path).parent
        if not parent.is_dir():
            raise usage(f"cannot write {path}: there is no folder {parent}", rule="io.write") from None
        return
    if stat.S_ISDIR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise usage(f"cannot write {path}: it is not a regular file", rule="io.write")


# ---- commands ----------------------------------------------------------------------------------


def fmt(
    file: FileArg,
    write: Annotated[bool, typer.Option("--write", "-w", help="Rewrite the file in place.")] = False,
    check_only: Annotated[
        bool, typer.Option("--check", help="Print nothing but a diff; exit 1 if the file is not canonical.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Print the canonical text of a program (comments kept), or rewrite the file with it."""

    def body(out: Outcome) -> None:
        if write and check_only:
            raise usage("--write and --check exclude each other")
        program = _parse(out)
        text = canonical_text(program)
        canonical = text == out.source
        out.fields.update(canonical=canonical, written=False, text=text)
        if check_only:
            if not canonical:
                diff = "".join(
                    difflib.unified_diff(
                        cast(str, out.source).splitlines(keepends=True),  # _parse read both
                        text.splitlines(keepends=True),
                        fromfile=cast(str, out.file),
                        tofile=f"{out.file} (canonical)",
                    )
                )
                out.text = diff if diff.endswith("\n") else diff + "\n"
                out.fail(
                    [
                        Diagnostic(
                            "fmt.not-canonical",
                            "error",
                            None,
                            f"{out.file} is not in canonical form",
                            f"run `kir fmt --write {out.file}`",
                        )
                    ]
                )
            else:
                out.lines.append(f"{out.file}: ok (canonical)")
        elif write:
            if not canonical:
                try:
                    with open(cast(str, out.file), "w", encoding="utf-8", newline="") as f:
                        f.write(text)
                except (OSError, ValueError) as err:
                    reason = getattr(err, "strerror", None) or str(err)
                    raise usage(f"cannot write {out.file}: {reason}", rule="io.write") from None
                out.fields["written"] = True
                out.lines.append(f"{out.file}: formatted")
            else:
                out.lines.append(f"{out.file}: ok (already canonical)")
        elif not json_out:
            out.text = text

    _finish(_guarded(file, body, "formatting the program"), json_out, "fmt")


def canonical_text(program: Program) -> str:
    """The program's canonical text, checked to parse back to the same IR: `kir fmt` must never
    write a file that means something else."""
    from kir.parser import parse
    from kir.program import same_ir

    text = program.text()
    again = parse(text, file=program.file)
    if not same_ir(program, again):
        raise KirError(
            Diagnostic(
                "internal.fmt-round-trip",
                "error",
                program.span(),
                "the canonical text of this program does not parse back to the same IR; the file is left as is",
                "this is a bug in the KIR printer; please report it with the input",
            )
        )
    return text


def interp(
    file: FileArg,
    inputs: Annotated[
        str,
        typer.Option(
            "--inputs",
            "-i",
            metavar="IN.npz",
            help="Arrays named after the kernel's arguments; output arguments may be absent.",
            show_default=False,
        ),
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out",
            "-o",
            metavar="OUT.npz",
            help="Where to save every tensor argument after the run.",
            show_default=False,
        ),
    ],
    param: ParamOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run a program on the reference interpreter.

    Arrays are exchanged in .npz archives. npz cannot store bf16 or fp8 portably, so arguments
    of dtype f16, bf16, f8e4m3 and f8e5m2 are read from float32 arrays (rounded to nearest even)
    and saved as float32. Integer, bool, f32 and f64 arguments are stored as their own dtype.
    """

    def body(outcome: Outcome) -> None:
        overrides = _specs(param)
        _writable(out)
        from kir.check import verify_ops

        program = _parse_with_params(outcome, overrides)
        outcome.fields.update(kernel=program.name)
        outcome.diagnostics += verify_ops(program)
        if outcome.has_errors:
            return
        results = run_program(program, inputs, out, overrides, outcome)
        if results is not None:
            outcome.fields.update(out=out, arrays=results)
            outcome.lines.append(f"{outcome.file}: ok (kernel {program.name}; wrote {out}: {', '.join(results)})")

    _finish(_guarded(file, body, "running the program"), json_out, "interp")


def run_program(
    program: Program, inputs_path: str, out_path: str, overrides: dict[str, int], outcome: Outcome
) -> list[str] | None:
    """Load the inputs, run the interpreter, save the arguments; the names saved, or None when
    diagnostics stopped it (they are added to `outcome`)."""
    from kir.arrays import inputs_for, outputs_for, read_npz, write_npz

    arrays = read_npz(inputs_path)
    inputs, diags = inputs_for(program, arrays, inputs_path)
    outcome.diagnostics += diags
    if outcome.has_errors:
        return None
    try:
        from kir.interp import run
    except ImportError as err:
        outcome.fail(
            [Diagnostic("interp.unavailable", "error", None, f"the reference interpreter cannot be loaded: {err}")]
        )
        return None
    params = {**program.params, **overrides}
    outputs = run(program, dict(inputs), params)
    saved = outputs_for(program, inputs, outputs or {})
    write_npz(out_path, saved)
    return list(saved)


def hash_(file: FileArg, json_out: JsonOpt = False) -> None:
    """Print the content hash of a program (sha256 of its canonical text without comments)."""

    def body(out: Outcome) -> None:
        program = _parse(out)
        out.fields.update(kernel=program.name, hash=program.content_hash())
        out.lines.append(out.fields["hash"])

    _finish(_guarded(file, body, "hashing the program"), json_out, "hash")


def version(json_out: JsonOpt = False) -> None:
    """Print the version of KIR."""
    if json_out:
        _emit(json.dumps(envelope("version", None, [], {"version": __version__}), indent=2))
    else:
        typer.echo(f"kir {__version__}")


def register(app: typer.Typer) -> None:
    """Add the language's own commands: format, hash, interpret, version."""
    app.command("fmt")(fmt)
    app.command("interp")(interp)
    app.command("hash")(hash_)
    app.command("version")(version)
