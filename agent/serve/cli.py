"""`kir serve --mcp [--http] [--host H] [--port P] [--searches DIR]`: the MCP tool server
(agent.serve.tools) on stdio, or on streamable HTTP at http://H:P/mcp.

Start-up: typer and `kir.cli` only; the MCP SDK and the pipeline load when the server starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kir.cli import _emit, usage


def serve_cmd(
    mcp: Annotated[
        bool, typer.Option("--mcp", help="Speak the Model Context Protocol (the one protocol served).")
    ] = False,
    http: Annotated[
        bool, typer.Option("--http", help="Streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="With --http: the address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="With --http: the port.")] = 8765,
    searches: Annotated[
        str, typer.Option("--searches", metavar="DIR", help="Where the searches it starts keep their stores and logs.")
    ] = "kir-searches",
) -> None:
    """Serve KIR's verbs as MCP tools: check, cost, compile, run, tactics, searches, the knowledge
    base and the rules, each answering typed structured output."""
    problem = None
    if not mcp:
        problem = usage("kir serve speaks MCP: give --mcp", "kir serve --mcp (stdio), or kir serve --mcp --http")
    elif not http and (host != "127.0.0.1" or port != 8765):
        problem = usage("--host and --port are for --http", "kir serve --mcp --http --port 8765")
    elif Path(searches).exists() and not Path(searches).is_dir():
        problem = usage(f"--searches {searches} is not a folder", "a folder for the searches' stores and logs")
    if problem is not None:
        _emit("\n".join(d.render() for d in problem.diagnostics))
        raise typer.Exit(2)
    from agent.serve.tools import server

    app = server(searches)
    if http:
        app.settings.host = host
        app.settings.port = port
        app.run("streamable-http")
    else:
        app.run("stdio")


def register(app: typer.Typer) -> None:
    """Mount `kir serve` on the `kir` group."""
    app.command("serve")(serve_cmd)
