"""Round-trip time of the MCP server's `check` over stdio: `kir serve --mcp` started as a child
process by the SDK's stdio client, then `check` of one program called N times; the first call
(imports, the verifier's rules) reported apart. Target: p50 under 100 ms for the largest example.

    python benchmarks/mcp_check_latency.py [--file examples/attention_scores_hopper.kir] [--calls 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]


def largest_example() -> Path:
    return max((ROOT / "examples").glob("*.kir"), key=lambda p: p.stat().st_size)


async def measure(file: Path, calls: int) -> dict:
    params = StdioServerParameters(command=sys.executable, args=["-m", "agent.cli", "serve", "--mcp"], cwd=str(ROOT))
    text = file.read_text()
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ready = time.perf_counter() - started
        first_start = time.perf_counter()
        first = await session.call_tool("check", {"text": text})
        first_ms = (time.perf_counter() - first_start) * 1e3
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            result = await session.call_tool("check", {"text": text})
            times.append((time.perf_counter() - t0) * 1e3)
            if result.isError or not result.structuredContent:
                raise SystemExit(f"check failed: {result.content}")
    ok = bool(first.structuredContent and first.structuredContent.get("ok"))
    return {
        "file": str(file.relative_to(ROOT)),
        "bytes": len(text),
        "program_ok": ok,
        "server_start_s": round(ready, 3),
        "first_call_ms": round(first_ms, 1),
        "calls": calls,
        "p50_ms": round(statistics.median(times), 2),
        "p90_ms": round(sorted(times)[int(0.9 * (len(times) - 1))], 2),
        "min_ms": round(min(times), 2),
        "target_p50_ms": 100,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=None)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    file = Path(args.file) if args.file else largest_example()
    result = asyncio.run(measure(file.resolve(), args.calls))
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if result["p50_ms"] < result["target_p50_ms"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
