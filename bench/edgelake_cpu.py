"""EdgeLake over MCP stdio: wall and CPU time per call, against a direct request, in one run (issue 27).

Wall time on a shared, loaded machine is noisy; CPU time per call much less so. This script sends
the same EdgeLake command three ways, in interleaved batches on warm connections:

* **direct**: the anchor, one ``http.client`` request from this process (``Connection: close``, as
  the node requires), its CPU from ``time.process_time``;
* **plexor**: ``edgelake_node_status`` / ``edgelake_query`` through ``plexor serve`` over stdio,
  driven by the SDK's ``ClientSession`` in this process;
* **sdk**: a bare ``mcp`` low-level server over stdio whose one tool sends the same request with
  ``http.client`` and returns the body (``bench/edgelake.py --bare-server``): what any MCP server pays;
* **sdk-noop**: the same bare server in a process of its own, its tool called without a node (it
  returns an empty text at once): the SDK's stdio round trip alone, the floor under any MCP call;
* **before** (with ``--before DIR``): ``plexor serve`` from another copy of the code.

For each batch it records the wall time per call, the client's CPU per call (``time.process_time``
of this process: the SDK client's stdio reading, JSON-RPC framing and validation) and the server
process's CPU per call (user + system from ``/proc/PID/stat``). The node is the stand-in
(``plugins/edgelake/tests/standin.py``, replaying the real node's recorded replies) in its own
process, or a real node with ``--real HOST:PORT``. Medians over the batches; the added cost is
``plexor − direct`` (wall) and ``plexor client + plexor server − direct client`` (CPU).

    python bench/edgelake_cpu.py [--batches 30] [--calls 100] [--real HOST:PORT] [--profile FILE]

``--profile FILE`` runs ``plexor serve`` under cProfile (timed by CPU time, not wall time) and writes its
stats to FILE on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from edgelake import CASES, _bare_request, start_node  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
WHO = ["direct", "plexor", "sdk", "sdk-noop"]
PROFILED = """
import cProfile, runpy, sys, time
out = sys.argv[1]
sys.argv = ["plexor", "serve"]
prof = cProfile.Profile(time.process_time)
prof.enable()
try:
    runpy.run_module("plexor", run_name="__main__")
except SystemExit:
    pass
finally:
    prof.disable()
    prof.dump_stats(out)
