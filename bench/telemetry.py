"""Telemetry's cost: server CPU per `tools/call` with PLEXOR_OTEL on against off, same server, same run.

Four `plexor serve --transport http` processes (``--transport stdio``: `plexor serve`), the same code
and plugins: ``off``; ``metrics`` (``PLEXOR_OTEL=1``
alone: metrics for /metrics, no spans); ``traces 10%`` and ``traces all`` (spans and metrics exported
over OTLP/HTTP to a sink in this process, which answers 200 and discards, so the exporter does all its
real work: batching, protobuf encoding, the HTTP post; the first samples one trace in ten with the
standard ``OTEL_TRACES_SAMPLER``). Each is driven by the SDK's client, one call at a time, in
interleaved rounds; the CPU time of each *server process* (user + system from /proc, so the exporter's
thread counts and the client does not) is divided by the calls it answered. Medians over the rounds,
and the ratio to ``off``.

    python bench/telemetry.py [--calls 2000] [--rounds 7] [--tool bench_echo] [--transport http|stdio]

The default tool, ``bench_echo`` (``bench/site``), does almost nothing, so the ratio is the
worst case: a tool that does real work makes the fixed cost of a span a smaller share.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts everything and keeps nothing."""

    posts = 0
    bytes = 0

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        type(self).posts += 1
        type(self).bytes += length
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def http_server(env: dict[str, str]) -> Iterator[str]:
    """`plexor serve --transport http` on a free port; yields its /mcp URL."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", str(port)], env=env)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tool", default="bench_echo")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http",
                        help="http: `plexor serve --transport http` (where /metrics is); stdio: `plexor serve`")
    args = parser.parse_args()

    from mcp import Client, StdioServerParameters

    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    home = tempfile.mkdtemp(prefix="plexor-bench-telemetry-")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PLEXOR_", "OTEL_"))}
    base.update(PLEXOR_HOME=home, PLEXOR_LOG_LEVEL="warning", PLEXOR_PLUGINS="bench-echo",
                PYTHONPATH=os.pathsep.join(p for p in (str(HERE / "site"), base.get("PYTHONPATH", "")) if p))
    otlp = {"PLEXOR_OTEL": "1", "OTEL_SERVICE_NAME": "plexor-bench", "OTEL_METRIC_EXPORT_INTERVAL": "5000",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}"}
    sides = {
        "off": base,
        "metrics": {**base, "PLEXOR_OTEL": "1"},  # /metrics only: no OTLP endpoint, so no spans are made
        "traces 10%": {**base, **otlp, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
        "traces all": {**base, **otlp},  # every span and the metrics over OTLP
    }
    per_call: dict[str, list[float]] = {name: [] for name in sides}  # seconds of server CPU per call, per round
    wall: dict[str, list[float]] = {name: [] for name in sides}
    async with contextlib.AsyncExitStack() as stack:
        clients = {}
        for name, env in sides.items():
            if args.transport == "stdio":
                params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve"], env=env)
                clients[name] = await stack.enter_async_context(Client(params))
            else:
                url = stack.enter_context(http_server(env))
                clients[name] = await stack.enter_async_context(Client(url))
        pids = {}
        for name, client in clients.items():
            pids[name] = (await client.call_tool("plexor_health", {})).structured_content["pid"]
            for _ in range(200):  # warm up: imports, caches, the exporter's first batches
                await client.call_tool(args.tool, {"text": "warm"})
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                client = clients[name]
                before, started = cpu_seconds(pids[name]), time.perf_counter()
                for i in range(args.calls):
                    result = await client.call_tool(args.tool, {"text": f"call {i}"})
                    assert not result.is_error, result
                elapsed = time.perf_counter() - started
                per_call[name].append((cpu_seconds(pids[name]) - before) / args.calls)
                wall[name].append(elapsed / args.calls)
        await anyio.sleep(6)  # one more metric export and the last span batches
    sink.shutdown()

    off_cpu = statistics.median(per_call["off"])
    print(f"{args.transport}, tool {args.tool}: {args.rounds} rounds x {args.calls} calls per side, interleaved")
    print(f"{'side':<11} {'server CPU/call: median (min-max)':<34} {'vs off':>16} {'wall/call':>11}")
    for name in sides:
        cpu = per_call[name]
        mid = statistics.median(cpu)
        print(f"{name:<11} {mid * 1e6:7.1f} µs ({min(cpu) * 1e6:.1f}-{max(cpu) * 1e6:.1f}){'':<8} "
              f"{mid / off_cpu:6.3f}x {(mid - off_cpu) * 1e6:+6.1f} µs {statistics.median(wall[name]) * 1e6:8.1f} µs")
    print(f"OTLP sink: {Sink.posts} exports, {Sink.bytes / 1024:.0f} KiB")


if __name__ == "__main__":
    anyio.run(main)
