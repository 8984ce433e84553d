"""The `kir` command: check, format, run and hash KIR programs.

Every outcome is a list of `Diagnostic`s, printed rustc-style (or as JSON with `--json`) on
stdout. Exit status: 0 when there is no error, 1 when the program (or an input) has errors,
2 for a usage error (a file that cannot be read, an unknown target or parameter). No input,
however malformed, gets a Python traceback: an unexpected exception becomes an
`internal.error` diagnostic. The work itself lives in `kir.check` and `kir.arrays`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from kir import __version__
from kir.check import (
    check_program,
    internal_error,
    op_count,
    read_source,
    target_diagnostics,
    unique_sorted,
    verify_ops,
)
from kir.diagnostics import Diagnostic, KirError, render_all
from kir.dialect.structure import TARGETS
from kir.program import Program

app = typer.Typer(
    name="kir",
    help="KIR: a typed, hardware-explicit kernel IR. Check, format, run and hash KIR programs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Rules that mean "the command line is wrong" rather than "the program is wrong": exit 2.
USAGE_RULES = frozenset({"io.read", "io.write", "cli.usage", "cli.param", "cli.target"})

_PARAM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(-?(?:0[xX][0-9a-fA-F]+|[0-9]+))\s*$")


@dataclass
class Outcome:
    """What a command has to say: diagnostics, the source they point into, and the lines to
    print when there is no error."""

    file: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: str | None = None
    lines: list[str] = field(default_factory=list)  # printed when there is no error
    text: str = ""  # printed as is, before the diagnostics (canonical text, a diff)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def fail(self, diags: list[Diagnostic]) -> Outcome:
        self.diagnostics += diags
        return self


def exit_code(diags: list[Diagnostic]) -> int:
    errors = [d for d in diags if d.is_error]
    if any(d.rule in USAGE_RULES for d in errors):
        return 2
    return 1 if errors else 0


def _guarded(file: str, body: Callable[[Outcome], Outcome | None], during: str) -> Outcome:
    """Run a command's body; a `KirError` adds its diagnostics, anything else is an
    `internal.error`, never a traceback."""
    outcome = Outcome(file)
    try:
        body(outcome)
    except KirError as err:
        outcome.diagnostics += err.diagnostics
    except Exception as err:
        outcome.diagnostics.append(internal_error(err, None, during))
    try:
        outcome.diagnostics = unique_sorted(outcome.diagnostics)
    except Exception as err:  # a malformed diagnostic (say, an unknown severity) from a plug-in
        outcome.diagnostics.append(internal_error(err, None, "sorting the diagnostics"))
    return outcome


def _finish(outcome: Outcome, json_out: bool) -> None:
    """Print the outcome and exit with its status."""
    diags = outcome.diagnostics
    if json_out:
        # Already in order (`_guarded` sorts), so no second sort that could fail here.
        _emit(json.dumps([d.to_json() for d in diags], indent=2, default=str))
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
    raise typer.Exit(exit_code(diags))


def _render(diags: list[Diagnostic], source: str | None) -> str:
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
    (re.compile(r"\berror\[[^\]]*\]"), "bold red"),
    (re.compile(r"\bwarning\[[^\]]*\]"), "bold yellow"),
    (re.compile(r"\bhint\[[^\]]*\]"), "bold cyan"),
    (re.compile(r"(?m)^\s*\d* \| +\^+.*$"), "red"),
    (re.compile(r"(?m)^  = (hint|counterexample):"), "cyan"),
    (re.compile(r"(?m)^  note:"), "blue"),
    (re.compile(r"(?<=: )ok\b.*$", re.M), "green"),
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
    from rich.console import Console
    from rich.text import Text

    styled = Text(text)
    for pattern, style in _STYLES:
        styled.highlight_regex(pattern, style)
    Console(force_terminal=True, highlight=False, soft_wrap=True).print(styled, end="\n" if newline else "")


# ---- commands ----------------------------------------------------------------------------------

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A KIR source file (one kernel).", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the diagnostics as a JSON list ([] when clean).")]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", metavar="NAME=VALUE", help="Override a parameter (repeatable).", show_default=False),
]


def _parse(outcome: Outcome) -> Program:
    from kir.parser import parse

    outcome.source = read_source(outcome.file)
    return parse(outcome.source, file=outcome.file)


@app.command()
def check(
    file: FileArg,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            "-t",
            metavar="TARGET",
            help=f"Check for this target instead of the kernel's declared one ({', '.join(TARGETS)}).",
            show_default=False,
        ),
    ] = None,
    param: ParamOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Parse and verify a program (with --param: as those parameter values make it); print its
    diagnostics."""

    def body(out: Outcome) -> None:
        usage = target_diagnostics(target)
        if usage:
            out.fail(usage)
            return
        parsed = _parse_with_params(out, param)
        if parsed is None:
            return
        program, overrides = parsed
        if overrides:
            program = program.with_params(**overrides)
        out.diagnostics += check_program(program, target)
        out.lines.append(f"{out.file}: ok (kernel {program.name}, {op_count(program)} ops)")

    _finish(_guarded(file, body, "checking the program"), json_out)


