"""The ``telemetry`` built-in plugin: OpenTelemetry traces and metrics (``PLEXOR_OTEL``), ``/metrics`` and
the HTTP ``traceparent``, on the server-extension hooks (:mod:`plexor.extending`).

The per-request span itself is taken in the kernel's pipeline (one attribute check when off); this
plugin adds what the HTTP server needs. ``PLEXOR_DISABLE=telemetry`` keeps telemetry off even with
``PLEXOR_OTEL`` set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.routing import Route

    from plexor.extending import RequestLayer, ServerSetup


@hookimpl
def plexor_request_layers(setup: ServerSetup) -> list[RequestLayer] | None:
    """The HTTP request's ``traceparent`` made the current trace context, outermost (``trace``)."""
    if setup.kernel.telemetry is None or setup.transport == "stdio":
        return None
    from plexor.extending import RequestLayer
    from plexor.features.telemetry import http_trace_context

    return [RequestLayer("trace", http_trace_context, name="trace")]


@hookimpl
def plexor_routes(setup: ServerSetup) -> list[Route] | None:
    """``GET /metrics``: the Prometheus text of every metric, when telemetry is on."""
    if setup.kernel.telemetry is None:
        return None
    from plexor.features.telemetry import Telemetry, metrics_route

    telemetry = setup.kernel.telemetry
    return [metrics_route(telemetry)] if isinstance(telemetry, Telemetry) else None
