"""OpenTelemetry traces and metrics of real requests, and the Prometheus endpoint of a real server.

Spans and metrics are caught by the OpenTelemetry SDK's own in-memory exporter and reader,
from calls made by a real MCP client through a real kernel; ``/metrics`` is read from a real
``plexor serve --transport http`` process and parsed by ``prometheus_client``'s own parser.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from conftest import make_plugin

import plexor
from plexor import Context, span

pytest.importorskip("opentelemetry.sdk", reason="the plexor[otel] extra (in the kernel's test extra) is not installed")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from plexor.features.telemetry import Telemetry  # noqa: E402

pytestmark = pytest.mark.anyio

SECRET = "s3cret-argument-value"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def _demo_plugin():
    def echo(text: str) -> dict:
        """Echo the text back."""
        return {"echo": text}

    def fails(text: str) -> dict:
        """Always fails."""
        raise ValueError("the demo tool failed on purpose")

    async def remote(ctx: Context) -> dict:
        """Calls something remote, in a child span."""
        with plexor.span("demo fetch", **{"server.address": "store.example", "server.port": 443}):
            return {"fetched": True}

    def register_tools(register, settings):
        register(echo)
        register(fails)
        register(remote)

    def read_item(item_id: str) -> dict:
        return {"id": item_id}

    def topic(subject: str) -> str:
        """A prompt about a subject."""
        return f"Tell me about {subject}."

    return make_plugin(
        "demo",
        plexor_register_tools=register_tools,
        plexor_register_resource_templates=lambda register, settings: register("demo://item/{item_id}", read_item),
        plexor_register_prompts=lambda register, settings: register(topic, name="topic"),
    )


@pytest.fixture
def otel():
    """The SDK's in-memory span exporter and metric reader, and a Prometheus registry (/metrics), for one test."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    registry = CollectorRegistry(auto_describe=True)
    meter_provider = MeterProvider(metric_readers=[reader])
    yield SimpleNamespace(spans=spans, tracer_provider=tracer_provider, reader=reader, registry=registry,
                          meter_provider=meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@contextlib.asynccontextmanager
async def _observed(plexor_fixture, otel, **kwargs):
    async with plexor_fixture.client([("demo", _demo_plugin())], **kwargs) as client:
        client.kernel.telemetry = Telemetry(client.kernel, tracer_provider=otel.tracer_provider,
                                            meter_provider=otel.meter_provider, registry=otel.registry)
        yield client


def _by_name(otel) -> dict[str, object]:
    return {s.name: s for s in otel.spans.get_finished_spans()}


def _durations(otel) -> list[tuple[dict, int]]:
    data = otel.reader.get_metrics_data()
    out = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "mcp.server.operation.duration":
                    out.extend((dict(p.attributes), p.count) for p in metric.data.data_points)
    return out


async def test_one_span_per_request_in_the_mcp_conventions(plexor, otel):
    async with _observed(plexor, otel) as client:
        assert not (await client.call_tool("demo_echo", {"text": SECRET})).is_error
        assert (await client.call_tool("demo_fails", {"text": SECRET})).is_error
        assert (await client.call_tool("demo_nope", {"text": SECRET})).is_error
        assert (await client.call_tool("demo_echo", {"wrong": SECRET})).is_error
        await client.read_resource("demo://item/42")
        await client.get_prompt("demo_topic", {"subject": SECRET})
    spans = otel.spans.get_finished_spans()
    names = [s.name for s in spans]
    assert names == ["tools/call demo_echo", "tools/call demo_fails", "tools/call demo_nope", "tools/call demo_echo",
                     "resources/read", "prompts/get demo_topic"]

    ok = spans[0]
    assert ok.kind == SpanKind.SERVER
    assert ok.status.status_code == StatusCode.UNSET
    assert ok.attributes["mcp.method.name"] == "tools/call"
    assert ok.attributes["gen_ai.tool.name"] == "demo_echo"
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["plexor.plugin.name"] == "demo"
    assert ok.attributes["plexor.outcome"] == "ok"
    assert ok.attributes["mcp.protocol.version"] == "2025-11-25"
    assert ok.attributes["jsonrpc.request.id"]
    assert "error.type" not in ok.attributes

    failed = spans[1]
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "ValueError"  # the plugin's exception, not the guidance wrapper
    assert failed.attributes["plexor.outcome"] == "error"
    assert failed.status.description is None  # messages can quote arguments: left out

    unknown, bad_args = spans[2], spans[3]  # refused before dispatch, counted all the same
    assert unknown.attributes["error.type"] == "NotFound" and "plexor.plugin.name" not in unknown.attributes
    assert bad_args.attributes["error.type"] == "InvalidArgument"
    assert bad_args.attributes["plexor.plugin.name"] == "demo"

    read, prompt = spans[4], spans[5]
    assert read.attributes["mcp.method.name"] == "resources/read"
    assert read.attributes["mcp.resource.uri"] == "demo://item/42"
    assert prompt.attributes["gen_ai.prompt.name"] == "demo_topic"

    for s in spans:  # arguments are never recorded unless an operator opts in
        assert all(SECRET not in str(v) for v in s.attributes.values()), s.name
        assert "gen_ai.tool.call.arguments" not in s.attributes


async def test_the_clients_trace_is_continued_and_plugin_spans_are_children(plexor, otel):
    async with _observed(plexor, otel) as client:
        meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=1"}
        assert not (await client.call_tool("demo_remote", {}, meta=meta)).is_error
    spans = _by_name(otel)
    request, child = spans["tools/call demo_remote"], spans["demo fetch"]
    assert format(request.context.trace_id, "032x") == TRACE_ID
    assert request.parent is not None and request.parent.is_remote
    assert format(request.parent.span_id, "016x") == PARENT_ID
    assert request.context.trace_state.get("vendor") == "1"
    assert child.parent.span_id == request.context.span_id
    assert child.context.trace_id == request.context.trace_id
    assert child.kind == SpanKind.CLIENT
    assert child.attributes["server.address"] == "store.example"


async def test_without_trace_context_a_request_starts_its_own_trace(plexor, otel):
    async with _observed(plexor, otel) as client:
        await client.call_tool("demo_echo", {"text": "x"})
    (span,) = otel.spans.get_finished_spans()
    assert span.parent is None


async def test_plexor_span_is_a_no_op_outside_telemetry(plexor):
    assert plexor_span_is_null()
    async with plexor.client([("demo", _demo_plugin())]) as client:
        assert client.kernel.telemetry is None
        result = await client.call_tool("demo_remote", {})
        assert not result.is_error and result.structured_content == {"fetched": True}


def plexor_span_is_null() -> bool:
    return isinstance(plexor.span("anything"), contextlib.nullcontext)


async def test_arguments_are_recorded_only_when_the_operator_opts_in(plexor, otel):
    async with _observed(plexor, otel) as client:
        client.kernel.telemetry.record_arguments = True
        await client.call_tool("demo_echo", {"text": SECRET})
    (span,) = otel.spans.get_finished_spans()
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"text": "s3cret-argument-value"}'