@app.command()
def fmt(
    file: FileArg,
    write: Annotated[bool, typer.Option("--write", "-w", help="Rewrite the file in place.")] = False,
    check_only: Annotated[
        bool, typer.Option("--check", help="Print nothing but a diff; exit 1 if the file is not canonical.")
    ] = False,
) -> None:
    """Print the canonical text of a program (comments kept)."""

    def body(out: Outcome) -> None:
        if write and check_only:
            out.fail([Diagnostic("cli.usage", "error", None, "--write and --check exclude each other")])
            return
        program = _parse(out)
        text = canonical_text(program)
        if check_only:
            if text != out.source:
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
            if text != out.source:
                try:
                    with open(out.file, "w", encoding="utf-8", newline="") as f:
                        f.write(text)
                except (OSError, ValueError) as err:
                    reason = getattr(err, "strerror", None) or str(err)
                    out.fail([Diagnostic("io.write", "error", None, f"cannot write {out.file}: {reason}")])
                    return
                out.lines.append(f"{out.file}: formatted")
            else:
                out.lines.append(f"{out.file}: ok (already canonical)")
        else:
            out.text = text

    _finish(_guarded(file, body, "formatting the program"), False)


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
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            metavar="NAME=VALUE",
            help="Override a compile-time parameter (repeatable).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Run a program on the reference interpreter.

    Arrays are exchanged in .npz archives. npz cannot store bf16 or fp8 portably, so arguments
    of dtype f16, bf16, f8e4m3 and f8e5m2 are read from float32 arrays (rounded to nearest even)
    and saved as float32. Integer, bool, f32 and f64 arguments are stored as their own dtype.
    """

    def body(outcome: Outcome) -> None:
        parsed = _parse_with_params(outcome, param)
        if parsed is None:
            return
        program, overrides = parsed
        outcome.diagnostics += verify_ops(program)
        if outcome.has_errors:
            return
        results = run_program(program, inputs, out, overrides, outcome)
        if results is not None:
            outcome.lines.append(f"{outcome.file}: ok (kernel {program.name}; wrote {out}: {', '.join(results)})")

    _finish(_guarded(file, body, "running the program"), json_out)


def parse_param_specs(specs: list[str]) -> tuple[dict[str, int], list[Diagnostic]]:
    """`NAME=VALUE` strings (decimal or 0x hex, optionally negative) as a dict."""
    values: dict[str, int] = {}
    diags: list[Diagnostic] = []
    for spec in specs:
        m = _PARAM.match(spec)
        if m is None:
            diags.append(
                Diagnostic(
                    "cli.param",
                    "error",
                    None,
                    f"bad --param '{spec}'",
                    "write --param NAME=VALUE with an integer value",
                )
            )
            continue
        name, value = m.group(1), int(m.group(2), 0)
        if name in values:
            diags.append(Diagnostic("cli.param", "error", None, f"--param {name} is given twice"))
            continue
        values[name] = value
    return values, diags


def unknown_params(program: Program, overrides: dict[str, int]) -> list[Diagnostic]:
    from kir.parser import suggest

    diags = []
    for name in overrides:
        if name not in program.params:
            known = ", ".join(program.params) or "none"
            hint = suggest(name, program.params) or f"parameters of {program.name}: {known}"
            diags.append(
                Diagnostic("cli.param", "error", None, f"kernel {program.name} has no parameter '{name}'", hint)
            )
    return diags


def _parse_with_params(outcome: Outcome, param: list[str] | None) -> tuple[Program, dict[str, int]] | None:
    """The program and its `--param NAME=VALUE` overrides, or None when either is wrong (the
    diagnostics are added to `outcome`)."""
    overrides, usage = parse_param_specs(param or [])
    if usage:
        outcome.fail(usage)
        return None
    program = _parse(outcome)
    usage = unknown_params(program, overrides)
    if usage:
        outcome.fail(usage)
        return None
    return program, overrides


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


BackendOpt = Annotated[
    str, typer.Option("--to", metavar="BACKEND", help="triton, gluon, cuda or hip.", show_default=False)
]


@app.command("lower")
def lower_cmd(
    file: FileArg,
    to: BackendOpt,
    output: Annotated[
        str | None, typer.Option("--output", "-o", metavar="OUT", help="Write the source here.", show_default=False)
    ] = None,
    param: ParamOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Lower a program to target source (Triton, Gluon, CUDA or HIP C++) and print or write it."""

    def body(outcome: Outcome) -> None:
        from lowering import lower

        parsed = _parse_with_params(outcome, param)
        if parsed is None:
            return
        program, overrides = parsed
        lowered = lower(program, to, overrides)
        if output:
            try:
                Path(output).write_text(lowered.source)
            except OSError as err:
                outcome.fail([Diagnostic("io.write", "error", None, f"cannot write {output}: {err}")])
                return
            outcome.lines.append(f"{outcome.file}: wrote {output} ({to}, entry {lowered.entry})")
        elif not json_out:
            outcome.text = lowered.source

    _finish(_guarded(file, body, f"lowering to {to}"), json_out)


