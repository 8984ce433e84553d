"""`kir rules`: list, explain, add and retire the verifier's rules (`kir rules learned`, which
reads search stores, is agent/learn/cli.py's).

Start-up: this module imports typer and `kir.cli` only; the rule registry is loaded by the
command that needs it, so `kir --help` does not pay for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from kir.cli import (
    JSON_HELP,
    JsonOpt,
    Outcome,
    _counts,
    _emit,
    _guarded,
    _internal,
    _render,
    _suggest,
    envelope,
    exit_code,
    usage,
)
from kir.diagnostics import Diagnostic, KirError

rules_app = typer.Typer(
    name="rules",
    help="List, explain and add the verifier's rules.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


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
    from kir.diagnostics import render_all
    from kir.parser import parse
    from verifier.check import check_program

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


@rules_app.command("retire")
def rules_retire(
    rule_id: Annotated[str, typer.Argument(metavar="ID", help="A learned rule's id, e.g. learned.mined-x.")],
    json_out: JsonOpt = False,
) -> None:
    """Undo a learned rule: remove its file and the failure programs kept with it."""
    catalog = _rule_catalog()
    from verifier.learned import LOADED, retire

    if rule_id not in LOADED:
        hint = (
            "only learned rules can be retired; this one is part of the verifier"
            if rule_id in catalog.RULES
            else _suggest(rule_id, list(LOADED)) or "see `kir rules learned`"
        )
        _usage_exit(f"no learned rule '{rule_id}'", hint, json_out, "rules retire")
    removed = retire(rule_id)
    if json_out:
        fields = {"ok": True, "rule": rule_id, "removed": [str(p) for p in removed]}
        _emit(json.dumps(envelope("rules retire", None, [], fields), indent=2))
        return
    _emit(f"{rule_id}: retired ({len(removed)} files removed: {removed[0]})")


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


def register(app: typer.Typer) -> None:
    """Mount `kir rules` on the `kir` group."""
    app.add_typer(rules_app, name="rules")
