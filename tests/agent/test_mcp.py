"""The MCP tool server through the SDK's in-memory client: every tool listed with an output
schema and answering structured content that validates against it; a wrong program is a Record
that says why, a wrong argument a tool error that says what would be right, an unknown resource
a protocol error; progress while a run works; a search submitted, watched and read back; long
texts capped with the flag set."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import jsonschema
import pytest
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session

from agent.serve import tools as serve_tools
from agent.serve.tools import server

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = (ROOT / "examples" / "softmax.kir").read_text()
SEED = (ROOT / "benchmarks" / "tasks" / "softmax" / "seed.kir").read_text()
TOOLS = {
    "check", "cost", "compile", "run", "tactics_list", "tactics_apply", "search_submit", "search_status",
    "search_result", "kb_search", "rules_explain",
}  # fmt: skip


def session_run(body, tmp_path: Path):
    """Run `body(session, schemas)` against a fresh server on the in-memory transport."""

    async def main():
        async with create_connected_server_and_client_session(server(tmp_path / "searches")) as session:
            listed = await session.list_tools()
            schemas = {t.name: t.outputSchema for t in listed.tools}
            return await body(session, schemas)

    return asyncio.run(main())


async def call(session, schemas, name: str, args: dict, **kw):
    result = await session.call_tool(name, args, **kw)
    if not result.isError:
        jsonschema.validate(result.structuredContent, schemas[name])
    return result


def test_every_tool_is_listed_with_an_output_schema(tmp_path):
    async def body(session, schemas):
        return schemas

    schemas = session_run(body, tmp_path)
    assert set(schemas) == TOOLS
    assert all(s and s.get("type") == "object" and s.get("properties") for s in schemas.values())


def test_check_cost_and_compile_answer_records(tmp_path):
    async def body(session, schemas):
        good = await call(session, schemas, "check", {"text": SOFTMAX})
        bad = await call(session, schemas, "check", {"text": SOFTMAX.replace("axis = 0", "axis = 3", 1)})
        broken = await call(session, schemas, "check", {"text": "kernel k(\n"})
        cost = await call(
            session, schemas, "cost", {"text": SEED, "task": "softmax", "preset": "bench", "params": {"BLOCK": 8192}}
        )
        compiled = await call(session, schemas, "compile", {"text": SOFTMAX, "backend": "triton"})
        return good, bad, broken, cost, compiled

    good, bad, broken, cost, compiled = session_run(body, tmp_path)
    assert good.structuredContent["ok"] and good.structuredContent["stage"] == "verify"
    b = bad.structuredContent
    assert not bad.isError and not b["ok"] and b["diagnostics"][0]["line"] and b["diagnostics"][0]["rule"]
    assert broken.structuredContent["stage"] == "parse" and broken.structuredContent["diagnostics"][0]["line"] in (1, 2)
    est = cost.structuredContent["estimate"]
    assert cost.structuredContent["ok"] and est["time_s"] > 0 and est["bottleneck"] and est["breakdown"]
    rep = compiled.structuredContent
    assert rep["ok"] and rep["stage"] == "compile" and rep["report"]["registers"] > 0


def test_wrong_arguments_are_tool_errors_a_model_can_fix_and_an_unknown_resource_a_protocol_error(tmp_path):
    async def body(session, schemas):
        out = [
            await call(session, schemas, "cost", {"text": SEED, "task": "sofmax"}),
            await call(session, schemas, "compile", {"text": SOFTMAX, "backend": "tritn"}),
            await call(session, schemas, "tactics_apply", {"text": SEED, "tactic": "retil", "params": {}}),
            await call(session, schemas, "tactics_apply", {"text": SEED, "tactic": "warps", "params": {"warps": 3}}),
            await call(session, schemas, "rules_explain", {"rule": "bounds.global-acces"}),
            await call(session, schemas, "check", {"text": ""}),
        ]
        with pytest.raises(McpError):
            await session.read_resource("kir://nothing")  # type: ignore[arg-type]
        return out

    results = session_run(body, tmp_path)
    assert all(r.isError for r in results)
    texts = [r.content[0].text for r in results]
    assert "softmax" in texts[0] and "triton" in texts[1] and "retile" in texts[2]
    assert "warps" in texts[3] and "bounds.global-access" in texts[4] and "empty" in texts[5]


def test_run_reports_progress_and_answers_the_harness_record(tmp_path):
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(p, total, message):
        seen.append((p, total, message))

    async def body(session, schemas):
        return await call(
            session, schemas, "run", {"text": SEED, "task": "softmax", "backend": "interp", "params": {"BLOCK": 512},
                                      "seeds": [1]},
            progress_callback=progress,
        )  # fmt: skip

    result = session_run(body, tmp_path)
    rec = result.structuredContent
    assert rec["ok"] and rec["stage"] == "run" and rec["verdict"]["ok"], rec
    assert seen[0][0] == 0 and seen[-1][0] == 1 and "ok" in (seen[-1][2] or "")


def test_tactics_list_and_apply(tmp_path):
    async def body(session, schemas):
        every = await call(session, schemas, "tactics_list", {})
        here = await call(session, schemas, "tactics_list", {"text": SEED})
        applied = await call(
            session, schemas, "tactics_apply", {"text": SEED, "tactic": "warps", "params": {"warps": 8}}
        )
        return every, here, applied

    every, here, applied = session_run(body, tmp_path)
    names = {t["name"] for t in every.structuredContent["tactics"]}
    assert {"retile", "warps", "pipeline"} <= names
    applicable = {t["name"]: t["values"] for t in here.structuredContent["tactics"]}
    assert "warps" in applicable and applicable["warps"]["warps"]
    assert "warps(8)" in applied.structuredContent["text"] and applied.structuredContent["params"] == {"warps": 8}


def test_a_search_is_submitted_watched_and_read_back(tmp_path):
    async def body(session, schemas):
        sub = await call(session, schemas, "search_submit", {"task": "softmax", "budget": 3, "backend": "mtia-sim"})
        name = sub.structuredContent["name"]
        deadline = time.monotonic() + 600
        status = None
        while time.monotonic() < deadline:
            status = await call(session, schemas, "search_status", {"name": name})
            if not status.structuredContent["running"]:
                break
            await asyncio.sleep(1.0)
        result = await call(session, schemas, "search_result", {"name": name})
        missing = await call(session, schemas, "search_status", {"name": "nope"})
        return status, result, missing

    status, result, missing = session_run(body, tmp_path)
    s = status.structuredContent
    assert not s["running"] and s["evaluations"] >= 1 and s["stopped"], s
    r = result.structuredContent
    assert r["best_text"].startswith("#") or "kernel" in r["best_text"]
    assert r["path"][0]["move"] == "seed" and r["best_score"] is not None
    assert missing.isError


def test_rules_explain(tmp_path):
    async def body(session, schemas):
        return await call(session, schemas, "rules_explain", {"rule": "bounds.global-access"})

    r = session_run(body, tmp_path).structuredContent
    assert r["id"] == "bounds.global-access" and r["bad"] and r["good"] and r["explanation"]
    assert r["diagnostics"] and r["diagnostics"][0]["rule"] == "bounds.global-access"


def test_long_texts_are_capped_with_the_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(serve_tools, "MAX_TEXT", 200)

    async def body(session, schemas):
        return await call(session, schemas, "compile", {"text": SOFTMAX, "backend": "triton"})

    rec = session_run(body, tmp_path).structuredContent
    assert rec["truncated"] and len(json.dumps(rec["report"])) < 20_000
    assert all(len(v) <= 200 for v in rec["report"].values() if isinstance(v, str))


def test_kb_search_finds_a_rules_explanation(tmp_path):
    async def body(session, schemas):
        return await call(session, schemas, "kb_search", {"query": "", "rules": ["sync.parity"], "limit": 3})

    hits = session_run(body, tmp_path).structuredContent["hits"]
    assert hits and any("sync.parity" in h["id"] for h in hits[:3]), hits


def test_kir_serve_over_stdio_and_streamable_http(tmp_path):
    """The command itself, as a client reaches it: a child process on stdio, then on HTTP."""
    import socket
    import subprocess
    import sys

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    async def over_stdio():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "agent.cli", "serve", "--mcp", "--searches", str(tmp_path)],
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool("check", {"text": SOFTMAX})

    assert asyncio.run(over_stdio()).structuredContent["ok"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "serve", "--mcp", "--http", "--port", str(port), "--searches", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)

        async def over_http():
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                return names, await session.call_tool("check", {"text": SOFTMAX})

        names, result = asyncio.run(over_http())
        assert names == TOOLS and result.structuredContent["ok"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