"""


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


async def measure(host: str, port: int, batches: int, calls: int, profile: str | None,
                  before: str | None) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home = Path(tempfile.mkdtemp(prefix="plexor-bench-edgelake-cpu-"))
    atexit.register(shutil.rmtree, home, True)
    (home / "config").mkdir()
    (home / "config" / "plexor.toml").write_text(f'[edgelake]\nnodes = ["{host}:{port}"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS="edgelake", PLEXOR_LOG_LEVEL="warning")
    plexor_args = ["-m", "plexor", "serve"]
    if profile:  # CPU time, not wall time: on a loaded machine a wall-clock profile charges preemption to syscalls
        plexor_args = ["-c", PROFILED, profile]
    servers = {"plexor": (plexor_args, env), "sdk": ([str(HERE / "edgelake.py"), "--bare-server"], env)}
    servers["sdk-noop"] = servers["sdk"]  # the same bare server, called without a node: the SDK round trip alone
    who = WHO + (["before"] if before else [])
    if before:  # the same server from another copy of the code (kernel/plexor and plexor_edgelake in DIR)
        servers["before"] = (["-m", "plexor", "serve"], {**env, "PYTHONPATH": before})
    out: dict[str, dict[str, dict[str, list[float]]]] = {
        case: {w: {"wall": [], "client": [], "server": []} for w in who} for case in CASES}
    async with contextlib.AsyncExitStack() as stack:
        sessions: dict[str, Any] = {}
        pids: dict[str, int] = {}
        for name, (args, server_env) in servers.items():
            known = children()
            read, write = await stack.enter_async_context(stdio_client(StdioServerParameters(
                command=sys.executable, args=args, env=server_env)))
            sessions[name] = await stack.enter_async_context(ClientSession(read, write))
            await sessions[name].initialize()
            await sessions[name].list_tools()
            (pids[name],) = children() - known

        async def one(whom: str, case: str, n: int) -> tuple[float, float, float]:
            command, destination, args = CASES[case]
            server = cpu_seconds(pids[whom]) if whom in pids else 0.0
            cpu, started = time.process_time(), time.perf_counter()
            for _ in range(n):
                if whom == "direct":
                    _bare_request(host, port, command, destination)
                elif whom == "sdk-noop":
                    await sessions[whom].call_tool("request", {})
                elif whom != "sdk":
                    r = await sessions[whom].call_tool(f"edgelake_{case}", args)
                    assert not r.is_error, r
                else:
                    await sessions["sdk"].call_tool("request", {"port": port, "command": command}
                                                    | ({"destination": destination} if destination else {}))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            server = (cpu_seconds(pids[whom]) - server) if whom in pids else 0.0
            return wall / n, cpu / n, server / n

        for case in CASES:
            for w in who:
                await one(w, case, 20)
        for i in range(batches):
            for case in CASES:
                for w in who[i % len(who):] + who[:i % len(who)]:  # a rotating order: none always runs first
                    wall, client, server = await one(w, case, calls)
                    out[case][w]["wall"].append(wall)
                    out[case][w]["client"].append(client)
                    out[case][w]["server"].append(server)
    return out


def table(out: dict[str, Any], batches: int, calls: int, node: str) -> str:
    def us(x: float) -> str:
        return f"{x * 1e6:,.0f}"

    lines = [f"{node}: {batches} rotating batches of {calls} calls per contender and call, medians per call; "
             f"load average {os.getloadavg()[0]:.1f} at the end", "",
             "| call | who | wall (µs) | client CPU (µs) | server CPU (µs) | CPU total (µs) |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    summary = ["", "Added per call over the direct request (wall: ``server − direct``; CPU: the client's and the "
               "server's, less the direct request's own CPU; for sdk-noop, which sends no request, all of it)", "",
               "| call | server | added wall (µs) | added CPU (µs) | wall ratio | CPU ratio |",
               "| --- | --- | ---: | ---: | ---: | ---: |"]
    for case, by in out.items():
        med = {w: {k: statistics.median(v) for k, v in m.items()} for w, m in by.items()}
        for w, m in med.items():
            lines.append(f"| {case} | {w} | {us(m['wall'])} | {us(m['client'])} | {us(m['server'])} "
                         f"| {us(m['client'] + m['server'])} |")
        d = med["direct"]
        for w, m in med.items():
            if w != "direct":
                cpu = m["client"] + m["server"]
                # sdk-noop sends no request: all of it is what MCP adds (its ratio: to the direct request)
                base_wall, base_cpu = (0.0, 0.0) if w == "sdk-noop" else (d["wall"], d["client"])
                summary.append(f"| {case} | {w} | {us(m['wall'] - base_wall)} | {us(cpu - base_cpu)} "
                               f"| {m['wall'] / d['wall']:.2f}× | {cpu / d['client']:.2f}× |")
    return "\n".join(lines + summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--real", metavar="HOST:PORT", help="a real node's REST address instead of the stand-in")
    parser.add_argument("--profile", metavar="FILE", help="run plexor serve under cProfile, stats to FILE")
    parser.add_argument("--before", metavar="DIR", help="also time plexor serve with PYTHONPATH=DIR (a copy of "
                        "kernel/plexor and plexor_edgelake from another commit): before and after in one run")
    ns = parser.parse_args()
    proc: subprocess.Popen[str] | None = None
    try:
        if ns.real:
            host, port_text = ns.real.rsplit(":", 1)
            port, node = int(port_text), f"Real node {ns.real}"
        else:
            proc, port = start_node(0.0)
            host, node = "127.0.0.1", "Stand-in node (recorded replies, no delay)"
        out = asyncio.run(measure(host, port, ns.batches, ns.calls, ns.profile, ns.before))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(5)
    print(table(out, ns.batches, ns.calls, node))


if __name__ == "__main__":
    main()
