"""Kernel overhead beside the bare SDK server, in one run: start-up and sequential calls over stdio.

    python bench/kernel.py [--runs 15] [--calls 2000]

Plexor runs with every plugin installed in this environment (`plexor plugins` lists them) and calls
`example_greet` (the template plugin) against the anchor's `echo`; both through the SDK's
`ClientSession` over stdio. Reports medians and ratios (absolute times are noisy on shared machines).
Targets (issue 2): spawn -> initialize at most 1.10x the anchor; calls/s at least 0.95x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent


def servers(home: str) -> dict[str, StdioServerParameters]:
    env = {**os.environ, "PLEXOR_HOME": home, "PLEXOR_LOG_LEVEL": "warning"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # both sides use their bytecode caches, as installed software does
    return {
        "bare SDK": StdioServerParameters(command=sys.executable, args=[str(HERE / "anchors" / "bare_server.py")], env=env),
        "plexor": StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve"], env=env),
    }


async def time_initialize(params: StdioServerParameters) -> float:
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        elapsed = time.perf_counter() - start
    return elapsed


async def calls_per_second(params: StdioServerParameters, name: str, args: dict, n: int) -> float:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # the client re-lists tools it has not seen; list once, as real clients do
        for _ in range(50):
            await session.call_tool(name, args)
        start = time.perf_counter()
        for _ in range(n):
            result = await session.call_tool(name, args)
            assert not result.is_error, result
        return n / (time.perf_counter() - start)


async def main(runs: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        srv = servers(home)
        for params in srv.values():  # warm the bytecode caches once
            await time_initialize(params)
        init: dict[str, list[float]] = {k: [] for k in srv}
        for _ in range(runs):  # interleaved, so drift hits both sides alike
            for name, params in srv.items():
                init[name].append(await time_initialize(params))
        rates: dict[str, list[float]] = {k: [] for k in srv}
        for _ in range(3):
            rates["bare SDK"].append(await calls_per_second(srv["bare SDK"], "echo", {"text": "hi"}, calls))
            rates["plexor"].append(await calls_per_second(srv["plexor"], "example_greet", {"name": "hi"}, calls))
    bare_i, plex_i = statistics.median(init["bare SDK"]), statistics.median(init["plexor"])
    bare_r, plex_r = statistics.median(rates["bare SDK"]), statistics.median(rates["plexor"])
    print(f"{'measure':<36} {'bare SDK':>10} {'plexor':>10} {'ratio':>7} {'target':>8}")
    print(f"{'spawn -> initialize (median, s)':<36} {bare_i:>10.3f} {plex_i:>10.3f} {plex_i / bare_i:>7.3f} {'<= 1.10':>8}")
    print(f"{'sequential tools/call (calls/s)':<36} {bare_r:>10.0f} {plex_r:>10.0f} {plex_r / bare_r:>7.3f} {'>= 0.95':>8}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    anyio.run(main, a.runs, a.calls)
