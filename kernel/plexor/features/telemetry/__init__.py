"""OpenTelemetry traces and metrics for every request, in the MCP semantic conventions; off by default.

The kernel's pipeline (:meth:`plexor.core.pipeline.Pipeline.run`) checks one attribute,
``kernel.telemetry``; it is ``None`` unless ``PLEXOR_OTEL`` is set, and then it is a
:class:`Telemetry` that the server sets when it is built (:func:`for_kernel`); the kernel
never imports this package. Nothing here imports OpenTelemetry at
module level: ``import plexor.features.telemetry`` is as cheap as the stdlib, and the SDK (the
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

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider
    from starlette.routing import Route

    from plexor.core.base import KernelBase

from plexor.features.telemetry.metrics import _NOOP, _OFF, RECORD_ARGUMENTS, SWITCH
from plexor.features.telemetry.observer import Telemetry, _active

__all__ = ["SWITCH", "Telemetry", "for_kernel", "from_environ", "http_trace_context", "metrics_route", "span"]


def span(name: str, *, kind: str = "client", **attributes: str | bool | int | float
         ) -> contextlib.AbstractContextManager[Span | None]:
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


def for_kernel(kernel: KernelBase) -> Telemetry | None:
    """The telemetry a server of ``kernel`` keeps (``kernel.telemetry``): ``None`` unless ``PLEXOR_OTEL`` is
    on and ``PLEXOR_DISABLE`` does not name ``telemetry``. The server sets it when it is built."""
    environ = kernel.environ
    if environ.get(SWITCH, "").strip().lower() in _OFF or "telemetry" in [
            name.strip() for name in environ.get("PLEXOR_DISABLE", "").split(",")]:
        return None
    return from_environ(kernel)


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
    from plexor.version import __version__

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


def metrics_route(telemetry: Telemetry) -> Route:
    """``GET /metrics``: the metrics kept for Prometheus (the ``telemetry`` built-in plugin mounts it)."""
    from starlette.requests import Request as HttpRequest
    from starlette.responses import Response
    from starlette.routing import Route

    async def metrics(request: HttpRequest) -> Response:
        body, content_type = telemetry.prometheus_text()
        return Response(body, media_type=content_type)

    return Route("/metrics", metrics, methods=["GET"])


async def http_trace_context(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
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

