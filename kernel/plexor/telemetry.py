"""OpenTelemetry traces and metrics for every request, in the MCP semantic conventions; off by default.

The kernel's pipeline (:meth:`plexor.core.pipeline.Pipeline.run`) checks one attribute,
``kernel.telemetry``; it is ``None`` unless ``PLEXOR_OTEL`` is set, and then it is a
:class:`Telemetry` built by :func:`from_environ`. Nothing here imports OpenTelemetry at
module level: ``import plexor.telemetry`` is as cheap as the stdlib, and the SDK (the
``plexor[otel]`` extra) is imported only when telemetry is switched on.

What is emitted (``docs/observability.md`` has the details and queries):

- one span per request, named ``{mcp.method.name} {target}``, with the MCP attributes of
  the OpenTelemetry semantic conventions (as shipped in ``opentelemetry-semantic-conventions``
  0.66b2, schema 1.44.0), the plugin's name and the outcome; its
  parent is the client's trace context when the request carries one;
- ``mcp.server.operation.duration`` (histogram, seconds) by method, tool or prompt,
  plugin and outcome; ``plexor.requests.in_flight``, ``plexor.plugins``, ``plexor.sessions``
  and the gauges plugins declare with :meth:`plexor.PluginHandle.gauge` (all read only when
  metrics are collected, so they cost nothing per call);
- child spans wherever a plugin wraps remote or storage work in :func:`span`, each also timed
  into ``plexor.span.duration`` (by plugin, span name, server address and outcome).

Arguments, results and tokens are never recorded; ``PLEXOR_OTEL_RECORD_ARGUMENTS=1`` opts
in to a tool's arguments (``gen_ai.tool.call.arguments``, cut at 4 KiB).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
    from opentelemetry.trace import TracerProvider

    from plexor.core.base import KernelBase
    from plexor.core.pipeline import Request

__all__ = ["SWITCH", "PluginGauge", "Telemetry", "from_environ", "http_routes", "span"]

SWITCH = "PLEXOR_OTEL"
RECORD_ARGUMENTS = "PLEXOR_OTEL_RECORD_ARGUMENTS"
ARGUMENTS_LIMIT = 4096
# The MCP method each kind of pipeline request answers.
METHODS = {"tool": "tools/call", "uri": "resources/read", "prompt": "prompts/get",
           "completion": "completion/complete", "listing": "resources/list"}
# The semantic conventions' advice for mcp.server.operation.duration, with two finer buckets
# below 10 ms: most Plexor tools answer in well under a millisecond.
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_OFF = ("", "0", "false", "no", "off")

# The request running in this context (set by Telemetry.observe): its telemetry and plugin, for span().
_active: contextvars.ContextVar[_Target | None] = contextvars.ContextVar("plexor_telemetry", default=None)


def span(name: str, *, kind: str = "client", **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A child span of the current request, for a plugin's remote or storage call::

        with plexor.span("edgelake query", **{"server.address": host}):
            reply = send(...)

    ``kind`` is ``"client"`` (a call to another service, the default) or ``"internal"``.
    When telemetry is off, or outside a request, this is a shared no-op context manager:
    the cost is one context-variable read. Attribute values must be str, bool, int or
    float; leave arguments and results out of them. With telemetry on, its duration is
    also counted in ``plexor.span.duration`` by plugin, span name, ``server.address``,
    ``server.port`` and outcome (so name a span after the operation, never the object).
    """
    target = _active.get()
    if target is None:  # off, or outside a request
        return _NOOP
    return target.telemetry.child(name, kind, attributes, target)


_NOOP = contextlib.nullcontext()