async def test_metrics_by_method_tool_plugin_and_outcome(plexor, otel):
    async with _observed(plexor, otel) as client:
        for _ in range(3):
            await client.call_tool("demo_echo", {"text": "x"})
        await client.call_tool("demo_fails", {"text": "x"})
        await client.call_tool("made_up_name", {})
        await client.read_resource("demo://item/1")
        points = _durations(otel)
        data = otel.reader.get_metrics_data()
    counts = {(a["mcp.method.name"], a.get("gen_ai.tool.name"), a["plexor.outcome"], a.get("error.type")): n
              for a, n in points}
    assert counts[("tools/call", "demo_echo", "ok", None)] == 3
    assert counts[("tools/call", "demo_fails", "error", "ValueError")] == 1
    assert counts[("tools/call", "(unknown)", "error", "NotFound")] == 1  # the client's made-up name is no label
    assert counts[("resources/read", None, "ok", None)] == 1
    assert all("mcp.resource.uri" not in a for a, _ in points)  # unbounded: on spans only

    gauges = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert [p.value for p in gauges["plexor.requests.in_flight"].data.data_points] == [0]
    states = {p.attributes["plexor.plugin.name"]: p.attributes["plexor.plugin.state"]
              for p in gauges["plexor.plugins"].data.data_points}
    assert states["demo"] == "ready" and states["plexor"] == "ready"

    # The same metrics in the Prometheus text format, read back by prometheus_client's own parser.
    from prometheus_client import generate_latest

    families = {f.name: f for f in text_string_to_metric_families(generate_latest(otel.registry).decode())}
    histogram = families["mcp_server_operation_duration_seconds"]
    assert histogram.type == "histogram"
    total = [s for s in histogram.samples if s.name.endswith("_count") and s.labels["gen_ai_tool_name"] == "demo_echo"]
    assert [s.value for s in total] == [3.0]


