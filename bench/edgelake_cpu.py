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
* **plexor-noop** (when the example plugin is installed): ``example_greet`` through the same ``plexor serve``:
  the kernel's whole path and Plexor's stdio with no plugin work and no request;
* **before** (with ``--before DIR``): ``plexor serve`` from another copy of the code.

It ends with the split: what the MCP call adds to the direct request, the SDK's round trip alone, Plexor's
own share (``plexor − sdk-noop − direct``) against the 0.3 ms target of issue 27, and that share's kernel part
(``plexor-noop − sdk-noop``) and plugin part (``plexor − plexor-noop − direct``), in wall and CPU time.

For each batch it records the wall time per call, the client's CPU per call (``time.process_time``
of this process: the SDK client's stdio reading, JSON-RPC framing and validation) and the server
process's CPU per call (its threads' run time in ns from ``/proc/PID/task/*/schedstat``). The node is the stand-in
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

from edgelake import CASES, NOOP, PLUGINS, SHARE_TARGET, _bare_request, paired, start_node  # noqa: E402

from kernel import children  # noqa: E402 - bench/kernel.py: this process's children, from /proc

WHO = ["direct", "plexor", "sdk", "sdk-noop"] + (["plexor-noop"] if NOOP else [])
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
    """CPU time of ``pid`` so far, all its threads: the scheduler's run time in ns (``/proc/PID/task/*/schedstat``),
    not the 10 ms ticks of ``/proc/PID/stat``, which would quantise a batch's figure by 100 µs or more per call."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


async def measure(host: str, port: int, batches: int, calls: int, profile: str | None,
                  before: str | None) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home = Path(tempfile.mkdtemp(prefix="plexor-bench-edgelake-cpu-"))
    atexit.register(shutil.rmtree, home, True)
    (home / "config").mkdir()
    (home / "config" / "plexor.toml").write_text(f'[edgelake]\nnodes = ["{host}:{port}"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS=PLUGINS, PLEXOR_LOG_LEVEL="warning")
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
            pid = pids.get("plexor" if whom == "plexor-noop" else whom)
            server = cpu_seconds(pid) if pid else 0.0
            cpu, started = time.process_time(), time.perf_counter()
            for _ in range(n):
                if whom == "direct":
                    _bare_request(host, port, command, destination)
                elif whom == "sdk-noop":
                    await sessions[whom].call_tool("request", {})
                elif whom == "plexor-noop" and NOOP:
                    await sessions["plexor"].call_tool(*NOOP)
                elif whom != "sdk":
                    r = await sessions[whom].call_tool(f"edgelake_{case}", args)
                    assert not r.is_error, r
                else:
                    await sessions["sdk"].call_tool("request", {"port": port, "command": command}
                                                    | ({"destination": destination} if destination else {}))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            server = (cpu_seconds(pid) - server) if pid else 0.0
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
                base_wall, base_cpu = (0.0, 0.0) if w.endswith("-noop") else (d["wall"], d["client"])
                summary.append(f"| {case} | {w} | {us(m['wall'] - base_wall)} | {us(cpu - base_cpu)} "
                               f"| {m['wall'] / d['wall']:.2f}× | {cpu / d['client']:.2f}× |")
    return "\n".join(lines + summary + split(out))


def split(out: dict[str, Any]) -> list[str]:
    """What an MCP call through ``plexor serve`` adds to the direct request, and how it splits: the SDK's stdio
    round trip (sdk-noop), Plexor's own share, and that share's kernel and plugin parts; each a median of
    differences taken within one rotation of batches (CPU: client + server, the direct request's client CPU)."""
    lines = ["", "The split, per call (µs; medians of per-rotation differences): Plexor's own share is "
             "plexor − sdk-noop − direct; its kernel part plexor-noop − sdk-noop (example_greet through `plexor "
             "serve`), its plugin part plexor − plexor-noop − direct; beside it the bare SDK server's request "
             "share, sdk − sdk-noop − direct", "",
             "| call | measure | added: plexor − direct | SDK round trip alone | Plexor's own | ≤ 300 | kernel part "
             "| plugin part | bare SDK server's request share |", "| --- | --- | ---: | ---: | ---: | :---: | ---: "
             "| ---: | ---: |"]
    for case, by in out.items():
        wall = {w: m["wall"] for w, m in by.items()}
        cpu = {w: [c + s for c, s in zip(m["client"], m["server"], strict=True)] for w, m in by.items()}
        for measure, s in (("wall", wall), ("CPU", cpu)):
            vals = [paired(s, ("plexor",), ("direct",)), paired(s, ("sdk-noop",), ()),
                    paired(s, ("plexor",), ("sdk-noop", "direct")), paired(s, ("plexor-noop",), ("sdk-noop",)),
                    paired(s, ("plexor",), ("plexor-noop", "direct")), paired(s, ("sdk",), ("sdk-noop", "direct"))]
            shown = ["—" if v is None else f"{v * 1e6:,.0f}" for v in vals]
            ok = "—" if vals[2] is None else ("yes" if vals[2] <= SHARE_TARGET else "no")
            lines.append(f"| {case} | {measure} | {' | '.join(shown[:3])} | {ok} | {' | '.join(shown[3:])} |")
    return lines


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
