"""Benchmark: an EdgeLake call through Plexor vs a bare HTTP request to the same node.

The node is the test suite's stand-in (``plugins/edgelake/tests/standin.py``),
run in its own process as a real node would be, three times: answering as fast
as it can (tens of µs: the worst case for the ratios), and holding every reply
back 1 ms and 5 ms, emulating a real node's own work per command (parse the
command, plan and run the SQL). Plexor is configured with the three as nodes
``fast``, ``ms1`` and ``ms5``.

Contenders, run in short alternating batches (10 per round, node and call) so
a burst of load on a shared machine hits one batch of each and the median over
batches drops it; every time is per call:

* **bare request** (the anchor): an ``http.client`` request from this process
  on a new connection with ``Connection: close`` (send the command header, read
  the whole body, close) — what talking to the node costs, since a real node
  closes the connection after every reply and never answers a second request
  on it (PROTOCOL.md, "Observed later");
* **plugin's client alone**: ``EdgeLakeClient.send`` (no kernel, no parsing);
* **kernel.call_tool** (in process): argument validation, command rendering,
  the request, reply checks, parsing, the result envelope;
* **bare SDK server over stdio**: a minimal ``mcp`` low-level server (embedded
  below) whose one tool sends the same request with ``http.client`` and
  returns the body — what any MCP server pays for the protocol;
* **plexor serve over stdio**: the real client path, ``python -m plexor
  serve`` in a subprocess and the SDK's ``ClientSession`` in this process;
* **the two no-ops**: the bare SDK server's tool called with no node (the
  SDK's stdio round trip alone) and, when the example plugin is installed,
  ``example_greet`` through the same ``plexor serve`` (the kernel's path with
  no plugin work). The MCP table splits what ``plexor serve`` adds to the bare
  request into the SDK's round trip, Plexor's own share (``plexor − SDK no-op
  − bare``, issue 27's target: ≤ 0.3 ms) and that share's kernel and plugin
  parts, as medians of differences taken within one rotation of batches.

Two calls: ``node_status`` (``get status where format = json``, 85 bytes) and
``query`` (a network query the capture holds: 3 rows in 4 chunks). The plugin,
like the bare request, opens one connection per request.

Run: ``python bench/edgelake.py [--calls 2000] [--rounds 5] [--in-process] [--write]``, or
``python bench/edgelake.py --real HOST:PORT [--query JSON]`` against a real node (in process and over
MCP stdio in one run: the latency each adds per call over a bare request);
``--write`` also writes the tables into ``plugins/edgelake/BENCH.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "plugins" / "edgelake" / "tests" / "standin.py"
TARGET = 1.2
BATCHES = 10  # per round, node and call; contenders alternate batch by batch

CASES = {
    "node_status": ("get status where format = json", None, {}),
    "query": (
        'sql mydb format = json "select device, value from temperature where device = \'dev1\' limit 3"', "network",
        {"database": "mydb", "table": "temperature", "select": "device, value", "where": "device = 'dev1'", "limit": 3},
    ),
}
LATENCIES = {"fast": 0.0, "ms1": 0.001, "ms5": 0.005}  # node name -> seconds the stand-in waits per reply
LABEL = {"fast": "stand-in (µs)", "ms1": "+1 ms per reply", "ms5": "+5 ms per reply"}


# Over MCP, beside ``plexor serve``'s EdgeLake call and the bare SDK server doing the same request: the bare
# SDK server's tool called with no node (``noop``: the SDK's stdio round trip alone) and, when the example
# plugin is installed, ``plexor serve``'s own no-op (``pnoop``: example_greet, the kernel's whole path with no
# plugin work), so the added latency splits into the SDK's floor, the kernel's share and the plugin's.
MCP_WHO = ("sdk", "plexor", "noop", "pnoop")
NOOP: tuple[str, dict[str, Any]] | None = (
    ("example_greet", {"name": "x"}) if importlib.util.find_spec("plexor_example") else None)
PLUGINS = "edgelake,example" if NOOP else "edgelake"
SHARE_TARGET = 300e-6  # issue 27, item 7: added latency per call on a warm connection
SPLIT_TITLE = ("per call, medians of paired batch differences (µs): what an MCP call adds to a bare request, "
               "and how it splits")
SPLIT_HEAD = ("| node | call | bare request | bare SDK server | plexor serve | added: plexor − bare | ratio "
              "| SDK round trip alone (no-op) | Plexor's own: plexor − no-op − bare | ≤ 300 | of which kernel: "
              "plexor no-op − SDK no-op | of which plugin: plexor − plexor no-op − bare | the same request from the "
              "bare SDK server: sdk − SDK no-op − bare |")
SPLIT_RULE = "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: | ---: |"
SPLIT_NOTE = ("Plexor's own share is what `plexor serve` adds beyond the SDK's stdio round trip and the request "
              "itself; the kernel's part of it is its no-op call (example_greet) against the bare SDK server's, the "
              "plugin's the EdgeLake call against that no-op, less the bare request. The last column is the same "
              "difference for the bare SDK server, whose tool sends the request with `http.client`: what sending "
              "the request from inside any MCP server process costs beyond sending it from the client. Each "
              "difference is taken within one rotation of batches, then the median over the rotations.")


def paired(series: dict[str, list[float]], plus: tuple[str, ...], minus: tuple[str, ...]) -> float | None:
    """The median over batches of (sum of ``plus``) − (sum of ``minus``), each batch's values taken together."""
    if not all(series.get(k) for k in plus + minus):
        return None
    n = min(len(series[k]) for k in plus + minus)
    return statistics.median(sum(series[k][i] for k in plus) - sum(series[k][i] for k in minus) for i in range(n))