@app.command("compile")
def compile_cmd(
    file: FileArg,
    to: BackendOpt,
    arch: Annotated[str, typer.Option("--arch", help="sm_90 (gfx942 for triton, gfx90a for hip).")] = "sm_90",
    param: ParamOpt = None,
    shape: Annotated[
        list[str] | None,
        typer.Option(
            "--shape",
            "-s",
            metavar="SYMBOL=VALUE",
            help="A shape value to specialize for, as the launch would (Triton: multiples of 16).",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Compile ahead of time (no GPU needed) and report registers, spills, shared memory and the
    instructions that matter; compile errors point at the KIR op that produced the failing line.
    With --json: {"report": the compile report's fields (texts cut short), "diagnostics": [...]}."""
    record: dict = {}

    def body(outcome: Outcome) -> None:
        from lowering.compile import compile_program

        parsed = _parse_with_params(outcome, param)
        if parsed is None:
            return
        program, overrides = parsed
        symbols, bad = parse_param_specs(shape or [])
        if bad:
            outcome.fail(bad)
            return
        report = compile_program(program, to, arch, overrides, symbols=symbols)
        outcome.diagnostics += list(report.diagnostics)
        record.update(report.to_json(max_text=4000))
        record.pop("diagnostics")
        outcome.lines.append(f"{outcome.file}: {'compiled' if report.ok else 'failed'} ({to}, {arch})")
        outcome.lines += _report_lines(record)

    outcome = _guarded(file, body, f"compiling for {to}")
    if json_out:
        diags = [d.to_json() for d in outcome.diagnostics]
        _emit(json.dumps({"report": record or None, "diagnostics": diags}, indent=2, default=str))
        raise typer.Exit(exit_code(outcome.diagnostics))
    _finish(outcome, False)


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
def hash_(file: FileArg) -> None:
    """Print the content hash of a program (sha256 of its canonical text without comments)."""

    def body(out: Outcome) -> None:
        out.lines.append(_parse(out).content_hash())

    _finish(_guarded(file, body, "hashing the program"), False)


@app.command()
def version() -> None:
    """Print the version of KIR."""
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
        _emit(internal_error(err, None, "loading the verifier's rules").render())
        raise typer.Exit(1) from None
    return verifier


def _usage_exit(message: str, hint: str = "") -> None:
    _emit(Diagnostic("cli.usage", "error", None, message, hint).render())
    raise typer.Exit(2)


@rules_app.command("list")
def rules_list(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print full records (examples, provenance) as JSON.")
    ] = False,
    family: Annotated[
        str | None,
        typer.Option("--family", "-f", metavar="F", help="Only the rules of this family.", show_default=False),
    ] = None,
) -> None:
    """List the rules: id, family, severity, summary."""
    catalog = _rule_catalog()
    from verifier.learned import LOADED

    if family is not None and family not in catalog.FAMILIES:
        _usage_exit(f"unknown rule family '{family}'", f"families: {', '.join(catalog.FAMILIES)}")
    rules = [r for _, r in sorted(catalog.RULES.items()) if family in (None, r.family)]
    if json_out:
        _emit(json.dumps([LOADED[r.id].to_json() if r.id in LOADED else r.to_json() for r in rules], indent=2))
        return
    rows = [("ID", "FAMILY", "SEVERITY", "SUMMARY")] + [(r.id, r.family, r.severity, r.summary) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    _emit("\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in rows))
    from verifier.learned import LOAD_ERRORS

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
        from kir.parser import suggest

        _usage_exit(f"no rule '{rule_id}'", suggest(rule_id, list(catalog.RULES)) or "see `kir rules list`")
    from kir.check import check_program
    from kir.parser import parse

    try:
        diags = [d for d in check_program(parse(rule.bad, file="bad.kir"), rule.target) if d.rule == rule.id]
    except KirError as err:
        diags = err.diagnostics
    numbered = lambda text: "\n".join(f"  {i:3} | {line}" for i, line in enumerate(text.splitlines(), 1))  # noqa: E731
    parts = [
        f"{rule.id} ({rule.family}, {rule.severity}): {rule.summary}",
        rule.explanation,
        f"Rejected (line {rule.bad_line}):\n{numbered(rule.bad)}",
        f"What the verifier says:\n{render_all(diags, rule.bad) if diags else '(no diagnostic: the rule does not fire on its example)'}",
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
    json_out: JsonOpt = False,
) -> None:
    """Validate a learned rule, check it against known-good programs and the failures it names,
    and install it into verifier/rules/learned/ (or $KIR_LEARNED_DIR)."""
    from pathlib import Path

    from verifier.learned import install

    try:
        dest, diags = install(file, [Path(d) for d in corpus] if corpus else None)
    except Exception as err:
        dest, diags = None, [internal_error(err, None, "adding the rule")]
    diags = unique_sorted(diags)
    if json_out:
        _emit(json.dumps([d.to_json() for d in diags], indent=2))
    elif diags:
        sources: dict[str, str | None] = {}
        for d in diags:
            name = d.span.file if d.span else None
            if name is not None and name not in sources:
                try:
                    sources[name] = read_source(name)
                except KirError:
                    sources[name] = None
        _emit("\n\n".join(d.render(sources.get(d.span.file) if d.span else None) for d in diags))
        _emit(f"\n{file}: refused ({_counts(diags)})")
    else:
        _emit(f"{file}: installed as {dest}")
    raise typer.Exit(exit_code(diags))


def main() -> None:  # pragma: no cover - the console script calls `app`
    app()




TaskOpt = Annotated[
    str, typer.Option("--task", "-t", metavar="TASK", help="A task folder, a KernelBench .py file, or a suite task name.")
]


def default_run_backend() -> str:
    """`kir run`'s backend when none is given: triton on a machine with a CUDA device, else the
    simulated accelerator (mtia-sim is the toolchain's target where no GPU is present)."""
    from lowering.runtime_triton import cuda_available

    return "triton" if cuda_available() else "mtia-sim"


@app.command("run")
def run_cmd(
    file: FileArg,
    task: TaskOpt,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            "-b",
            help="interp, triton-interp, triton, gluon, cuda or mtia-sim; default: triton where torch sees a "
            "CUDA device, mtia-sim (the simulated accelerator) where it does not.",
            show_default=False,
        ),
    ] = None,
    preset: Annotated[str, typer.Option("--preset", help="The task's shape preset: test or bench.")] = "test",
    param: ParamOpt = None,
    seed: Annotated[
        list[int] | None, typer.Option("--seed", help="A seed (repeatable); default: three fresh ones.", show_default=False)
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds before the run is killed.")] = 600.0,
    json_out: JsonOpt = False,
) -> None:
    """Check a program against a task's reference: the harness's correctness protocol (fresh
    seeds, poisoned outputs, inputs checked unchanged, a higher-precision reference), in a child
    process with a timeout. Parameters come from the task's entry for this file, then --param.
    With --json: the harness's record {"ok", "stage", "diagnostics", "metrics", "log_tail"}."""
    overrides, usage = parse_param_specs(param or [])
    if usage:
        _finish(Outcome(file, usage), json_out)
    from agent.cli import describe, run_command

    backend = backend or default_run_backend()
    record, source = run_command(file, task, backend, preset, overrides, seed, timeout, None)
    if json_out:
        _emit(json.dumps(record, indent=2))
    else:
        diags = [Diagnostic.from_json(d) for d in record["diagnostics"]]
        if diags:
            _emit(_render(diags, source))
        _emit(describe(record, file, task, backend, preset))
        if not record["ok"] and record.get("log_tail"):
            _emit(record["log_tail"])
    if record["ok"]:
        raise typer.Exit(0)
    raise typer.Exit(2 if record["stage"] == "usage" else 1)


@app.command("bench")
def bench_cmd(
    tasks: Annotated[list[str] | None, typer.Argument(metavar="TASK...", help="Suite task names (default: all).")] = None,
    backend: Annotated[
        list[str] | None, typer.Option("--backend", "-b", help="Backends (repeatable; each program goes through those its level takes: triton, cuda, hip for the tile level, gluon, cuda for the explicit level; default: triton, or gluon and cuda).")
    ] = None,
    program: Annotated[
        list[str] | None, typer.Option("--program", help="Which of each task's programs (repeatable; default: all).")
    ] = None,
    preset: Annotated[str, typer.Option("--preset", help="The shape preset.")] = "bench",
    out: Annotated[str | None, typer.Option("--out", "-o", help="Results folder (default: benchmarks/results/<gpu>-<date>).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Correctness checks run in parallel.")] = 4,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per child process.")] = 600.0,
    runs: Annotated[int, typer.Option("--runs", help="Timed runs per figure (at most).")] = 50,
) -> None:
    """Run the benchmark suite on the GPU against PyTorch eager and torch.compile: a table of
    times and ratios, written as JSON and markdown under benchmarks/results/."""
    from agent.cli import bench_command

    raise typer.Exit(bench_command(tasks or [], backend, program, preset, out, jobs, timeout, runs))


# ---- kir cost: the cost model's estimate (imported at run time: `kir` does not depend on it) ----


@app.command("cost")
def cost_cmd(
    file: FileArg,
    target: Annotated[
        str | None,
        typer.Option("--target", "-t", metavar="TARGET", help="A KIR target (sm_90, gfx942, mtia-sim) or a chip table (h100).", show_default=False),
    ] = None,
    param: ParamOpt = None,
    shape: Annotated[
        list[str] | None,
        typer.Option("--shape", "-s", metavar="SYMBOL=VALUE", help="A shape symbol's value (repeatable; default: the task's preset).", show_default=False),
    ] = None,
    preset: Annotated[str, typer.Option("--preset", help="For a task program: the preset whose shapes and parameters to use.")] = "bench",
    calibration: Annotated[str | None, typer.Option("--calibration", help="A saved calibration (CostModel.save).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the estimate and its hints as JSON.")] = False,
    compile_first: Annotated[
        bool,
        typer.Option(
            "--compile",
            help="Compile first (Triton, or Gluon for an explicit-level program; seconds) and take the compiler's registers, shared memory and spills instead of the model's estimates.",
        ),
    ] = False,
) -> None:
    """Estimate a program's time on a chip: the bottleneck, a breakdown tied to the ops that cause
    it, and performance hints as diagnostics."""
    record: dict = {}

    def body(outcome: Outcome) -> None:
        from costmodel.cli import run_cost
        from costmodel.spec import chip

        overrides, bad = parse_param_specs(param or [])
        symbols, bad_shapes = parse_param_specs(shape or [])
        if bad or bad_shapes:
            outcome.fail(bad + bad_shapes)
            return
        if target is not None:
            try:
                chip(target)
            except KeyError:
                outcome.fail(target_diagnostics(target) or [Diagnostic("cli.target", "error", None, f"no chip table '{target}'")])
                return
        program = _parse(outcome)
        usage = unknown_params(program, overrides)
        if usage:
            outcome.fail(usage)
            return
        est, lines, compiled = run_cost(program, target, overrides, symbols, preset, calibration, compile_first)
        outcome.diagnostics += compiled
        if est is None:
            return
        outcome.diagnostics += est.hints
        outcome.lines += lines
        record.update(est.to_json())

    outcome = _guarded(file, body, "estimating the cost")
    if json_out:
        diags = [d.to_json() for d in outcome.diagnostics]
        _emit(json.dumps({"estimate": record or None, "diagnostics": diags}, indent=2, default=str))
        raise typer.Exit(exit_code(outcome.diagnostics))
    if not outcome.has_errors and outcome.diagnostics:
        outcome.text = "\n".join(outcome.lines) + "\n\n"
        outcome.lines = []
    _finish(outcome, False)


if __name__ == "__main__":  # pragma: no cover
    main()