class Telemetry:
    """Spans and metrics of one kernel's requests; ``kernel.telemetry`` holds it when switched on.

    Metrics take two roads, each only when asked for: a ``prometheus_client`` registry (what
    ``/metrics`` renders; about a microsecond per request) and an OpenTelemetry ``MeterProvider``
    (OTLP, or an SDK reader in tests; the SDK's own per-measurement cost, about ten).

    :param kernel: the kernel whose requests, in-flight count and plugins are observed.
    :param tracer_provider: where spans go (an SDK ``TracerProvider``); ``None``: no spans.
    :param meter_provider: where OpenTelemetry metrics go (an SDK ``MeterProvider``), if anywhere.
    :param registry: the ``prometheus_client`` registry ``/metrics`` renders, if any.
    :param record_arguments: also record each tool call's arguments (an operator's opt-in).
    """

    def __init__(self, kernel: KernelBase, *, tracer_provider: TracerProvider | None = None,
                 meter_provider: MeterProvider | None = None, registry: Any = None,
                 record_arguments: bool = False) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        from plexor import __version__

        self.kernel = kernel
        self.registry = registry
        self.record_arguments = record_arguments
        self.tracer = None if tracer_provider is None else tracer_provider.get_tracer("plexor", __version__)
        self._get_current_span = trace.get_current_span
        self._in_context = trace.set_span_in_context
        self._attach, self._detach = context.attach, context.detach
        self._kinds = {"client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL, "server": SpanKind.SERVER}
        self._server, self._internal = SpanKind.SERVER, SpanKind.INTERNAL
        self._targets: dict[tuple[str, str, str, str | None], _Target] = {}
        self._error = Status(StatusCode.ERROR)
        self.duration: Any = None
        self.span_duration: Any = None
        self.sessions: Any = None  # the server's connections (plexor.server._Sessions), set when it is built
        self._meter: Any = None
        if meter_provider is not None:
            self._meter = meter = meter_provider.get_meter("plexor", __version__)
            self.duration = meter.create_histogram(
                "mcp.server.operation.duration", unit="s", description=DURATION_HELP,
                explicit_bucket_boundaries_advisory=list(BUCKETS))
            meter.create_observable_gauge("plexor.requests.in_flight", [self._observe_in_flight], unit="{request}",
                                          description=IN_FLIGHT_HELP)
            meter.create_observable_gauge("plexor.plugins", [self._observe_plugins], unit="{plugin}",
                                          description=PLUGINS_HELP)
            meter.create_observable_gauge("plexor.sessions", [self._observe_sessions], unit="{session}",
                                          description=SESSIONS_HELP)
            self.span_duration = meter.create_histogram(
                "plexor.span.duration", unit="s", description=SPAN_HELP, explicit_bucket_boundaries_advisory=list(BUCKETS))
        self._histogram: Any = None
        self._span_histogram: Any = None
        self._span_children: dict[tuple[str, ...], Any] = {}
        if registry is not None:
            from prometheus_client import Histogram

            self._histogram = Histogram("mcp_server_operation_duration", DURATION_HELP, LABELS, unit="seconds",
                                        buckets=BUCKETS, registry=registry)
            self._span_histogram = Histogram("plexor_span_duration", SPAN_HELP, SPAN_LABELS, unit="seconds",
                                             buckets=BUCKETS, registry=registry)
            registry.register(_Gauges(self))
        # Gauges plugins declared before this telemetry existed (a kernel switched on late, as in tests),
        # and a line to this telemetry for those they declare later (PluginHandle.gauge).
        for rec in list(kernel.records.values()):
            if rec.handle is not None:
                rec.handle._telemetry = self
                for gauge in rec.handle._gauges.values():
                    self.declare(gauge)

    # -- the pipeline's hook --------------------------------------------------------
    async def observe(self, run: Callable[..., Awaitable[Any]], req: Request, plugin: str, *args: Any) -> Any:
        """Run one pipeline request (``run(req, plugin, *args)``) inside its span, and time it."""
        connection = getattr(req.session, "_connection", None)  # the SDK has no public accessor in 2.3
        version = getattr(connection, "protocol_version", None) if connection is not None else None
        target = self._target(req.kind, req.name, plugin, version)
        if self.tracer is None:  # metrics only: no span to build
            token = _active.set(target)  # for the durations of the plugin's plexor.span calls
            started = time.perf_counter()
            error: str | None = None
            outcome = "ok"
            try:
                return await run(req, plugin, *args)
            except BaseException as exc:
                outcome, error = _outcome(exc)
                raise
            finally:
                _active.reset(token)
                self._record(target, time.perf_counter() - started, outcome, error)
        attributes = dict(target.metric)
        if req.kind == "uri":
            attributes["mcp.resource.uri"] = req.name  # on the span only: as a metric label it would not be bounded
        if req.request_id is not None:
            attributes["jsonrpc.request.id"] = str(req.request_id)
        if connection is not None:
            session_id = getattr(connection, "session_id", None)
            if session_id:
                attributes["mcp.session.id"] = session_id
        if self.record_arguments and req.kind == "tool" and args:
            attributes["gen_ai.tool.call.arguments"] = _arguments(args[-1])
        attributes["plexor.outcome"] = "ok"  # overwritten when it fails
        # SERVER when this span is where the request enters (the client's context, if any, is
        # remote); INTERNAL beneath a span someone else's instrumentation already records.
        kind = self._internal if self._get_current_span().is_recording() else self._server
        token = _active.set(target)
        started = time.perf_counter()
        error = None
        outcome = "ok"
        # start_span and attach/detach by hand: start_as_current_span's two generator-based context
        # managers (and use_span's exception bookkeeping, switched off here anyway) cost more than the rest.
        current = self.tracer.start_span(target.name, kind=kind, attributes=attributes)
        attached = self._attach(self._in_context(current))
        try:
            return await run(req, plugin, *args)
        except BaseException as exc:
            outcome, error = _outcome(exc)
            if error is not None:
                current.set_attribute("error.type", error)
                current.set_status(self._error)
            current.set_attribute("plexor.outcome", outcome)
            raise
        finally:
            self._detach(attached)
            current.end()
            _active.reset(token)
            self._record(target, time.perf_counter() - started, outcome, error)

    def _record(self, target: _Target, seconds: float, outcome: str, error: str | None) -> None:
        if self._histogram is not None:
            if outcome == "ok":
                if target.ok is None:
                    target.ok = self._histogram.labels(*target.labels, "", "ok")
                target.ok.observe(seconds)
            else:
                self._histogram.labels(*target.labels, error or "", outcome).observe(seconds)
        if self.duration is not None:
            failed = {"error.type": error} if error else {}
            self.duration.record(seconds, {**target.metric, "plexor.outcome": outcome, **failed})

    def _target(self, kind: str, name: str, plugin: str | None, version: str | None) -> _Target:
        """What a tool, prompt or method's requests share: made once and kept (bounded)."""
        key = (kind, "" if kind == "uri" else name, plugin or "", version)
        found = self._targets.get(key)
        if found is None:
            found = _Target(self, kind, name, plugin, version)
            if len(self._targets) < 10_000:
                self._targets[key] = found
        return found

    def refused(self, req: Request, plugin: str | None, exc: BaseException) -> None:
        """Count a tool call refused before it reached a plugin (unknown tool, bad arguments, not ready)."""
        outcome, error = _outcome(exc)
        # An unknown tool's name is whatever the client sent: on the span, never as a metric label.
        target = self._target(req.kind, req.name if plugin else "(unknown)", plugin, None)
        if self.tracer is not None:
            attributes = {**target.metric, "gen_ai.tool.name": req.name, "plexor.outcome": outcome}
            if error is not None:
                attributes["error.type"] = error
            if req.request_id is not None:
                attributes["jsonrpc.request.id"] = str(req.request_id)
            with self.tracer.start_as_current_span(f"{METHODS.get(req.kind, req.kind)} {req.name}", kind=self._server,
                                                   attributes=attributes, record_exception=False,
                                                   set_status_on_exception=False) as current:
                current.set_status(self._error)
        self._record(target, 0.0, outcome, error)

    def child(self, name: str, kind: str, attributes: dict[str, Any], target: _Target) -> _Child:
        """A span beneath the current one, timed into ``plexor.span.duration`` (see :func:`span`)."""
        if kind not in self._kinds:
            raise ValueError(f"span kind {kind!r} is not one of 'client', 'internal', 'server'")
        return _Child(self, name, kind, attributes, target.plugin)

    def _record_span(self, plugin: str, name: str, attributes: dict[str, Any], seconds: float, outcome: str,
                     error: str | None) -> None:
        address = str(attributes.get("server.address", ""))
        port = str(attributes.get("server.port", ""))
        if self._span_histogram is not None:
            key = (plugin, name, address, port, error or "", outcome)
            child = self._span_children.get(key)
            if child is None:
                if len(self._span_children) >= 1000:  # a plugin naming spans after objects: bounded all the same
                    key = (plugin, "(other)", "", "", error or "", outcome)
                child = self._span_children[key] = self._span_histogram.labels(*key)
            child.observe(seconds)
        if self.span_duration is not None:
            labels = {"plexor.plugin.name": plugin, "plexor.span.name": name, "plexor.outcome": outcome}
            if address:
                labels["server.address"] = address
            if port:
                labels["server.port"] = port
            if error:
                labels["error.type"] = error
            self.span_duration.record(seconds, labels)

    # -- plugins' own gauges ---------------------------------------------------------
    def declare(self, gauge: PluginGauge) -> None:
        """Make a plugin's gauge an OpenTelemetry instrument (``/metrics`` reads it from the handle)."""
        if self._meter is None:
            return

        def observe(options: CallbackOptions) -> Iterator[Observation]:
            from opentelemetry.metrics import Observation

            for labels, value in gauge.values(self.kernel.log) or ():
                yield Observation(value, labels)

        self._meter.create_observable_gauge(gauge.otel_name, [observe], unit=gauge.unit, description=gauge.description)

    # -- gauges, read at collection time ----------------------------------------------
    def _observe_in_flight(self, options: CallbackOptions) -> Iterator[Observation]:
        from opentelemetry.metrics import Observation

        yield Observation(self.kernel._inflight)

    def _observe_plugins(self, options: CallbackOptions) -> Iterator[Observation]:
        from opentelemetry.metrics import Observation

        for rec in list(self.kernel.records.values()):
            yield Observation(1, {"plexor.plugin.name": rec.name, "plexor.plugin.state": rec.state.value})

    def _observe_sessions(self, options: CallbackOptions) -> Iterator[Observation]:
        from opentelemetry.metrics import Observation

        for version, count in self.session_counts().items():
            yield Observation(count, {"mcp.protocol.version": version} if version else {})

    def session_counts(self) -> dict[str, int]:
        """Sessions the server holds now, by protocol version (read at collection, never per call).

        The 2026-07-28 era has no sessions: its connections last one request (and linger until
        collected), so they are not counted.
        """
        counts: dict[str, int] = {}
        if self.sessions is not None:
            for connection in self.sessions.all():
                version = getattr(connection, "protocol_version", None) or ""
                if version < "2026-07-28":
                    counts[version] = counts.get(version, 0) + 1
        return counts

    # -- /metrics --------------------------------------------------------------------
    def prometheus_text(self) -> tuple[bytes, str]:
        """The metrics in the Prometheus text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


DURATION_HELP = "How long the server took to answer an MCP request, from the pipeline's entry to its result."
IN_FLIGHT_HELP = "Requests being served now (what a drain waits for)."
PLUGINS_HELP = "1 for each plugin, labelled with its current state."
SESSIONS_HELP = "Client sessions open now (stdio, Streamable HTTP before 2026-07-28), by protocol version."
SPAN_HELP = "How long the remote and storage calls plugins make (plexor.span) took."
# The Prometheus labels of the duration histogram: the OpenTelemetry attribute names, dots as underscores.
LABELS = ("mcp_method_name", "plexor_plugin_name", "gen_ai_tool_name", "gen_ai_prompt_name", "mcp_protocol_version",
          "error_type", "plexor_outcome")
SPAN_LABELS = ("plexor_plugin_name", "plexor_span_name", "server_address", "server_port", "error_type", "plexor_outcome")


class _Target:
    """A tool, prompt or method as its requests are labelled: span name, attributes, Prometheus labels."""

    __slots__ = ("telemetry", "plugin", "name", "metric", "labels", "ok")

    def __init__(self, telemetry: Telemetry, kind: str, name: str, plugin: str | None, version: str | None) -> None:
        self.telemetry = telemetry
        self.plugin = plugin or ""
        method = METHODS.get(kind, kind)
        self.metric: dict[str, Any] = {"mcp.method.name": method}
        if plugin:
            self.metric["plexor.plugin.name"] = plugin
        self.name = method
        tool = prompt = ""
        if kind == "tool":
            tool = self.metric["gen_ai.tool.name"] = name
            self.metric["gen_ai.operation.name"] = "execute_tool"
            self.name = f"{method} {name}"
        elif kind == "prompt":
            prompt = self.metric["gen_ai.prompt.name"] = name
            self.name = f"{method} {name}"
        if version:
            self.metric["mcp.protocol.version"] = version
        self.labels = (method, plugin or "", tool, prompt, version or "")
        self.ok: Any = None  # the Prometheus histogram's child for successful requests, made on first use


class _Child:
    """A plugin's :func:`span`: the OpenTelemetry span when spans are made, and its duration, always."""

    __slots__ = ("telemetry", "name", "kind", "attributes", "plugin", "started", "inner")

    def __init__(self, telemetry: Telemetry, name: str, kind: str, attributes: dict[str, Any], plugin: str) -> None:
        self.telemetry, self.name, self.kind, self.attributes, self.plugin = telemetry, name, kind, attributes, plugin
        self.inner: Any = None
        self.started = 0.0

    def __enter__(self) -> Any:
        telemetry = self.telemetry
        current = None
        if telemetry.tracer is not None:
            self.inner = telemetry.tracer.start_as_current_span(self.name, kind=telemetry._kinds[self.kind],
                                                                attributes=self.attributes)
            current = self.inner.__enter__()
        self.started = time.perf_counter()
        return current

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool | None:
        seconds = time.perf_counter() - self.started
        outcome, error = ("ok", None) if exc is None else _outcome(exc)
        self.telemetry._record_span(self.plugin, self.name, self.attributes, seconds, outcome, error)
        if self.inner is not None:
            return self.inner.__exit__(kind, exc, tb)  # type: ignore[no-any-return]
        return None


class PluginGauge:
    """A gauge a plugin declared with :meth:`plexor.PluginHandle.gauge`: what to call it and how to read it.

    ``read()`` returns a number, or (with ``labels``) a mapping from label values (a tuple, or a str
    for one label) to numbers. It runs only when metrics are collected, never per request.
    """

    __slots__ = ("otel_name", "prometheus_name", "description", "read", "labels", "unit")

    def __init__(self, namespace: str, name: str, description: str, read: Callable[[], Any],
                 labels: tuple[str, ...], unit: str) -> None:
        import re

        if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", name):
            raise ValueError(f"gauge name {name!r} is not lower-case words joined by '.' or '_' "
                             "(e.g. 'index.documents'); the plugin's namespace is prefixed for you")
        for label in labels:
            if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", label) or label.startswith("__"):
                raise ValueError(f"gauge {name!r}: label {label!r} is not lower-case words joined by '.' or '_'")
        if not callable(read):
            raise ValueError(f"gauge {name!r}: read must be a function that returns the value, got {read!r}")
        self.otel_name = f"plexor.{namespace}.{name}"
        self.prometheus_name = self.otel_name.replace(".", "_")
        self.description, self.read, self.labels, self.unit = description, read, labels, unit

    def values(self, log: Any) -> list[tuple[dict[str, str], float]] | None:
        """``(labels, value)`` pairs from ``read()``; ``None`` (and a log line) when reading fails."""
        try:
            found = self.read()
            if not self.labels:
                return [({}, float(found))]
            out = []
            for key, value in dict(found).items():
                values = (key,) if isinstance(key, str) else tuple(key)
                if len(values) != len(self.labels):
                    raise ValueError(f"{values!r} does not give one value for each label of {self.labels!r}")
                out.append(({label: str(v) for label, v in zip(self.labels, values, strict=True)}, float(value)))
            return out
        except Exception as exc:  # noqa: BLE001 - a plugin's broken gauge must not break the scrape
            log.warning("gauge_unreadable", gauge=self.otel_name, error=f"{type(exc).__name__}: {exc}")
            return None


class _Gauges:
    """A ``prometheus_client`` collector of the gauges, read when ``/metrics`` is scraped."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.kernel = telemetry.kernel

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        yield GaugeMetricFamily("plexor_requests_in_flight", IN_FLIGHT_HELP, value=self.kernel._inflight)
        plugins = GaugeMetricFamily("plexor_plugins", PLUGINS_HELP, labels=["plexor_plugin_name", "plexor_plugin_state"])
        records = list(self.kernel.records.values())
        for rec in records:
            plugins.add_metric([rec.name, rec.state.value], 1)
        yield plugins
        if self.telemetry.sessions is not None:
            sessions = GaugeMetricFamily("plexor_sessions", SESSIONS_HELP, labels=["mcp_protocol_version"])
            for version, count in self.telemetry.session_counts().items():
                sessions.add_metric([version], count)
            yield sessions
        for rec in records:
            for gauge in list(rec.handle._gauges.values()) if rec.handle is not None else ():
                values = gauge.values(self.kernel.log)
                if values is None:  # logged; the rest of the scrape stands
                    continue
                family = GaugeMetricFamily(gauge.prometheus_name, gauge.description,
                                           labels=[label.replace(".", "_") for label in gauge.labels])
                for labels, value in values:
                    family.add_metric(list(labels.values()), value)
                yield family

    def describe(self) -> list[Any]:
        return []  # names are known only at collection: auto-describe would call collect() at registration


def _outcome(exc: BaseException) -> tuple[str, str | None]:
    """``(plexor.outcome, error.type)`` of a request that raised ``exc``."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    kind = type(exc).__name__
    if kind == "PlexorError" and exc.__cause__ is not None:  # the pipeline explained a plugin's own exception
        kind = type(exc.__cause__).__name__
    if kind == "InputRequired":  # the tool asked the client something: not a failure
        return "input_required", None
    # Not anyio.get_cancelled_exc_class(): a plugin's span may close in a worker thread, with no event loop.
    if isinstance(exc, asyncio.CancelledError) or kind == "Cancelled":  # asyncio, trio
        return "cancelled", "cancelled"
    return "error", kind


def _arguments(values: Any) -> str:
    try:
        text = json.dumps(values, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(values)
    return text[:ARGUMENTS_LIMIT]


def from_environ(kernel: KernelBase) -> Telemetry:
    """The telemetry ``PLEXOR_OTEL`` asks for, exporting as the standard ``OTEL_*`` variables say.

    Spans and metrics go over OTLP (HTTP/protobuf) when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the
    ``_TRACES_``/``_METRICS_`` variants) is set; metrics are also kept for ``/metrics``.
    """
    from plexor.errors import ConfigError

    environ = kernel.environ
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from prometheus_client import CollectorRegistry
    except ImportError as exc:
        raise ConfigError(f"{SWITCH}={environ.get(SWITCH)!r} but the OpenTelemetry SDK is not installed ({exc.name})",
                          f"Install it with: pip install 'plexor[otel]'; or unset {SWITCH}.") from None
    from plexor import __version__

    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or "plexor",
                                "service.version": __version__})
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/")
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (base and f"{base}/v1/traces")
    metrics = environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or (base and f"{base}/v1/metrics")
    # Spans and OpenTelemetry metrics are made only when they have somewhere to go.
    if traces and environ.get("OTEL_TRACES_EXPORTER", "otlp") != "none":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    if metrics and environ.get("OTEL_METRICS_EXPORTER", "otlp") != "none":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        meter_provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=metrics))],
                                       resource=resource)
    return Telemetry(kernel, tracer_provider=tracer_provider, meter_provider=meter_provider,
                     registry=CollectorRegistry(auto_describe=True),
                     record_arguments=environ.get(RECORD_ARGUMENTS, "").strip().lower() not in _OFF)


