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
    python bench/telemetry.py --in-process [--calls 20000] [--rounds 5]

``--in-process`` splits the cost of one request without a server around it: the kernel's
``Telemetry.observe`` around a request that does nothing, in each configuration, next to the
OpenTelemetry SDK doing only its own part (a span started and ended, a histogram recorded), so
what is Plexor's and what is the SDK's can be told apart. Spans go through the same
``BatchSpanProcessor`` and OTLP/HTTP exporter to the same discarding sink; CPU is the process's
(all threads). Same run, interleaved, medians.

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
from typing import Any

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


async def in_process(calls: int, rounds: int, sink_url: str) -> None:
    """Per-request CPU of Plexor's telemetry code against the SDK's own calls, in this process."""
    import gc
    from types import SimpleNamespace

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    from opentelemetry.trace import SpanKind
    from prometheus_client import CollectorRegistry

    from plexor.core.base import Request
    from plexor.features.telemetry import Telemetry
    from plexor.features.telemetry.metrics import BUCKETS
    from plexor.handle import Gauges

    kernel = SimpleNamespace(records={}, inflight=0, log=None, gauges=Gauges())
    request = Request("tool", "bench_echo", None, 7)
    providers: list[Any] = []

    def tracing(ratio: float) -> Any:
        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
        # A queue for a whole round: a tight loop outruns the exporter, and dropped spans would cost nothing.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{sink_url}/v1/traces"),
                                                       max_queue_size=calls * rounds + 1))
        providers.append(provider)
        return provider

    def metering() -> Any:
        provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        providers.append(provider)
        return provider

    def telemetry(ratio: float | None = None, otlp_metrics: bool = False) -> Telemetry:
        return Telemetry(kernel, tracer_provider=None if ratio is None else tracing(ratio),  # type: ignore[arg-type]
                         meter_provider=metering() if otlp_metrics else None, registry=CollectorRegistry())

    async def nothing(req: Any, plugin: str) -> None:
        return None

    def observed(t: Telemetry) -> Any:
        async def one() -> None:
            await t.observe(nothing, request, "bench")
        return one

    attributes = {"mcp.method.name": "tools/call", "plexor.plugin.name": "bench", "gen_ai.tool.name": "bench_echo",
                  "gen_ai.operation.name": "execute_tool", "jsonrpc.request.id": "7", "plexor.outcome": "ok"}

    def sdk_span(ratio: float, current: bool) -> Any:
        tracer = tracing(ratio).get_tracer("bench")

        async def one() -> None:
            if current:
                with tracer.start_as_current_span("tools/call bench_echo", kind=SpanKind.SERVER, attributes=attributes,
                                                  record_exception=False, set_status_on_exception=False):
                    await nothing(request, "bench")
            else:
                tracer.start_span("tools/call bench_echo", kind=SpanKind.SERVER, attributes=attributes).end()
        return one

    histogram = metering().get_meter("bench").create_histogram(
        "d", unit="s", explicit_bucket_boundaries_advisory=list(BUCKETS))

    async def sdk_histogram() -> None:
        histogram.record(0.0003, {**attributes, "mcp.protocol.version": "2025-11-25"})

    async def bare() -> None:
        await nothing(request, "bench")

    sides: dict[str, Any] = {
        "no telemetry": bare,
        "metrics (/metrics)": observed(telemetry()),
        "+ OTLP metrics": observed(telemetry(otlp_metrics=True)),
        "traces 10%": observed(telemetry(0.1)),
        "traces 10% + OTLP metrics": observed(telemetry(0.1, True)),
        "traces all": observed(telemetry(1.0)),
        "traces all + OTLP metrics": observed(telemetry(1.0, True)),
        "SDK: histogram.record": sdk_histogram,
        "SDK: span 10%": sdk_span(0.1, False),
        "SDK: span all": sdk_span(1.0, False),
        "SDK: span all, as current": sdk_span(1.0, True),
    }
    results: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            one = sides[name]
            gc.collect()
            before = time.process_time()
            for _ in range(calls):
                await one()
            results[name].append((time.process_time() - before) / calls)
    for provider in providers:
        provider.shutdown()  # the last batches are exported (and counted in nobody's round)
    base = statistics.median(results["no telemetry"])
    print(f"in process: {rounds} rounds x {calls} requests, interleaved; CPU per request, median")
    for name, values in results.items():
        mid = statistics.median(values)
        extra = "" if name.startswith("SDK") or name == "no telemetry" else f"{(mid - base) * 1e6:+7.2f} µs"
        print(f"{name:<28} {mid * 1e6:7.2f} µs  {extra}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tool", default="bench_echo")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http",
                        help="http: `plexor serve --transport http` (where /metrics is); stdio: `plexor serve`")
    parser.add_argument("--in-process", action="store_true",
                        help="split Plexor's own cost from the OpenTelemetry SDK's, without a server")
    args = parser.parse_args()

    from mcp import Client, StdioServerParameters

    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    if args.in_process:
        await in_process(args.calls if args.calls != 2000 else 20000, args.rounds,
                         f"http://127.0.0.1:{sink.server_address[1]}")
        sink.shutdown()
        return
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
