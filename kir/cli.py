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
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer import _click
from typer.core import TyperGroup

from kir import __version__
from kir.diagnostics import Diagnostic, KirError

if TYPE_CHECKING:
    from kir.program import Program

# ---- the vocabulary ------------------------------------------------------------------------------
# Written out rather than imported, so that naming them costs no import of the dialect, the
# lowering or the harness; tests/cli/test_flags.py keeps each equal to its source.

TARGETS = ("sm_90", "sm_80", "gfx942", "gfx90a", "mtia-sim", "interp")  # kir.dialect.structure.TARGETS
COMPILE_BACKENDS = ("triton", "gluon", "cuda", "hip", "mtia-sim")  # lowering's emitters and compile drivers
RUN_BACKENDS = ("interp", "triton-interp", "mtia-sim", "triton", "gluon", "cuda")  # agent.harness.backends
GPU_BACKENDS = ("triton", "gluon", "cuda")  # agent.harness.backends.GPU_BACKENDS: they need a CUDA device
BACKENDS = ("triton", "gluon", "cuda", "hip", "mtia-sim", "interp", "triton-interp")
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
BACKEND_HELP = (
    "The backend: triton, gluon, cuda, hip or mtia-sim (lower, compile); interp, triton-interp, mtia-sim, "
    "triton, gluon or cuda (run); triton, gluon or cuda (bench)."
)
PRESET_HELP = (
    f"A task's shape preset: test (small shapes, what a CPU runs) or bench (the GPU shapes), or another "
    f"that the task's task.toml names. Default: {DEFAULT_PRESET}."
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


FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A KIR source file (one kernel).", show_default=False)]
TargetOpt = Annotated[
    str | None, typer.Option("--target", "-t", metavar="TARGET", help=TARGET_HELP, show_default=False)
]
BackendOpt = Annotated[
    str | None, typer.Option("--backend", "-b", metavar="BACKEND", help=BACKEND_HELP, show_default=False)
]
BackendsOpt = Annotated[  # bench's: the same flag, repeatable
    list[str] | None,
    typer.Option("--backend", "-b", metavar="BACKEND", help=BACKEND_HELP + " Repeatable.", show_default=False),
]
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
    "check": ("kernel", "target", "ops"),
    "fmt": ("canonical", "written", "text"),
    "hash": ("kernel", "hash"),
    "interp": ("kernel", "out", "arrays"),
    "lower": ("backend", "entry", "out", "source"),
    "compile": ("backend", "target", "report"),
    "cost": ("target", "preset", "estimate"),
    "run": ("task", "backend", "preset", "stage", "metrics", "log_tail"),
    "version": ("version",),
    "rules list": ("rules",),
    "rules add": ("rule", "dry_run", "installed"),
}


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
# what it asks" rather than "the program is wrong".
USAGE_RULES = frozenset({"io.read", "io.write", "task.missing", "compile.tool-missing"})


def is_usage(rule: str) -> bool:
    return rule.startswith("cli.") or rule in USAGE_RULES


def exit_code(diags: list[Diagnostic]) -> int:
    errors = [d for d in diags if d.is_error]
    if any(is_usage(d.rule) for d in errors):
        return 2
    return 1 if errors else 0