def http_routes(kernel: KernelBase, server: Any) -> list[Any]:
    """What the HTTP transport adds when telemetry is on: ``/metrics``, and the HTTP ``traceparent``.

    The SDK server's own first middleware continues a trace from ``params._meta``; this puts one
    in front of it that continues the ``traceparent`` header of the HTTP request instead, when
    ``_meta`` has none. Returns the routes to mount (none when telemetry is off).
    """
    telemetry: Telemetry | None = getattr(kernel, "telemetry", None)
    if telemetry is None:
        return []
    from starlette.requests import Request as HttpRequest
    from starlette.responses import Response
    from starlette.routing import Route

    server.middleware.insert(0, _http_trace_context)

    async def metrics(request: HttpRequest) -> Response:
        body, content_type = telemetry.prometheus_text()
        return Response(body, media_type=content_type)

    return [Route("/metrics", metrics, methods=["GET"])]


async def _http_trace_context(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """SDK middleware: make the HTTP request's ``traceparent`` the current context, unless ``_meta`` has one."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None or "traceparent" not in headers or (ctx.meta and "traceparent" in ctx.meta):
        return await call_next(ctx)
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract({k: headers[k] for k in ("traceparent", "tracestate") if k in headers}))
    try:
        return await call_next(ctx)
    finally:
        context.detach(token)
