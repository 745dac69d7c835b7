"""The ``direct`` built-in plugin: Streamable HTTP's stateless POSTs answered in the request's own task.

It wraps the MCP endpoint (:func:`plexor.extending.plexor_endpoint_wrapper`) with
:class:`plexor.features.direct.entry.McpEntry`: a 2026-07-28 POST (and, with ``--stateless``, a 2025-11-25
one) is served without the SDK's per-request task group, memory stream and response objects, about twice
the throughput (``bench/README.md``); everything else goes to the SDK's app unchanged. ``PLEXOR_DISABLE=direct``
leaves every request to the SDK's own entry, which is slower and pings a silent answer every 15 s: a way
to tell whether a problem is this feature's. Nothing else changes: limits, authorization, tasks and the request time limit are the
request path's, which both entries run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.types import ASGIApp

    from plexor.extending import ServerSetup


@hookimpl
def plexor_endpoint_wrapper(app: ASGIApp, setup: ServerSetup) -> ASGIApp | None:
    from plexor.features.direct.entry import McpEntry

    opts, clock = setup.options, setup.clock
    if opts is None or clock is None:  # Streamable HTTP always has both
        return None
    return McpEntry(app, setup.server, clock, max_body=opts.max_body_bytes, json_response=opts.json_response,
                    stateless=opts.stateless, ping_seconds=opts.ping_seconds)
