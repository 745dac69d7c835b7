"""The options of an HTTP server (``plexor serve --transport http|sse``), as one value.

``--workers`` hands them to each worker process as JSON (``plexor.serving.http.worker_app``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

__all__ = ["HttpOptions"]


@dataclass
class HttpOptions:
    """What ``plexor serve`` hands the HTTP app and uvicorn: each field one of its options (``docs/transports.md``)."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    stateless: bool = False
    transport: str = "http"  # "http" (Streamable HTTP) or "sse"
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = 4 * 1024 * 1024
    request_timeout: float = 300.0  # one MCP request (e.g. a tool call) may run this long
    grace: float = 30.0  # on SIGTERM, in-flight calls get this long to finish
    json_response: bool = False
    workers: int = 1
    ping_seconds: float = 15.0  # a 2026-07-28 answer silent this long turns SSE and is pinged as often (proxies)
    sse_retry_ms: int = 1000  # the reconnect delay suggested to clients on resumable SSE streams
    event_history: int = 2000  # events kept for Last-Event-ID resumption (all streams together)
    header_timeout: float = 10.0  # a request's headers must arrive within this many seconds
    body_timeout: float = 60.0  # and its body within this many seconds of the headers
    max_connections: int = 0  # open connections at most; 0: three quarters of the file descriptor limit
    auth_issuer: str | None = None  # OAuth: overrides [plexor.auth] issuer (plexor.features.auth)
    resource_url: str | None = None  # OAuth: overrides [plexor.auth] resource
    profile: str | None = None  # the tool profile of connections that name none

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> HttpOptions:
        return cls(**json.loads(raw))
