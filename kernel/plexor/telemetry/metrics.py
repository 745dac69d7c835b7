"""What telemetry counts and labels: the constants, the per-target labels, plugins' gauges and spans."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover

    from plexor.telemetry.observer import Telemetry

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
_NOOP = contextlib.nullcontext()

DURATION_HELP = "How long the server took to answer an MCP request, from the pipeline's entry to its result."
IN_FLIGHT_HELP = "Requests being served now (what a drain waits for)."
PLUGINS_HELP = "1 for each plugin, labelled with its current state."
SESSIONS_HELP = "Client sessions open now (stdio, Streamable HTTP before 2026-07-28), by protocol version."
LIMIT_HELP = "Requests, connections and stored data refused or dropped at a limit (docs/security.md#limits), per limit."
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



class _Gauges:
    """A ``prometheus_client`` collector of the gauges, read when ``/metrics`` is scraped."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self.kernel = telemetry.kernel

    def collect(self) -> Iterator[Any]:
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


