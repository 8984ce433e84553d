"""`kir report`: one search of a store as a self-contained HTML page (`agent.search.report`).

    kir report DB [--name NAME] --out FILE [--json]

DB is a store (a SQLite file or a `postgresql://` URL); the search is NAME, or the store's last
one. The page opens in any browser, offline: the search tree (nodes coloured by the stage they
reached, shaded and sized by speed against the seed, the best path thick; a click shows a
node's move, score, prediction, diagnostics and program) and the best score so far against
evaluations. No store, a file that is not one, an unknown NAME, a missing or unwritable --out
are usage errors (exit 2).
"""

from __future__ import annotations

from typing import Annotated

import typer

from kir.cli import SCHEMAS, JsonOpt, _finish, _guarded, _writable, usage

SCHEMAS["report"] = ("name", "task", "nodes", "out")


def report_cmd(
    db: Annotated[
        str | None,
        typer.Argument(metavar="DB", help="The store (SQLite path or postgresql:// URL).", show_default=False),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The search's name (default: the store's last).", show_default=False)
    ] = None,
    out: Annotated[
        str | None, typer.Option("--out", "-o", metavar="FILE", help="The HTML file to write.", show_default=False)
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Write one search of a store as a self-contained HTML page: its tree and best so far."""

    def body(outcome) -> None:
        if db is None:
            raise usage("kir report needs the store", "kir report DB --out report.html")
        if out is None:
            raise usage("kir report needs --out FILE", f"kir report {db} --out report.html")
        if name is not None and not name.strip():
            raise usage("the search's --name is empty", "leave --name out for the store's last search")
        _writable(out)
        from agent.search.report import ReportError, page, payload

        try:
            data = payload(db, name)
        except ReportError as err:
            raise usage(err.message, err.hint) from None
        try:
            with open(out, "w", encoding="utf-8") as f:
                f.write(page(data))
        except OSError as err:
            raise usage(f"cannot write {out}: {err.strerror or err}", rule="io.write") from None
        outcome.fields.update(name=data["name"], task=data["task"], nodes=len(data["nodes"]), out=out)
        line = f"wrote {out}: search {data['name']} ({data['task']}), {len(data['nodes'])} nodes"
        line += f", {len(data['progress'])} evaluations"
        best = next((n for n in data["nodes"] if n["id"] == data["best"]), None)
        if best is not None and best["speedup"]:
            line += f", best {best['speedup']:.3f}x the seed"
        outcome.lines.append(line)

    _finish(_guarded(db, body, "writing the report"), json_out, "report")


def register(app: typer.Typer) -> None:
    """Mount `kir report` on the `kir` group."""
    app.command("report")(report_cmd)