def split_row(label: str, series: dict[str, list[float]]) -> str:
    """One row of the MCP split table (see SPLIT_HEAD)."""
    med = {k: statistics.median(v) for k, v in series.items() if v}
    added, own = paired(series, ("plexor",), ("bare",)), paired(series, ("plexor",), ("noop", "bare"))
    kernel = paired(series, ("pnoop",), ("noop",))
    plugin = paired(series, ("plexor",), ("pnoop", "bare"))
    sdk_request = paired(series, ("sdk",), ("noop", "bare"))

    def show(v: float | None) -> str:
        return "—" if v is None else us(v)

    verdict = "—" if own is None else ("yes" if own <= SHARE_TARGET else "no")
    return (f"| {label} | {us(med['bare'])} | {us(med['sdk'])} | {us(med['plexor'])} | {show(added)} "
            f"| {med['plexor'] / med['bare']:.2f}× | {us(med['noop'])} | {show(own)} | {verdict} | {show(kernel)} "
            f"| {show(plugin)} | {show(sdk_request)} |")


def start_node(delay: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(STANDIN), "--delay", str(delay)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    port = int(line.split("127.0.0.1:")[1].split(";")[0])
    return proc, port


class Bare:
    """The anchor: one ``http.client`` connection per request, ``Connection: close``, as the node requires."""

    def request(self, port: int, command: str, destination: str | None) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"command": command, "User-Agent": "AnyLog/1.23", "Connection": "close"}
        if destination:
            headers["destination"] = destination
        try:
            conn.request("GET", "/", headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200 or not body:
            raise RuntimeError(f"bare request failed: {resp.status} {body[:100]!r}")
        return body

    def timed(self, port: int, command: str, destination: str | None, n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            self.request(port, command, destination)
        return (time.perf_counter() - started) / n

    def close(self) -> None:
        pass  # nothing is kept open


# --------------------------------------------------------------------------------------------------
# The bare SDK server (run as ``python bench/edgelake.py --bare-server``)

def bare_server() -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    bare = Bare()

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[types.Tool(
            name="request", description="Send one EdgeLake command and return the reply.",
            input_schema={"type": "object", "properties": {"port": {"type": "integer"}, "command": {"type": "string"},
                                                           "destination": {"type": "string"}},
                          "required": ["port", "command"]})])

    async def call_tool(ctx: Any, params: Any) -> Any:
        a = params.arguments or {}
        if "port" not in a:  # no node: the SDK's own stdio round trip (bench/edgelake_cpu.py's floor)
            return types.CallToolResult(content=[types.TextContent(type="text", text="")])
        body = bare.request(int(a["port"]), a["command"], a.get("destination"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=body.decode("utf-8", "replace"))])

    server = Server("bare-edgelake", version="1", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


# --------------------------------------------------------------------------------------------------

def calls_for(latency: float, calls: int) -> int:
    """As many calls as fit in about half a second of node time (at least 50, at most ``calls``)."""
    return max(50, min(calls, int(0.5 / (latency + 100e-6))))


async def run(ports: dict[str, int], calls: int, rounds: int,
              mcp: bool = True) -> dict[tuple[str, str], dict[str, list[float]]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from plexor.core.kernel import Kernel

    home = Path(tempfile.mkdtemp(prefix="plexor-bench-edgelake-"))
    (home / "config").mkdir()
    nodes = ", ".join(f'"{name}=127.0.0.1:{port}"' for name, port in ports.items())
    (home / "config" / "plexor.toml").write_text(f"[edgelake]\nnodes = [{nodes}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS=PLUGINS, PLEXOR_LOG_LEVEL="warning")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    kernel = Kernel(load_entry_points=True, environ=env)
    await kernel.start()
    assert kernel.records["edgelake"].state.value == "ready", kernel.records["edgelake"].error
    from plexor_edgelake.engine import Engine

    engine = kernel.records["edgelake"].handle.service(Engine)
    bare = Bare()
    out: dict[tuple[str, str], dict[str, list[float]]] = {
        (node, case): {k: [] for k in ("bare", "client", "kernel", *MCP_WHO)} for node in ports for case in CASES
    }
    plexor_params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve"], env=env)
    sdk_params = StdioServerParameters(command=sys.executable, args=[__file__, "--bare-server"], env=env)

    def tool_args(node: str, args: dict[str, Any]) -> dict[str, Any]:
        return args if node == "fast" else {**args, "node": node}  # fast is the default node

    def sdk_args(port: int, command: str, destination: str | None) -> dict[str, Any]:
        return {"port": port, "command": command} | ({"destination": destination} if destination else {})

    async def timed_session(session: Any, name: str, args: dict[str, Any], n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await session.call_tool(name, args)
        return (time.perf_counter() - started) / n

    async def timed_calls(call: Any, n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await call()
        return (time.perf_counter() - started) / n

    async def batch(who: str, node: str, port: int, case: str, n: int) -> float:
        """One batch of ``n`` calls by ``who``: the time per call."""
        command, destination, args = CASES[case]
        tool, targs = f"edgelake_{case}", tool_args(node, args)
        if who == "bare":
            return bare.timed(port, command, destination, n)
        if who == "client":
            edge = engine.client.node(node)
            return await timed_calls(lambda: engine.client.send(edge, "GET", command, destination=destination), n)
        if who == "kernel":
            return await timed_calls(lambda: kernel.call_tool(tool, targs), n)
        if who == "sdk":
            return await timed_session(sdk, "request", sdk_args(port, command, destination), n)
        if who == "noop":
            return await timed_session(sdk, "request", {}, n)
        if who == "pnoop" and NOOP:
            return await timed_session(plexor, NOOP[0], NOOP[1], n)
        return await timed_session(plexor, tool, targs, n)

    plexor: Any = None
    sdk: Any = None
    try:
        async with contextlib.AsyncExitStack() as stack:
            if mcp:
                pr, pw = await stack.enter_async_context(stdio_client(plexor_params))
                plexor = await stack.enter_async_context(ClientSession(pr, pw))
                sr, sw = await stack.enter_async_context(stdio_client(sdk_params))
                sdk = await stack.enter_async_context(ClientSession(sr, sw))
                await plexor.initialize()
                await sdk.initialize()
                await plexor.list_tools()  # the client re-lists tools it has not seen; list once, as real clients do
                await sdk.list_tools()
            for node, port in ports.items():  # warm every path once
                for case, (command, destination, args) in CASES.items():
                    bare.request(port, command, destination)
                    outcome = await kernel.call_tool(f"edgelake_{case}", tool_args(node, args))
                    assert not outcome.is_error, outcome.text
                    for session, name, a in ((plexor, f"edgelake_{case}", tool_args(node, args)),
                                             (sdk, "request", sdk_args(port, command, destination)), (sdk, "request", {}),
                                             *([(plexor, NOOP[0], NOOP[1])] if NOOP else [])):
                        if session is None:
                            continue
                        r = await session.call_tool(name, a)
                        assert not r.is_error, r
            for _ in range(rounds):
                for node, port in ports.items():
                    n = calls_for(LATENCIES[node], calls)
                    for case in CASES:
                        series = out[(node, case)]
                        # Short batches, alternating contenders: a burst of load on the shared machine
                        # hits one batch of each, and the median over batches drops it.
                        b, mb = max(10, n // BATCHES), max(5, n // 4 // BATCHES)
                        order = ["bare", "client", "kernel"] + ([w for w in MCP_WHO if w != "pnoop" or NOOP]
                                                                if sdk is not None else [])
                        for i in range(BATCHES):  # a rotating order: none always runs first or after the same one
                            for who in order[i % len(order):] + order[:i % len(order)]:
                                size = b if who in ("bare", "client", "kernel") else mb
                                series[who].append(await batch(who, node, port, case, size))
    finally:
        bare.close()
        await kernel.stop()
    return out


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def verdict(ratio: float) -> str:
    return "yes" if ratio <= TARGET else "no"


def tables(results: dict[tuple[str, str], dict[str, list[float]]], calls: int, rounds: int) -> str:
    med = {key: {k: statistics.median(v) for k, v in series.items() if v} for key, series in results.items()}
    mcp = all("plexor" in m for m in med.values())
    lines = [
        f"EdgeLake bench — {rounds} rounds, up to {calls} calls per contender and round (fewer at 1 and 5 ms: "
        f"about 0.5 s of node time; MCP rows a quarter of that), in {BATCHES} alternating batches per round; "
        f"median of the {rounds * BATCHES} batches, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end; each stand-in node in its own process",
        "",
        "(a) In process — `kernel.call_tool` vs a bare `http.client` request",
        "",
        "| node | call | bare request (µs) | plugin's client alone (µs) | ratio | kernel.call_tool (µs) | ratio "
        f"| ≤ {TARGET}× |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for (node, case), m in med.items():
        b = m["bare"]
        lines.append(f"| {LABEL[node]} | {case} | {us(b)} | {us(m['client'])} | {m['client'] / b:.2f}× "
                     f"| {us(m['kernel'])} | {m['kernel'] / b:.2f}× | {verdict(m['kernel'] / b)} |")
    if not mcp:
        lines += ["", "(MCP over stdio not measured in this run: `--in-process`)", "",
                  "Fixed cost per call in process (median over the three node latencies of kernel.call_tool − "
                  f"bare request) and the node time per command from which a call is within {TARGET}×", "",
                  "| call | in process: cost (µs) | 1.2× from |", "| --- | ---: | ---: |"]
        for case in CASES:
            k = statistics.median(m["kernel"] - m["bare"] for (node, c), m in med.items() if c == case)
            lines.append(f"| {case} | {us(k)} | {need(k)} |")
        return "\n".join(lines)
    lines += ["", "(b) MCP over stdio, warm sessions: " + SPLIT_TITLE, "", SPLIT_HEAD, SPLIT_RULE]
    for (node, case), series in results.items():
        lines.append(split_row(f"{LABEL[node]} | {case}", series))
    lines += ["", SPLIT_NOTE]
    lines += [
        "",
        "(c) Fixed cost per call (median over the three node latencies of Plexor − bare request) and the node "
        f"time per command from which a call is within {TARGET}× a bare request (`(t + cost) / t ≤ {TARGET}` "
        f"⇔ `t ≥ {1 / (TARGET - 1):g} × cost`)",
        "",
        "| call | in process: cost (µs) | 1.2× from | MCP stdio: cost (µs) | 1.2× from | of which the bare SDK server's (µs) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case in CASES:
        rows = [m for (node, c), m in med.items() if c == case]
        k = statistics.median(m["kernel"] - m["bare"] for m in rows)
        p = statistics.median(m["plexor"] - m["bare"] for m in rows)
        sdk = statistics.median(m["sdk"] - m["bare"] for m in rows)
        lines.append(f"| {case} | {us(k)} | {need(k)} | {us(p)} | {need(p)} | {us(sdk)} |")
    return "\n".join(lines)


def need(cost: float) -> str:
    if cost <= 0:
        return "any node"
    return f"{cost / (TARGET - 1) * 1000:.1f} ms"


async def real_node(address: str, batches: int, per_batch: int, query: dict[str, Any] | None = None,
                    mcp: bool = True) -> str:
    """Against a real node, in one run: a bare ``Connection: close`` request, the plugin's client alone,
    ``kernel.call_tool`` and, over MCP stdio on warm sessions, ``plexor serve`` and a bare SDK server, each
    also with its no-op (MCP_WHO)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from plexor.core.kernel import Kernel

    host, port = address.rsplit(":", 1)
    home = Path(tempfile.mkdtemp(prefix="plexor-bench-edgelake-real-"))
    (home / "config").mkdir()
    (home / "config" / "plexor.toml").write_text(f'[edgelake]\nnodes = ["{address}"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS=PLUGINS, PLEXOR_LOG_LEVEL="warning")
    kernel = Kernel(load_entry_points=True, environ=env)
    await kernel.start()
    query = query or CASES["query"][2]
    shown = (await kernel.call_tool("edgelake_query", {**query, "dry_run": True})).data["rest"]["headers"]  # type: ignore[index]
    cases = {"node_status": CASES["node_status"], "query": (shown["command"], shown.get("destination"), query)}
    from plexor_edgelake.engine import Engine

    engine = kernel.records["edgelake"].handle.service(Engine)
    edge = engine.client.node(None)
    who_all = ["bare", "client", "kernel"] + ([w for w in MCP_WHO if w != "pnoop" or NOOP] if mcp else [])
    series: dict[str, dict[str, list[float]]] = {c: {w: [] for w in who_all} for c in cases}
    try:
        async with contextlib.AsyncExitStack() as stack:
            sessions: dict[str, Any] = {}
            if mcp:
                for name, args in (("plexor", ["-m", "plexor", "serve"]), ("sdk", [__file__, "--bare-server"])):
                    r, w = await stack.enter_async_context(stdio_client(StdioServerParameters(
                        command=sys.executable, args=args, env=env)))
                    sessions[name] = await stack.enter_async_context(ClientSession(r, w))
                    await sessions[name].initialize()
                    await sessions[name].list_tools()

            async def one(who: str, case: str, n: int) -> float:
                command, destination, args = cases[case]
                started = time.perf_counter()
                for _ in range(n):
                    if who == "bare":
                        _bare_request(host, int(port), command, destination)
                    elif who == "client":
                        await engine.client.send(edge, "GET", command, destination=destination)
                    elif who == "kernel":
                        await kernel.call_tool(f"edgelake_{case}", args)
                    elif who == "plexor":
                        await sessions["plexor"].call_tool(f"edgelake_{case}", args)
                    elif who == "noop":
                        await sessions["sdk"].call_tool("request", {})
                    elif who == "pnoop" and NOOP:
                        await sessions["plexor"].call_tool(*NOOP)
                    else:
                        await sessions["sdk"].call_tool("request", {"port": int(port), "command": command}
                                                        | ({"destination": destination} if destination else {}))
                return (time.perf_counter() - started) / n

            for case in cases:  # warm every path
                for who in who_all:
                    await one(who, case, 3)
            for i in range(batches):
                for case in cases:
                    # The contenders take turns in a rotating order, so none always runs first after the other call.
                    for who in who_all[i % len(who_all):] + who_all[:i % len(who_all)]:
                        series[case][who].append(await one(who, case, per_batch))
    finally:
        await kernel.stop()
    return _real_table(address, batches, per_batch, series, mcp)


def _bare_request(host: str, port: int, command: str, destination: str | None) -> None:
    conn = http.client.HTTPConnection(host, port)
    headers = {"command": command, "User-Agent": "AnyLog/1.23", "Connection": "close"}
    if destination:
        headers["destination"] = destination
    conn.request("GET", "/", headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    if resp.status != 200 or not body:
        raise RuntimeError(f"bare request failed: {resp.status} {body[:100]!r}")


def _real_table(address: str, batches: int, per_batch: int, series: dict[str, dict[str, list[float]]],
                mcp: bool) -> str:
    lines = [f"Real node {address}: {batches} alternating batches of {per_batch} calls, median per call, load average "
             f"{os.getloadavg()[0]:.1f}", "",
             "| call | bare request (µs) | plugin's client alone (µs) | ratio | kernel.call_tool (µs) | ratio | ≤ 1.2× |",
             "| --- | ---: | ---: | ---: | ---: | ---: | :---: |"]
    med = {case: {w: statistics.median(v) for w, v in m.items()} for case, m in series.items()}
    for case, m in med.items():
        b, c, k = m["bare"], m["client"], m["kernel"]
        lines.append(f"| {case} | {us(b)} | {us(c)} | {c / b:.2f}× | {us(k)} | {k / b:.2f}× | {verdict(k / b)} |")
    if mcp:
        lines += ["", "Over MCP stdio, warm sessions: " + SPLIT_TITLE, "", SPLIT_HEAD, SPLIT_RULE]
        lines += [split_row(f"real node | {case}", m) for case, m in series.items()]
        lines += ["", SPLIT_NOTE]
    return "\n".join(lines)


def main() -> None:
    if "--bare-server" in sys.argv:
        bare_server()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write the tables into plugins/edgelake/BENCH.md")
    parser.add_argument("--in-process", action="store_true", help="skip the MCP-over-stdio rows")
    parser.add_argument("--real", metavar="HOST:PORT",
                        help="instead of stand-ins: a real node's REST address (the query expects mydb.temperature)")
    parser.add_argument("--query", metavar="JSON", help="with --real: the edgelake_query arguments to time instead")
    ns = parser.parse_args()
    if ns.real:
        import json

        query = json.loads(ns.query) if ns.query else None
        print(asyncio.run(real_node(ns.real, max(5, ns.rounds * 4), max(10, ns.calls // 50), query,
                                    mcp=not ns.in_process)))
        return
    procs: list[subprocess.Popen[str]] = []
    try:
        ports = {}
        for node, delay in LATENCIES.items():
            proc, ports[node] = start_node(delay)
            procs.append(proc)
        results = asyncio.run(run(ports, ns.calls, ns.rounds, mcp=not ns.in_process))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(5)
    table = tables(results, ns.calls, ns.rounds)
    print(table)
    if ns.write:
        target = ROOT / "plugins" / "edgelake" / "BENCH.md"
        text = target.read_text(encoding="utf-8") if target.exists() else ""
        marker = "<!-- bench:edgelake -->"
        block = f"{marker}\n{table}\n{marker}"
        if marker in text:
            head, _, rest = text.partition(marker)
            _, _, tail = rest.partition(marker)
            text = head + block + tail
        else:
            text = (text + "\n\n" if text else "") + block + "\n"
        target.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
