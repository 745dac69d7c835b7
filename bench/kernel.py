"""Kernel overhead beside the bare SDK server, in one run: start-up and sequential calls over stdio.

    python bench/kernel.py [--runs 15] [--calls 2000] [--rounds 3] [--cpu-batches 20] [--cpu-calls 500]

Plexor runs with every plugin installed in this environment (`plexor plugins` lists them) and calls
`example_greet` (the template plugin) against the anchor's `echo`; both through the SDK's
`ClientSession` over stdio. Reports medians and ratios (absolute times are noisy on shared machines).
Targets (issue 2): spawn -> initialize at most 1.10x the anchor; calls/s at least 0.95x.

Server CPU per warm call (issue 24: at most 0.6x the anchor's): both servers up at once, warmed with
200 calls each, then `--cpu-batches` batches of `--cpu-calls` calls alternating between them; each
batch reads the server process's CPU time (user + system, all its threads) from /proc/PID/stat before
and after. Reports the median of the per-batch ratios, their range and quartiles, and the ratio of the
totals. Pairing batches on live sessions keeps the load of the moment the same for both sides (the
anchor's CPU per call swings by half between fresh spawns on a shared machine). `--runs 0`,
`--rounds 0` or `--cpu-batches 0` skips that part.
"""

from __future__ import annotations

import argparse
import contextlib
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
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def children() -> set[int]:
    """The pids of this process's children."""
    mine, out = str(os.getpid()), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == mine:
                    out.add(int(entry.name))
    return out


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


async def server_cpu(srv: dict[str, StdioServerParameters], calling: dict[str, tuple[str, dict]], batches: int,
                     calls: int) -> dict[str, list[float]]:
    """Server CPU seconds per call, per batch: both servers up at once on warm sessions, batches alternating
    (a rotating order), so the load of the moment hits both sides alike."""
    per_call: dict[str, list[float]] = {k: [] for k in srv}
    async with contextlib.AsyncExitStack() as stack:
        sessions, pids = {}, {}
        for side, params in srv.items():
            known = children()
            read, write = await stack.enter_async_context(stdio_client(params))
            sessions[side] = await stack.enter_async_context(ClientSession(read, write))
            await sessions[side].initialize()
            await sessions[side].list_tools()
            (pids[side],) = children() - known
        sides = list(srv)
        for side in sides:  # warm: plugins loaded, caches and the heap settled
            for _ in range(200):
                await sessions[side].call_tool(*calling[side])
        for i in range(batches):
            for side in sides[i % 2:] + sides[:i % 2]:
                cpu = cpu_seconds(pids[side])
                for _ in range(calls):
                    result = await sessions[side].call_tool(*calling[side])
                    assert not result.is_error, result
                per_call[side].append((cpu_seconds(pids[side]) - cpu) / calls)
    return per_call


async def main(runs: int, calls: int, rounds: int, cpu_batches: int, cpu_calls: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        srv = servers(home)
        for params in srv.values():  # warm the bytecode caches once
            await time_initialize(params)
        init: dict[str, list[float]] = {k: [] for k in srv}
        for _ in range(runs):  # interleaved, so drift hits both sides alike
            for name, params in srv.items():
                init[name].append(await time_initialize(params))
        calling = {"bare SDK": ("echo", {"text": "hi"}), "plexor": ("example_greet", {"name": "hi"})}
        rates: dict[str, list[float]] = {k: [] for k in srv}
        for i in range(rounds):
            for side in (list(srv) if i % 2 == 0 else list(srv)[::-1]):  # alternate who goes first
                rates[side].append(await calls_per_second(srv[side], *calling[side], calls))
        cpus = await server_cpu(srv, calling, cpu_batches, cpu_calls) if cpu_batches else {}
    print(f"{'measure':<36} {'bare SDK':>10} {'plexor':>10} {'ratio':>7} {'target':>8}")
    if runs:
        bare_i, plex_i = statistics.median(init["bare SDK"]), statistics.median(init["plexor"])
        print(f"{'spawn -> initialize (median, s)':<36} {bare_i:>10.3f} {plex_i:>10.3f} {plex_i / bare_i:>7.3f} {'<= 1.10':>8}")
    if rounds:
        bare_r, plex_r = statistics.median(rates["bare SDK"]), statistics.median(rates["plexor"])
        print(f"{'sequential tools/call (calls/s)':<36} {bare_r:>10.0f} {plex_r:>10.0f} {plex_r / bare_r:>7.3f} {'>= 0.95':>8}")
    if cpus:
        bare_c, plex_c = statistics.median(cpus["bare SDK"]) * 1e6, statistics.median(cpus["plexor"]) * 1e6
        ratios = sorted(p / b for b, p in zip(cpus["bare SDK"], cpus["plexor"], strict=True))
        quart = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        print(f"{'server CPU per warm call (median, us)':<36} {bare_c:>10.0f} {plex_c:>10.0f} "
              f"{statistics.median(ratios):>7.3f} {'<= 0.60':>8}")
        print(f"  {cpu_batches} paired batches of {cpu_calls} calls: ratio per batch {ratios[0]:.3f}-{ratios[-1]:.3f} "
              f"(quartiles {quart[0]:.3f} / {quart[2]:.3f}); ratio of totals "
              f"{sum(cpus['plexor']) / sum(cpus['bare SDK']):.3f}; bare SDK {min(cpus['bare SDK']) * 1e6:.0f}-"
              f"{max(cpus['bare SDK']) * 1e6:.0f} us, plexor {min(cpus['plexor']) * 1e6:.0f}-{max(cpus['plexor']) * 1e6:.0f} us; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved calls/s rounds per side (0: none)")
    ap.add_argument("--cpu-batches", type=int, default=20, help="paired batches for server CPU per call (0: none)")
    ap.add_argument("--cpu-calls", type=int, default=500, help="calls per batch")
    a = ap.parse_args()
    anyio.run(main, a.runs, a.calls, a.rounds, a.cpu_batches, a.cpu_calls)
