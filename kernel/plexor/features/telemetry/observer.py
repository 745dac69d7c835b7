"""The telemetry of one kernel: a span and a duration per request, and the metrics it exports."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, TypeVar

from plexor.context import connection_of
from plexor.core.eras import is_stateless
from plexor.features.telemetry.metrics import (
    BUCKETS,
    DURATION_HELP,
    IN_FLIGHT_HELP,
    LABELS,
    LIMIT_HELP,
    METHODS,
    PLUGINS_HELP,
    SESSIONS_HELP,
    SPAN_HELP,
    SPAN_LABELS,
    _arguments,
    _outcome,
)

if TYPE_CHECKING:  # pragma: no cover
    from opentelemetry.metrics import CallbackOptions, Histogram, Meter, MeterProvider, Observation
    from opentelemetry.trace import Span, TracerProvider
    from opentelemetry.util.types import AttributeValue
    from prometheus_client import CollectorRegistry
    from prometheus_client import Histogram as PromHistogram
    from prometheus_client.metrics_core import Metric

    from plexor.core.base import KernelBase, Request
    from plexor.handle import PluginGauge

__all__ = ["Sessions", "Telemetry"]

T = TypeVar("T")


class Sessions(Protocol):
    """The server's connections (``plexor.serving.changes.Sessions``), counted at collection time."""

    def all(self) -> Iterable[object]: ...

# The request running in this context (set by Telemetry.observe): its telemetry and plugin, for span().
_active: contextvars.ContextVar[_Target | None] = contextvars.ContextVar("plexor_telemetry", default=None)


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
                 meter_provider: MeterProvider | None = None, registry: CollectorRegistry | None = None,
                 record_arguments: bool = False) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        from plexor.version import __version__

        self.kernel = kernel
        self.registry = registry
        self.record_arguments = record_arguments
        self.tracer = None if tracer_provider is None else tracer_provider.get_tracer("plexor", __version__)
        self._get_current_span = trace.get_current_span
        self._in_context = trace.set_span_in_context
        self._attach, self._detach = context.attach, context.detach
        self.kinds = {"client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL, "server": SpanKind.SERVER}
        self._server, self._internal = SpanKind.SERVER, SpanKind.INTERNAL
        self._targets: dict[tuple[str, str, str, str | None], _Target] = {}
        self._error = Status(StatusCode.ERROR)
        self.duration: Histogram | None = None
        self.span_duration: Histogram | None = None
        self.sessions: Sessions | None = None  # set when the server is built
        self._meter: Meter | None = None
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
        self._histogram: PromHistogram | None = None
        self._span_histogram: PromHistogram | None = None
        self._span_children: dict[tuple[str, ...], PromHistogram] = {}
        if registry is not None:
            from prometheus_client import Histogram

            self._histogram = Histogram("mcp_server_operation_duration", DURATION_HELP, LABELS, unit="seconds",
                                        buckets=BUCKETS, registry=registry)
            self._span_histogram = Histogram("plexor_span_duration", SPAN_HELP, SPAN_LABELS, unit="seconds",
                                             buckets=BUCKETS, registry=registry)
            registry.register(_Gauges(self))
        # Gauges plugins declared before this telemetry existed (a kernel switched on late, as in tests),
        # and those they declare later (PluginHandle.gauge).
        kernel.gauges.follow(self.declare)

    # -- the pipeline's hook --------------------------------------------------------
    async def observe(self, run: Callable[..., Awaitable[T]], req: Request, plugin: str, *args: object) -> T:
        """Run one pipeline request (``run(req, plugin, *args)``) inside its span, and time it."""
        connection = connection_of(req.session)
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
        attributes: dict[str, AttributeValue] = dict(target.metric)
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

    def child(self, name: str, kind: str, attributes: Mapping[str, AttributeValue], target: _Target) -> _Child:
        """A span beneath the current one, timed into ``plexor.span.duration`` (see :func:`span`)."""
        if kind not in self.kinds:
            raise ValueError(f"span kind {kind!r} is not one of 'client', 'internal', 'server'")
        return _Child(self, name, kind, attributes, target.plugin)

    def record_span(self, plugin: str, name: str, attributes: Mapping[str, AttributeValue], seconds: float, outcome: str,
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

        yield Observation(self.kernel.inflight)

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
                if not is_stateless(version):
                    counts[version] = counts.get(version, 0) + 1
        return counts

    # -- /metrics --------------------------------------------------------------------
    def prometheus_text(self) -> tuple[bytes, str]:
        """The metrics in the Prometheus text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if self.registry is None:
            raise RuntimeError("this telemetry keeps no Prometheus registry: nothing to render for /metrics")
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _Target:
    """A tool, prompt or method as its requests are labelled: span name, attributes, Prometheus labels."""

    __slots__ = ("telemetry", "plugin", "name", "metric", "labels", "ok")

    def __init__(self, telemetry: Telemetry, kind: str, name: str, plugin: str | None, version: str | None) -> None:
        self.telemetry = telemetry
        self.plugin = plugin or ""
        method = METHODS.get(kind, kind)
        self.metric: dict[str, str] = {"mcp.method.name": method}
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
        self.ok: PromHistogram | None = None  # the Prometheus histogram's child for successful requests, made on first use


class _Child:
    """A plugin's :func:`span`: the OpenTelemetry span when spans are made, and its duration, always."""

    __slots__ = ("telemetry", "name", "kind", "attributes", "plugin", "started", "inner")

    def __init__(self, telemetry: Telemetry, name: str, kind: str, attributes: Mapping[str, AttributeValue],
                 plugin: str) -> None:
        self.telemetry, self.name, self.kind, self.attributes, self.plugin = telemetry, name, kind, attributes, plugin
        self.inner: AbstractContextManager[Span] | None = None
        self.started = 0.0

    def __enter__(self) -> Span | None:
        telemetry = self.telemetry
        current = None
        if telemetry.tracer is not None:
            self.inner = telemetry.tracer.start_as_current_span(self.name, kind=telemetry.kinds[self.kind],
                                                                attributes=self.attributes)
            current = self.inner.__enter__()
        self.started = time.perf_counter()
        return current

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        seconds = time.perf_counter() - self.started
        outcome, error = ("ok", None) if exc is None else _outcome(exc)
        self.telemetry.record_span(self.plugin, self.name, self.attributes, seconds, outcome, error)
        if self.inner is not None:
            return self.inner.__exit__(kind, exc, tb)
        return None


class _Gauges:
    """A ``prometheus_client`` collector of the gauges, read when ``/metrics`` is scraped."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.kernel = telemetry.kernel

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        yield GaugeMetricFamily("plexor_requests_in_flight", IN_FLIGHT_HELP, value=self.kernel.inflight)
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
        from prometheus_client.core import CounterMetricFamily

        from plexor.limits import REFUSALS

        refusals = CounterMetricFamily("plexor_limit_refusals", LIMIT_HELP, labels=["plexor_limit"])
        for limit, count in sorted(REFUSALS.items()):
            refusals.add_metric([limit], count)
        yield refusals
        for gauge in self.kernel.gauges.all():
            values = gauge.values(self.kernel.log)
            if values is None:  # logged; the rest of the scrape stands
                continue
            family = GaugeMetricFamily(gauge.prometheus_name, gauge.description,
                                       labels=[label.replace(".", "_") for label in gauge.labels])
            for labels, value in values:
                family.add_metric(list(labels.values()), value)
            yield family

    def describe(self) -> list[Metric]:
        return []  # names are known only at collection: auto-describe would call collect() at registration
