"""Running the server: stdio, Streamable HTTP and legacy SSE, all through the SDK.

The code lives in :mod:`plexor.serving`; this module keeps the names the CLI, the daemon,
the benchmarks and users import. ``docs/transports.md`` describes the transports and their limits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor.serving.guard import is_loopback
from plexor.serving.http import bind_socket, build_http_app, serve_http
from plexor.serving.http_options import HttpOptions
from plexor.serving.stdio import serve_stdio

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.types import ASGIApp

__all__ = ["HttpOptions", "bind_socket", "build_http_app", "is_loopback", "serve_http", "serve_stdio", "worker_app"]


def worker_app() -> ASGIApp:
    """App factory for ``--workers`` (kept here for configurations that name ``plexor.transports:worker_app``)."""
    from plexor.serving.http import worker_app as make

    return make()
