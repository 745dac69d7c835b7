"""What telemetry counts and labels: the constants, the per-target labels, plugins' gauges and spans."""

from __future__ import annotations

import asyncio
import contextlib
import json

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


def _arguments(values: object) -> str:
    try:
        text = json.dumps(values, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(values)
    return text[:ARGUMENTS_LIMIT]