async def test_in_flight_is_counted_while_a_call_runs(plexor, otel):
    import anyio

    release = anyio.Event()
    started = anyio.Event()

    async def wait() -> dict:
        started.set()
        await release.wait()
        return {}

    plugin = make_plugin("slow", plexor_register_tools=lambda register, settings: register(wait))
    async with plexor.client([("slow", plugin)]) as client:
        telemetry = Telemetry(client.kernel, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        client.kernel.telemetry = telemetry
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "slow_wait", {})
            await started.wait()
            data = otel.reader.get_metrics_data()
            release.set()
    gauges = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert [p.value for p in gauges["plexor.requests.in_flight"].data.data_points] == [1]


# -- switched on by the environment, in real server processes ------------------------------------
def _environ(home, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLEXOR_", "OTEL_"))}
    env.update({"PLEXOR_HOME": str(home), "PLEXOR_PLUGINS": "", "PLEXOR_LOG_LEVEL": "warning"}, **extra)
    return env


def _http_client(url: str, headers: dict[str, str], mode: str = "auto"):
    """The SDK's MCP client over Streamable HTTP, sending ``headers`` with every request."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)), mode=mode)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serve_http(env: dict[str, str], *args: str):
    import socket

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", str(port), *args],
                            stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.time() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise AssertionError("server did not start: " + proc.stderr.read().decode()[-2000:]) from None
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()


async def test_metrics_endpoint_of_a_real_server_is_protected_and_parses(plexor_home):
    import httpx

    token = "t0ken-for-the-test"
    with _serve_http(_environ(plexor_home, PLEXOR_OTEL="1", PLEXOR_TOKEN=token)) as port:
        url = f"http://127.0.0.1:{port}"
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{url}/metrics")).status_code == 401
            assert (await http.get(f"{url}/metrics", headers={**auth, "Host": "evil.example"})).status_code == 421
            assert (await http.get(f"{url}/metrics", headers={**auth, "Origin": "http://evil.example"})).status_code == 403
            async with _http_client(f"{url}/mcp", auth) as client:  # the 2026-07-28 era: no sessions
                for _ in range(2):
                    assert not (await client.call_tool("plexor_health", {})).is_error
                stateless = await http.get(f"{url}/metrics", headers=auth)
                async with _http_client(f"{url}/mcp", auth, mode="legacy") as legacy:  # a 2025-11-25 session
                    assert not (await legacy.call_tool("plexor_health", {})).is_error
                    during = await http.get(f"{url}/metrics", headers=auth)
            reply = await http.get(f"{url}/metrics", headers=auth)
        # The 2026-07-28 era's per-request connections are no sessions; the legacy client's session is one.
        assert list(_samples(stateless.text, "plexor_sessions")) == []
        assert [(s.labels["mcp_protocol_version"], s.value) for s in _samples(during.text, "plexor_sessions")] == \
            [("2025-11-25", 1.0)]
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
        assert token not in reply.text
        families = {f.name: f for f in text_string_to_metric_families(reply.text)}
        counts = [s for s in families["mcp_server_operation_duration_seconds"].samples
                  if s.name.endswith("_count") and s.labels.get("gen_ai_tool_name") == "plexor_health"]
        assert sorted((s.labels["mcp_protocol_version"], s.labels["plexor_outcome"], s.value) for s in counts) == \
            [("2025-11-25", "ok", 1.0), ("2026-07-28", "ok", 2.0)]
        plugins = families["plexor_plugins"].samples
        states = {s.labels["plexor_plugin_name"]: s.labels["plexor_plugin_state"] for s in plugins}
        assert states["plexor"] == "ready"
        assert set(states.values()) <= {"ready", "disabled"}  # PLEXOR_PLUGINS="" disables every installed one
        assert [s.value for s in families["plexor_requests_in_flight"].samples] == [0.0]


def _samples(text: str, name: str):
    return [s for f in text_string_to_metric_families(text) if f.name == name for s in f.samples]


async def test_no_metrics_endpoint_when_telemetry_is_off(plexor_home):
    import httpx

    with _serve_http(_environ(plexor_home)) as port:
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{port}/metrics")).status_code == 404


def test_off_by_default_the_sdk_is_never_imported(plexor_home):
    script = (
        "import sys\n"
        "from plexor.core.kernel import Kernel\n"
        "from plexor.serving.server import build_server\n"
        "from plexor.serving.http import build_http_app\n"
        "from plexor.serving.http_options import HttpOptions\n"
        "k = Kernel()\n"
        "assert k.telemetry is None\n"
        "build_http_app(k, HttpOptions())\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter',"
        " 'prometheus_client', 'plexor.telemetry_'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env=_environ(plexor_home), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_switched_on_without_the_sdk_fails_with_guidance(plexor_home):
    # `plexor serve`, with the SDK's import blocked the way a missing distribution would block it.
    script = ("import sys\nsys.modules['opentelemetry.sdk'] = None\n"
              "from plexor.cli import main\nsys.argv = ['plexor', 'serve']\nmain()\n")
    out = subprocess.run([sys.executable, "-c", script], env=_environ(plexor_home, PLEXOR_OTEL="1"),
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    assert "PLEXOR_OTEL='1' but the OpenTelemetry SDK is not installed" in out.stderr
    assert "pip install 'plexor[otel]'" in out.stderr


class _OtlpSink(http.server.BaseHTTPRequestHandler):
    """Receives OTLP/HTTP exports; the payloads are decoded with OpenTelemetry's own protobuf classes."""

    received: list[tuple[str, bytes, dict[str, str]]] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, body, {"content-type": self.headers.get("Content-Type", "")}))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def test_otlp_export_from_a_real_server_continues_the_http_traceparent(plexor_home):
    """`plexor serve` with PLEXOR_OTEL and OTEL_EXPORTER_OTLP_ENDPOINT exports its spans over OTLP/HTTP.

    The receiving end is a plain HTTP listener that decodes what the OpenTelemetry exporter
    sent with the official OTLP protobuf classes (the Collector itself is tested below when
    one is installed).
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    _OtlpSink.received = []
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtlpSink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        env = _environ(plexor_home, PLEXOR_OTEL="1", OTEL_SERVICE_NAME="plexor-under-test",
                       OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{sink.server_address[1]}",
                       OTEL_BSP_SCHEDULE_DELAY="100")
        with _serve_http(env) as port:
            headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
            async with _http_client(f"http://127.0.0.1:{port}/mcp", headers, mode="legacy") as client:
                assert not (await client.call_tool("plexor_health", {})).is_error
            deadline = time.time() + 15
            while time.time() < deadline and not any(p == "/v1/traces" for p, _, _ in _OtlpSink.received):
                time.sleep(0.1)
    finally:
        sink.shutdown()
    spans = []
    for path, body, hdrs in _OtlpSink.received:
        if path != "/v1/traces":
            continue
        assert hdrs["content-type"] == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            spans.extend((service, s) for ss in rs.scope_spans for s in ss.spans)
    calls = [(service, s) for service, s in spans if s.name == "tools/call plexor_health"]
    assert len(calls) == 1, [s.name for _, s in spans]
    service, span = calls[0]
    assert service == "plexor-under-test"
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID
    attributes = {a.key: a.value.string_value for a in span.attributes}
    assert attributes["mcp.method.name"] == "tools/call" and attributes["plexor.plugin.name"] == "plexor"
    assert attributes["mcp.protocol.version"] == "2025-11-25"
    assert len(attributes["mcp.session.id"]) == 32  # the Mcp-Session-Id of a 2025-11-25 Streamable HTTP session


COLLECTORS = ("otelcol-contrib", "otelcol")


@pytest.mark.skipif(not any(shutil.which(c) for c in COLLECTORS), reason=(
    "no OpenTelemetry Collector binary (otelcol, otelcol-contrib) on PATH: none can be installed from the "
    "registries this project uses (PyPI has no collector distribution; Debian has only golang-opentelemetry-otel-dev, "
    "the Go SDK's sources; npm has none), and the collector's own releases are prebuilt binaries from a host the "
    "machines cannot reach. The OTLP export itself is checked by "
    "test_otlp_export_from_a_real_server_continues_the_http_traceparent."))
async def test_otlp_export_reaches_a_real_collector(plexor_home, tmp_path):
    from mcp import Client

    collector = next(shutil.which(c) for c in COLLECTORS if shutil.which(c))
    otlp_port = _free_port()
    out = tmp_path / "spans.json"
    config = tmp_path / "collector.yaml"
    config.write_text(
        f"receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{otlp_port}\n"
        f"exporters:\n  file:\n    path: {out}\n"
        "service:\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n")
    import socket

    proc = subprocess.Popen([collector, "--config", str(config)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30  # until the collector's receiver accepts connections
        while True:
            try:
                socket.create_connection(("127.0.0.1", otlp_port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, f"the collector exited {proc.returncode}: {proc.stderr.read()!r}"
                assert time.monotonic() < deadline, f"the collector never listened on {otlp_port}"
                time.sleep(0.05)
        env = _environ(plexor_home, PLEXOR_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{otlp_port}",
                       OTEL_BSP_SCHEDULE_DELAY="100")
        with _serve_http(env) as port:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await client.call_tool("plexor_health", {})
            deadline = time.time() + 20
            while time.time() < deadline and not (out.exists() and "tools/call plexor_health" in out.read_text()):
                time.sleep(0.2)
        assert "tools/call plexor_health" in out.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


async def test_plexor_otel_alone_keeps_metrics_for_prometheus_and_makes_no_spans(plexor):
    from prometheus_client import generate_latest

    async with plexor.client([("demo", _demo_plugin())], env={"PLEXOR_OTEL": "1"}) as client:
        telemetry = client.kernel.telemetry
        assert telemetry is not None and telemetry.tracer is None and telemetry.duration is None
        assert (await client.call_tool("demo_remote", {})).structured_content == {"fetched": True}  # span(): no-op
        text = generate_latest(telemetry.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    counts = [(s.labels["gen_ai_tool_name"], s.labels["plexor_plugin_name"], s.labels["mcp_protocol_version"], s.value)
              for s in families["mcp_server_operation_duration_seconds"].samples if s.name.endswith("_count")]
    assert counts == [("demo_remote", "demo", "2025-11-25", 1.0)]


def _gauge_plugin(read_count):
    """A plugin that declares gauges through its handle: one plain, one labelled, one that breaks."""
    calls = {"n": 0}
    store = {"apples": 3, "pears": 5}

    def read_items() -> dict:
        calls["n"] += 1
        return dict(store)

    def broken() -> float:
        raise RuntimeError("the backing store is gone")

    def startup(plugin):
        plugin.gauge("items", "Items per kind.", read_items, labels=["kind"], unit="{item}")
        plugin.gauge("backlog", "Items waiting.", lambda: read_count())
        plugin.gauge("broken", "Always fails to read.", broken)

    def add(kind: str) -> dict:
        """Add one item of a kind."""
        store[kind] = store.get(kind, 0) + 1
        return store

    plugin = make_plugin("gauges", plexor_startup=startup, plexor_register_tools=lambda register, settings: register(add))
    return plugin, calls


def _otel_points(reader, prefix):
    return {m.name: {tuple(sorted(p.attributes.items())): p.value for p in m.data.data_points}
            for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name.startswith(prefix)}


async def test_plugin_gauges_are_read_only_when_collected(plexor):
    from prometheus_client import generate_latest

    plugin, calls = _gauge_plugin(lambda: 7)
    async with plexor.client([("gauges", plugin)], env={"PLEXOR_OTEL": "1"}) as client:
        for _ in range(5):
            assert not (await client.call_tool("gauges_add", {"kind": "apples"})).is_error
        assert calls["n"] == 0  # declared at startup, never read per call
        text = generate_latest(client.kernel.telemetry.registry).decode()
        assert calls["n"] == 1
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {s.labels["kind"]: s.value for s in families["plexor_gauges_items"].samples} == {"apples": 8.0, "pears": 5.0}
    assert families["plexor_gauges_items"].type == "gauge"
    assert [s.value for s in families["plexor_gauges_backlog"].samples] == [7.0]
    assert "plexor_gauges_broken" not in families  # logged, left out: the rest of the scrape is intact


async def test_plugin_gauges_reach_the_otel_reader_declared_before_or_after(plexor, otel):
    plugin, _ = _gauge_plugin(lambda: 2)
    async with plexor.client([("gauges", plugin)]) as client:
        # Declared before this telemetry existed (the plugin started first) ...
        client.kernel.telemetry = Telemetry(client.kernel, meter_provider=otel.meter_provider)
        # ... and after it (a plugin that declares a gauge once its service is up).
        client.kernel.records["gauges"].handle.gauge("late", "Declared late.", lambda: {("a", "b"): 1},
                                                     labels=["x", "y.z"])
        points = _otel_points(otel.reader, "plexor.gauges.")
    assert points["plexor.gauges.items"] == {(("kind", "apples"),): 3, (("kind", "pears"),): 5}
    assert points["plexor.gauges.backlog"] == {(): 2}
    assert points["plexor.gauges.late"] == {(("x", "a"), ("y.z", "b")): 1}
    assert "plexor.gauges.broken" not in points or points["plexor.gauges.broken"] == {}


async def test_a_badly_declared_gauge_fails_its_plugin_with_guidance(plexor):
    def startup(plugin):
        plugin.gauge("Index Size", "bad name", lambda: 1)

    async with plexor.kernel([("badgauge", make_plugin("badgauge", plexor_startup=startup))]) as kernel:
        rec = kernel.records["badgauge"]
        assert rec.state.value == "failed"
        assert "gauge name 'Index Size' is not lower-case words" in rec.error
    handle = rec.handle
    handle.gauge("fine", "ok", lambda: 1)
    with pytest.raises(ValueError, match="declares the gauge 'fine' twice"):
        handle.gauge("fine", "again", lambda: 1)
    with pytest.raises(ValueError, match="label 'Kind' is not lower-case"):
        handle.gauge("other", "x", lambda: {}, labels=["Kind"])
    with pytest.raises(ValueError, match="read must be a function"):
        handle.gauge("third", "x", 3)  # type: ignore[arg-type]


async def test_plugin_span_durations_are_a_histogram_with_and_without_spans(plexor, otel):
    from prometheus_client import generate_latest

    def remote_failure() -> dict:
        """Fails inside its span."""
        with span("demo fetch", **{"server.address": "store.example", "server.port": 443}):  # in a worker thread
            raise ConnectionRefusedError("refused")

    demo = _demo_plugin()
    extra = make_plugin("extra", plexor_register_tools=lambda register, settings: register(remote_failure))
    # Metrics only (PLEXOR_OTEL=1 without an endpoint): no span is made, the duration is counted all the same.
    async with plexor.client([("demo", demo), ("extra", extra)], env={"PLEXOR_OTEL": "1"}) as client:
        for _ in range(2):
            await client.call_tool("demo_remote", {})
        assert (await client.call_tool("extra_remote_failure", {})).is_error
        text = generate_latest(client.kernel.telemetry.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    counts = {(s.labels["plexor_plugin_name"], s.labels["plexor_span_name"], s.labels["server_address"],
               s.labels["server_port"], s.labels["plexor_outcome"], s.labels["error_type"]): s.value
              for s in families["plexor_span_duration_seconds"].samples if s.name.endswith("_count")}
    assert counts == {("demo", "demo fetch", "store.example", "443", "ok", ""): 2.0,
                      ("extra", "demo fetch", "store.example", "443", "error", "ConnectionRefusedError"): 1.0}

    # With spans and OTLP metrics: the span is made and the same histogram is recorded.
    async with _observed(plexor, otel) as client:
        await client.call_tool("demo_remote", {})
        points = [(dict(p.attributes), p.count) for m in _otel_points_raw(otel.reader, "plexor.span.duration")
                  for p in m.data.data_points]
    assert points == [({"plexor.plugin.name": "demo", "plexor.span.name": "demo fetch", "plexor.outcome": "ok",
                        "server.address": "store.example", "server.port": "443"}, 1)]
    assert "demo fetch" in _by_name(otel)


def _otel_points_raw(reader, name):
    return [m for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == name]


async def test_open_sessions_by_protocol_version(plexor, otel):
    from prometheus_client import generate_latest

    async with plexor.client([("demo", _demo_plugin())], env={"PLEXOR_OTEL": "1"}) as client:
        await client.call_tool("demo_echo", {"text": "x"})
        telemetry = client.kernel.telemetry
        text = generate_latest(telemetry.registry).decode()
        # The same count through the OpenTelemetry reader (the kernel's telemetry, given a meter).
        swapped = Telemetry(client.kernel, meter_provider=otel.meter_provider)
        swapped.sessions = telemetry.sessions
        points = _otel_points(otel.reader, "plexor.sessions")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert [(s.labels["mcp_protocol_version"], s.value) for s in families["plexor_sessions"].samples] == \
        [("2025-11-25", 1.0)]
    assert points == {"plexor.sessions": {(("mcp.protocol.version", "2025-11-25"),): 1}}
