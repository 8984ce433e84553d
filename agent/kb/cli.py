"""`kir kb`: search and read the knowledge base (agent/kb, docs/kb.md).

    kir kb search QUERY [--rule ID]... [--target T] [--bottleneck B] [--kind K] [--limit N] [--json]
    kir kb show DOC [--json]

`search` prints the best documents for the words of QUERY, each with its id, kind, score and a
snippet; `--rule` (repeatable) puts the documents of those diagnostic ids first, `--target` and
`--bottleneck` raise the documents about them, `--kind` keeps one kind. A query without words
is a usage error unless one of those says what to list. `show` prints one document whole. An
unknown document, rule id, kind, target or bottleneck is a usage error (exit 2) with the nearest
names; a source of the knowledge base that did not load is a warning, and the rest is searched.

Start-up: typer and `kir.cli` only; the index (SQLite, and on its first build the rules and
the tactics) loads inside the verb.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kir.cli import SCHEMAS, JsonOpt, Outcome, TargetOpt, _check_target, _finish, _guarded, _in_range, usage
from kir.diagnostics import Diagnostic
from kir.names import suggest

SCHEMAS["kb search"] = ("query", "rules", "target", "bottleneck", "kind", "limit", "hits")
SCHEMAS["kb show"] = ("id", "kind", "title", "source", "tags", "text")

kb_app = typer.Typer(
    name="kb",
    help="Search and read the knowledge base: the language reference, the hardware manuals, the rules and the tactics.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _problems(outcome: Outcome) -> None:
    """The sources that did not load, as warnings: the rest of the knowledge base still answers."""
    from agent.kb.index import open_index

    for problem in open_index().problems:
        outcome.diagnostics.append(Diagnostic("kb.source", "warning", None, problem, "the other sources are searched"))


@kb_app.command("search")
def kb_search(
    query: Annotated[
        str,
        typer.Argument(metavar="QUERY", help="Words to look for (quote several).", show_default=False),
    ],
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            metavar="ID",
            help="A diagnostic id at hand, e.g. sync.parity: its rule's document comes first (repeatable).",
            show_default=False,
        ),
    ] = None,
    target: TargetOpt = None,
    bottleneck: Annotated[
        str | None,
        typer.Option(
            "--bottleneck",
            metavar="B",
            help="The cost model's bottleneck (dram, l2, tensor, alu, sfu, lsu, latency, launch, dpe, port...): "
            "raise the documents about it.",
            show_default=False,
        ),
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            metavar="K",
            help="Only documents of this kind: language, hardware, targets, rule, tactic or calibration.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", callback=_in_range(1, 100), help="Documents to print at most.")
    ] = 5,
    json_out: JsonOpt = False,
) -> None:
    """Search the knowledge base: the documents that best answer QUERY, by relevance, with the
    ones about the given diagnostics, target and bottleneck raised."""
    rules = rule or []

    def body(outcome: Outcome) -> None:
        from agent.kb import index
        from agent.kb.doc import KbError, shown

        _check_target(target)
        try:
            index.filters(kind, target, bottleneck)
        except KbError as err:
            raise usage(err.message, err.hint) from None
        if any(not r.strip() for r in rules):
            raise usage("an empty --rule", "a diagnostic id, e.g. --rule sync.parity")
        if not index.terms(query) and not (rules or target or bottleneck or kind):
            raise usage(
                f"nothing to search for: the query {shown(query)} has no words",
                "give words, or --rule, --target, --bottleneck or --kind to list documents",
            )
        known = index.rule_ids()
        for r in rules:
            if not index.covers(r.strip(), known):
                raise usage(
                    f"no document is about the diagnostic {shown(r)}",
                    suggest(r.strip(), known) or "see `kir rules list`",
                )
        _problems(outcome)
        try:
            hits = index.search(query, rules=rules, target=target, bottleneck=bottleneck, kind=kind, limit=limit)
        except KbError as err:
            raise usage(err.message, err.hint) from None
        outcome.fields.update(
            query=query, rules=rules, target=target, bottleneck=bottleneck, kind=kind, limit=limit,
            hits=[h.to_json() for h in hits],
        )  # fmt: skip
        if not hits:
            outcome.lines.append("no document matches")
        for h in hits:
            boosts = f"; {', '.join(h.boosts)}" if h.boosts else ""
            outcome.lines.append(f"{h.id} ({h.doc.kind}, {h.score:.3f}{boosts}): {h.doc.title}")
            outcome.lines.append(f"    {h.snippet}")

    _finish(_guarded(None, body, "searching the knowledge base"), json_out, "kb search")


@kb_app.command("show")
def kb_show(
    doc: Annotated[
        str,
        typer.Argument(
            metavar="DOC",
            help="A document's id, e.g. rule/sync.parity (kir kb search prints them).",
            show_default=False,
        ),
    ],
    json_out: JsonOpt = False,
) -> None:
    """Print one document of the knowledge base whole: its title, tags, source and text."""

    def body(outcome: Outcome) -> None:
        from agent.kb import index
        from agent.kb.doc import KbError

        _problems(outcome)
        try:
            found = index.show(doc)
        except KbError as err:
            raise usage(err.message, err.hint) from None
        outcome.fields.update(found.to_json())
        outcome.lines += [
            f"{found.id} ({found.kind}): {found.title}",
            f"tags: {', '.join(found.tags) or '-'}",
            f"source: {found.source or '-'}",
            "",
            found.text,
        ]

    _finish(_guarded(None, body, "reading the knowledge base"), json_out, "kb show")


def register(app: typer.Typer) -> None:
    """Mount `kir kb` on the `kir` group."""
    app.add_typer(kb_app, name="kb")