def usage(message: str, hint: str = "", rule: str = "cli.usage") -> KirError:
    return KirError(Diagnostic(rule, "error", None, message, hint))


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


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
    annotation = getattr(descriptor, "annotation", None)
    item = annotation.__args__[0] if getattr(annotation, "__origin__", None) is list else annotation
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

        get_help_option.lightened = True
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

    def main(
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
        command = " ".join(path.split()[1:])
        _emit(json.dumps(envelope(command, None, [diag], {}), indent=2))
    else:
        _emit(diag.render())


app = typer.Typer(
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
    diags = outcome.diagnostics
    code = exit_code(diags)
    if json_out:
        # Already in order (`_guarded` sorts), so no second sort that could fail here.
        _emit(json.dumps(envelope(command, outcome.file, diags, outcome.fields), indent=2, default=str))
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
    raise typer.Exit(code)


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
        name = m.group(1)
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


def unknown_params(program: Program, overrides: dict[str, int]) -> list[Diagnostic]:
    diags = []
    for name in overrides:
        if name not in program.params:
            known = ", ".join(program.params) or "none"
            diags.append(
                Diagnostic(
                    "cli.param",
                    "error",
                    None,
                    f"no parameter {name} in kernel {program.name}",
                    _suggest(name, program.params) or f"parameters: {known}",
                )
            )
    return diags


def _check_target(target: str | None) -> None:
    if target is not None:
        _one_of("target", target, TARGETS, "cli.target")


# ---- reading the program -------------------------------------------------------------------------


def _parse(outcome: Outcome) -> Program:
    from kir.check import read_source
    from kir.parser import parse

    outcome.source = read_source(outcome.file)
    return parse(outcome.source, file=outcome.file)


def _parse_with_params(outcome: Outcome, overrides: dict[str, int]) -> Program:
    """The program, or a `KirError` for a parameter it does not have."""
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


@app.command()
def check(file: FileArg, target: TargetOpt = None, param: ParamOpt = None, json_out: JsonOpt = False) -> None:
    """Parse and verify a program (types, target legality, resources, bounds, synchronization,
    learned rules) for its declared target or --target, with --param's values; print its
    diagnostics."""

    def body(out: Outcome) -> None:
        _check_target(target)
        overrides = _specs(param)
        from kir.check import check_program, op_count

        program = _parse_with_params(out, overrides)
        if overrides:
            program = program.with_params(**overrides)
        effective = target or program.kernel.target.data
        out.fields.update(kernel=program.name, target=effective)
        out.diagnostics += check_program(program, target)
        out.fields["ops"] = op_count(program)
        out.lines.append(f"{out.file}: ok (kernel {program.name}, {out.fields['ops']} ops)")

    _finish(_guarded(file, body, "checking the program"), json_out, "check")


@app.command()
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
                        out.source.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        fromfile=out.file,
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
                    with open(out.file, "w", encoding="utf-8", newline="") as f:
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


@app.command()
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


def _backend(backend: str | None, to: str | None, allowed: tuple[str, ...], command: str) -> str:
    chosen = _merged(backend, to, "--backend", "--to")
    if chosen is None:
        raise usage(f"kir {command} needs --backend", f"one of {', '.join(allowed)}")
    _one_of("backend", chosen, allowed, "cli.backend", f" for kir {command}")
    return chosen


@app.command("lower")
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
    """Lower a program to target source (Triton, Gluon, CUDA C++, HIP C++ or C++ for the
    mtia-sim simulator) and print it or write it to --out."""
    fields: dict[str, Any] = {}

    def body(outcome: Outcome) -> None:
        outcome.fields = fields
        chosen = _backend(backend, to, COMPILE_BACKENDS, "lower")
        fields["backend"] = chosen
        dest = _merged(out, output, "--out", "--output")
        overrides = _specs(param)
        if dest:
            _writable(dest)
        from lowering import lower

        program = _parse_with_params(outcome, overrides)
        lowered = lower(program, chosen, overrides)
        fields["entry"] = lowered.entry
        if dest:
            try:
                Path(dest).write_text(lowered.source)
            except OSError as err:
                raise usage(f"cannot write {dest}: {err.strerror or err}", rule="io.write") from None
            fields["out"] = dest
            outcome.lines.append(f"{outcome.file}: wrote {dest} ({chosen}, entry {lowered.entry})")
        else:
            fields["source"] = lowered.source
            if not json_out:
                outcome.text = lowered.source

    _finish(_guarded(file, body, "lowering the program"), json_out, "lower")


def compile_target(backend: str, target: str | None, declared: str, archs: dict[str, tuple[str, ...]]) -> str:
    """What `kir compile` compiles for: --target, checked against what the backend compiles
    for; without it the kernel's declared target where the backend compiles for it, else the
    backend's own first one (hip: gfx90a, mtia-sim: mtia-sim)."""
    allowed = archs[backend]
    if target is None:
        return declared if declared in allowed else allowed[0]
    if target not in allowed:
        known = (*TARGETS, *(a for arch in archs.values() for a in arch if a not in TARGETS))
        _one_of("target", target, known, "cli.target")
        raise usage(f"{backend} compiles for {', '.join(allowed)}, not {target}", rule="cli.target")
    return target


@app.command("compile")
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
    """Compile ahead of time (no GPU needed) and report registers, spills, shared memory and the
    instructions that matter; compile errors point at the KIR op that produced the failing line.
    --shape specializes Triton code as a launch for that shape would."""
    fields: dict[str, Any] = {}

    def body(outcome: Outcome) -> None:
        outcome.fields = fields
        chosen = _backend(backend, to, COMPILE_BACKENDS, "compile")
        fields["backend"] = chosen
        wanted = _merged(target, arch, "--target", "--arch")
        overrides = _specs(param)
        symbols = _specs(shape, "--shape")
        from lowering.compile import ARCHS, compile_program

        if wanted is not None:  # before any work: a wrong pair is a usage error
            compile_target(chosen, wanted, "", ARCHS)
        program = _parse_with_params(outcome, overrides)
        for_target = compile_target(chosen, wanted, program.kernel.target.data, ARCHS)
        fields["target"] = for_target
        report = compile_program(program, chosen, for_target, overrides, symbols=symbols)
        outcome.diagnostics += list(report.diagnostics)
        record = report.to_json(max_text=4000)
        record.pop("diagnostics")
        fields.update(report=record, target=report.arch)
        outcome.lines.append(
            f"{outcome.file}: {'compiled' if report.ok else 'failed'} (backend {chosen}, target {report.arch})"
        )
        outcome.lines += _report_lines(record)

    _finish(_guarded(file, body, "compiling the program"), json_out, "compile")


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


@app.command("hash")
def hash_(file: FileArg, json_out: JsonOpt = False) -> None:
    """Print the content hash of a program (sha256 of its canonical text without comments)."""

    def body(out: Outcome) -> None:
        program = _parse(out)
        out.fields.update(kernel=program.name, hash=program.content_hash())
        out.lines.append(out.fields["hash"])

    _finish(_guarded(file, body, "hashing the program"), json_out, "hash")


@app.command()
def version(json_out: JsonOpt = False) -> None:
    """Print the version of KIR."""
    if json_out:
        _emit(json.dumps(envelope("version", None, [], {"version": __version__}), indent=2))
    else:
        typer.echo(f"kir {__version__}")


# ---- kir rules: the verifier's rules (imported at run time: `kir` does not depend on it) ------------

rules_app = typer.Typer(
    name="rules",
    help="List, explain and add the verifier's rules.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(rules_app, name="rules")


def _rule_catalog():
    try:
        import verifier
        from verifier.learned import load_learned_rules

        verifier.load_rules()
        load_learned_rules()  # rule files installed since the registry was first loaded
    except Exception as err:  # a broken rule module is a diagnostic, not a traceback
        _emit(_internal(err, "loading the verifier's rules").render())
        raise typer.Exit(1) from None
    return verifier


def _usage_exit(message: str, hint: str = "", json_out: bool = False, command: str = "") -> None:
    diag = Diagnostic("cli.usage", "error", None, message, hint)
    _emit(json.dumps(envelope(command, None, [diag], {}), indent=2) if json_out else diag.render())
    raise typer.Exit(2)


@rules_app.command("list")
def rules_list(
    json_out: Annotated[
        bool, typer.Option("--json", help=JSON_HELP + " Its rules are full records (examples, provenance).")
    ] = False,
    family: Annotated[
        str | None,
        typer.Option("--family", "-f", metavar="FAMILY", help="Only the rules of this family.", show_default=False),
    ] = None,
) -> None:
    """List the rules: id, family, severity, summary."""
    catalog = _rule_catalog()
    from verifier.learned import LOAD_ERRORS, LOADED

    if family is not None and family not in catalog.FAMILIES:
        _usage_exit(
            f"unknown rule family '{family}'", f"families: {', '.join(catalog.FAMILIES)}", json_out, "rules list"
        )
    rules = [r for _, r in sorted(catalog.RULES.items()) if family in (None, r.family)]
    if json_out:
        records = [LOADED[r.id].to_json() if r.id in LOADED else r.to_json() for r in rules]
        # a learned-rule file that does not load is a diagnostic of the listing, as in the text
        _emit(json.dumps(envelope("rules list", None, list(LOAD_ERRORS), {"ok": True, "rules": records}), indent=2))
        return
    rows = [("ID", "FAMILY", "SEVERITY", "SUMMARY")] + [(r.id, r.family, r.severity, r.summary) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    _emit("\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows))
    if LOAD_ERRORS:  # a learned rule that does not load must not vanish silently
        _emit("\nlearned-rule files that did not load:\n" + "\n".join(d.render() for d in LOAD_ERRORS))


@rules_app.command("explain")
def rules_explain(
    rule_id: Annotated[str, typer.Argument(metavar="ID", help="A rule id, e.g. bounds.global-access.")],
) -> None:
    """Explain a rule: why it exists, a program it rejects (with the diagnostic) and its fixed twin."""
    catalog = _rule_catalog()
    from verifier.learned import LOADED

    rule = catalog.RULES.get(rule_id)
    if rule is None:
        _usage_exit(f"no rule '{rule_id}'", _suggest(rule_id, list(catalog.RULES)) or "see `kir rules list`")
    from kir.check import check_program
    from kir.diagnostics import render_all
    from kir.parser import parse

    try:
        diags = [d for d in check_program(parse(rule.bad, file="bad.kir"), rule.target) if d.rule == rule.id]
    except KirError as err:
        diags = err.diagnostics

    def numbered(text: str) -> str:
        return "\n".join(f"  {i:3} | {line}" for i, line in enumerate(text.splitlines(), 1))

    said = render_all(diags, rule.bad) if diags else "(no diagnostic: the rule does not fire on its example)"
    parts = [
        f"{rule.id} ({rule.family}, {rule.severity}): {rule.summary}",
        rule.explanation,
        f"Rejected (line {rule.bad_line}):\n{numbered(rule.bad)}",
        f"What the verifier says:\n{said}",
        f"Accepted:\n{numbered(rule.good)}",
    ]
    learned = LOADED.get(rule.id)
    if learned is not None:
        p = learned.provenance
        parts.append(
            f"Provenance: {p.reason}\n  failures: {', '.join(p.failures)}\n"
            f"  support {p.support}, false positives {p.false_positives}" + (f", added {p.added}" if p.added else "")
        )
    _emit("\n\n".join(parts))


@rules_app.command("add")
def rules_add(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A learned-rule file (TOML).", show_default=False)],
    corpus: Annotated[
        list[str] | None,
        typer.Option(
            "--corpus",
            metavar="DIR",
            help="Known programs: every *.good.kir under DIR must stay clean (repeatable; default tests/verifier/corpus).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and vet the rule, and report; install nothing.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Validate a learned rule, check it against known-good programs and the failures it names,
    and install it into verifier/rules/learned/ (or $KIR_LEARNED_DIR); with --dry-run, only
    validate and check."""
    fields: dict[str, Any] = {"dry_run": dry_run, "installed": None}

    def body(outcome: Outcome) -> None:
        outcome.fields = fields
        from kir.check import read_bytes

        read_bytes(file, limit=2**20)  # refuses a FIFO, a device, a folder before the TOML reader blocks on one
        for folder in corpus or []:
            if not Path(folder).is_dir():
                raise usage(f"--corpus {folder} is not a folder", "a folder of *.good.kir programs", rule="io.read")
        dirs = [Path(d) for d in corpus] if corpus else None
        if dry_run:
            rule_id, diags = vet_rule(file, dirs)
            fields["rule"] = rule_id
            outcome.diagnostics += diags
            if not diags:
                outcome.lines.append(f"{file}: valid ({rule_id}; not installed: --dry-run)")
            return
        from verifier.learned import install, read_rule_file

        dest, diags = install(file, dirs)
        outcome.diagnostics += diags
        if dest is not None:
            learned, _ = read_rule_file(dest)
            fields.update(installed=str(dest), rule=learned.rule.id if learned else None)
            outcome.lines.append(f"{file}: installed as {dest}")

    outcome = _guarded(file, body, "adding the rule")
    code = exit_code(outcome.diagnostics)
    if json_out:
        _emit(json.dumps(envelope("rules add", file, outcome.diagnostics, fields), indent=2, default=str))
    elif code == 2:
        _emit(_render(outcome.diagnostics, None))
    elif outcome.diagnostics:
        _emit("\n\n".join(d.render(_source_of(d)) for d in outcome.diagnostics))
        if outcome.has_errors:
            _emit(f"\n{file}: refused ({_counts(outcome.diagnostics)})")
    for line in outcome.lines if code == 0 and not json_out else []:
        _emit(line)
    raise typer.Exit(code)


def vet_rule(file: str, corpus: list[Path] | None) -> tuple[str | None, list[Diagnostic]]:
    """What `verifier.learned.install` checks before it copies the file (the schema, an id
    that is not taken, the corpus and the failures it names), without the copy: `--dry-run`."""
    from kir.diagnostics import Span
    from verifier.engine import load_rules
    from verifier.learned import LOADED, RULES, _line_of, install_dir, read_rule_file, vet

    learned, problems = read_rule_file(Path(file))
    if learned is None:
        return None, problems
    load_rules()
    dest = install_dir() / f"{learned.name}.toml"
    if learned.rule.id in RULES or dest.exists():
        where = LOADED[learned.rule.id].path if learned.rule.id in LOADED else dest
        line = _line_of(learned.text, ("id",))
        return learned.rule.id, [
            Diagnostic(
                "learned.duplicate",
                "error",
                Span(line, 1, line, 2, file),
                f"a rule {learned.rule.id} is already installed ({where})",
                "choose another id, or remove the installed file first",
            )
        ]
    return learned.rule.id, vet(learned, corpus, Path(file))


def _source_of(d: Diagnostic) -> str | None:
    """The text a diagnostic points into (a rule file, a corpus program), for its snippet."""
    if d.span is None or d.span.file is None:
        return None
    from kir.check import read_source

    try:
        return read_source(d.span.file)
    except KirError:
        return None


def main() -> None:  # pragma: no cover - the console script calls `app`
    app()


# ---- kir run and kir bench: the harness (imported at run time: `kir` does not depend on it) -------

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
    from lowering.runtime_triton import cuda_available

    return "triton" if cuda_available() else "mtia-sim"


def no_cuda(what: str) -> Diagnostic | None:
    """A `cli.no-cuda` error when torch sees no CUDA device, before any work that would need one."""
    from lowering.runtime_triton import cuda_available

    if cuda_available():
        return None
    return Diagnostic(
        "cli.no-cuda",
        "error",
        None,
        f"{what} needs a CUDA GPU, and torch sees none on this machine",
        "on a CPU: kir run -b interp, triton-interp or mtia-sim",
    )


@app.command("run")
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
) -> None:
    """Check a program against a task's reference: the harness's correctness protocol (fresh
    seeds, poisoned outputs, inputs checked unchanged, a higher-precision reference), in a child
    process with a timeout. Parameters come from the task's entry for this file, then --param.
    The backend defaults to triton where torch sees a CUDA device, else mtia-sim."""
    fields: dict[str, Any] = {"task": task, "backend": backend, "preset": preset or DEFAULT_PRESET}

    def body(outcome: Outcome) -> None:
        outcome.fields = fields
        overrides = _specs(param)
        if backend is not None:
            _one_of("backend", backend, RUN_BACKENDS, "cli.backend", " for kir run")
        chosen = backend or default_run_backend()
        fields["backend"] = chosen
        if chosen in GPU_BACKENDS and (missing := no_cuda(f"backend {chosen}")) is not None:
            raise KirError(missing)
        from agent.cli import run_command

        record, outcome.source = run_command(file, task, chosen, preset, overrides, seed, timeout, None)
        outcome.diagnostics += [Diagnostic.from_json(d) for d in record.get("diagnostics", [])]
        fields.update({k: record.get(k) for k in ("stage", "metrics", "log_tail")}, ok=bool(record.get("ok")))
        fields["preset"] = record.get("preset", fields["preset"])

    outcome = _guarded(file, body, "running the program")
    if "ok" not in outcome.fields:  # stopped before the harness: a usage error, or a bug of ours
        outcome.fields.update(ok=False, stage="usage" if exit_code(outcome.diagnostics) == 2 else "internal")
    code = 0 if outcome.fields["ok"] else max(1, exit_code(outcome.diagnostics))
    if json_out:
        _emit(json.dumps(envelope("run", file, outcome.diagnostics, outcome.fields), indent=2, default=str))
    elif code == 2:
        _emit(_render([d for d in outcome.diagnostics if d.is_error], outcome.source))
    else:
        from agent.cli import describe

        if outcome.diagnostics:
            _emit(_render(outcome.diagnostics, outcome.source))
        record = {k: outcome.fields.get(k) for k in ("ok", "stage", "metrics", "log_tail")}
        record["metrics"] = record["metrics"] or {}
        _emit(describe(record, file, task, outcome.fields["backend"], outcome.fields["preset"]))
        if not record["ok"] and record.get("log_tail"):
            _emit(record["log_tail"])
    raise typer.Exit(code)


@app.command("bench")
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
    from agent.cli import bench_command

    raise typer.Exit(bench_command(tasks or [], backend, program, preset or DEFAULT_PRESET, out, jobs, timeout, runs))


# ---- kir cost: the cost model's estimate (imported at run time: `kir` does not depend on it) ----


@app.command("cost")
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
    """Estimate a program's time on a chip: the bottleneck, a breakdown tied to the ops that cause
    it, and performance hints as diagnostics. A task program takes its shapes and parameters
    from the task's --preset; --shape and --param override them."""
    fields: dict[str, Any] = {"target": target, "preset": preset or DEFAULT_PRESET}

    def body(outcome: Outcome) -> None:
        outcome.fields = fields
        overrides = _specs(param)
        symbols = _specs(shape, "--shape")
        if target is not None:
            from costmodel.spec import chip

            try:
                chip(target)
            except KeyError:
                _check_target(target)
                raise usage(f"no chip table '{target}'", rule="cli.target") from None
        chosen_preset = preset or DEFAULT_PRESET  # checked against the task's by run_cost (cli.preset)
        fields["preset"] = chosen_preset
        if calibration is not None:
            from kir.check import read_bytes

            read_bytes(calibration)  # a missing file or a FIFO is a usage error, before the model reads it
        from costmodel.cli import run_cost

        program = _parse_with_params(outcome, overrides)
        fields["target"] = target or program.kernel.target.data
        est, lines, compiled = run_cost(program, target, overrides, symbols, chosen_preset, calibration, compile_first)
        outcome.diagnostics += compiled
        if est is None:
            return
        outcome.diagnostics += est.hints
        if (Path(file).parent / "task.toml").is_file() and lines:
            # the default preset is `test`: say which shapes the figures are for
            lines.insert(1, f"  shapes and parameters: the task's `{chosen_preset}` preset, then --shape and --param")
        outcome.lines += lines
        fields["estimate"] = est.to_json()

    outcome = _guarded(file, body, "estimating the cost")
    if not json_out and not outcome.has_errors and outcome.diagnostics:
        outcome.text = "\n".join(outcome.lines) + "\n\n"
        outcome.lines = []
    _finish(outcome, json_out, "cost")


if __name__ == "__main__":  # pragma: no cover
    main()
