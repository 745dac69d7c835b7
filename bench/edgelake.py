"""Benchmark: an EdgeLake call through Plexor vs a bare HTTP request to the same node.

The node is the test suite's stand-in (``plugins/edgelake/tests/standin.py``),
run in its own process as a real node would be. Side by side, in one run,
interleaved in rounds so drift hits every contender alike:

* anchor: a bare keep-alive request with the standard library's
  ``http.client`` (send the command header, read the whole body) — the
  cheapest way a script can talk to the node;
* Plexor in-process: ``kernel.call_tool(...)`` (argument validation, command
  rendering, request, reply checks, parsing, the result envelope);
* Plexor over MCP: the SDK's ``Client`` connected in memory to the kernel's
  server (JSON-RPC framing and the protocol on top).

Two calls are measured: ``node_status`` (``get status where format = json``,
85 bytes) and ``query`` (a recorded network query, 5 rows).

Run: ``python bench/edgelake.py [--calls 2000] [--rounds 5] [--write]``;
``--write`` also writes the table into ``plugins/edgelake/BENCH.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "plugins" / "edgelake" / "tests" / "standin.py"

CASES = {
    "node_status": ("get status where format = json", None, {}),
    "query": (
        'sql mydb format = json "select * from t order by value desc limit 2"', "network",
        {"database": "mydb", "table": "t", "order_by": [{"column": "value", "direction": "desc"}], "limit": 2},
    ),
}


def start_node() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(STANDIN)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    port = int(line.split("127.0.0.1:")[1].split(";")[0])
    return proc, port


def bare(port: int, command: str, destination: str | None, n: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"command": command, "User-Agent": "AnyLog/1.23"}
    if destination:
        headers["destination"] = destination
    conn.request("GET", "/", headers=headers)
    conn.getresponse().read()
    started = time.perf_counter()
    for _ in range(n):
        conn.request("GET", "/", headers=headers)
        resp = conn.getresponse()
        body = resp.read()
    elapsed = time.perf_counter() - started
    assert body and resp.status == 200
    conn.close()
    return elapsed / n


async def plexor_runs(port: int, n: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    from mcp import Client

    from plexor.kernel import Kernel
    from plexor.server import build_server

    home = Path(tempfile.mkdtemp(prefix="plexor-bench-edgelake-"))
    (home / "config").mkdir()
    (home / "config" / "plexor.toml").write_text(f'[edgelake]\nnodes = ["127.0.0.1:{port}"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS="edgelake")
    kernel = Kernel(load_entry_points=True, environ=env)
    await kernel.start()
    assert kernel.records["edgelake"].state.value == "ready", kernel.records["edgelake"].error
    out: dict[str, dict[str, list[float]]] = {c: {"bare": [], "client": [], "kernel": [], "mcp": []} for c in CASES}
    engine = kernel.records["edgelake"].services["engine"]
    edge = engine.client.nodes[0]
    try:
        async with Client(build_server(kernel), mode="legacy") as client:
            for _ in range(rounds):
                for case, (command, destination, args) in CASES.items():
                    out[case]["bare"].append(await asyncio.to_thread(bare, port, command, destination, n))
                    started = time.perf_counter()
                    for _ in range(n):
                        await engine.client.send(edge, "GET", command, destination=destination)
                    out[case]["client"].append((time.perf_counter() - started) / n)
                    tool = f"edgelake_{case}"
                    outcome = await kernel.call_tool(tool, args)
                    assert not outcome.is_error, outcome.text
                    started = time.perf_counter()
                    for _ in range(n):
                        await kernel.call_tool(tool, args)
                    out[case]["kernel"].append((time.perf_counter() - started) / n)
                    r = await client.call_tool(tool, args)
                    assert not r.is_error
                    m = max(1, n // 4)
                    started = time.perf_counter()
                    for _ in range(m):
                        await client.call_tool(tool, args)
                    out[case]["mcp"].append((time.perf_counter() - started) / m)
    finally:
        await kernel.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write the table into plugins/edgelake/BENCH.md")
    ns = parser.parse_args()
    proc, port = start_node()
    try:
        results = asyncio.run(plexor_runs(port, ns.calls, ns.rounds))
    finally:
        proc.terminate()
        proc.wait(5)
    lines = [
        f"EdgeLake bench — {ns.rounds} rounds × {ns.calls} calls (MCP: {max(1, ns.calls // 4)}), median of rounds, "
        f"Python {platform.python_version()}, stand-in node in its own process",
        "",
        "| call | bare http.client (µs) | plugin's client alone (µs) | Plexor kernel.call_tool (µs) | ratio "
        "| Plexor over MCP (µs) | ratio | node time for 1.2× in-process |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, series in results.items():
        b, c, k, m = (statistics.median(series[x]) * 1e6 for x in ("bare", "client", "kernel", "mcp"))
        # (t_node + overhead) / t_node <= 1.2  <=>  t_node >= 5 * overhead
        need = 5 * (k - b) / 1000
        lines.append(f"| {case} | {b:.0f} | {c:.0f} | {k:.0f} | {k / b:.2f}× | {m:.0f} | {m / b:.2f}× | ≥ {need:.1f} ms |")
    table = "\n".join(lines)
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
