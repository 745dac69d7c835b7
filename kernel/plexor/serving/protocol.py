"""Connection limits for uvicorn: TCP_NODELAY, header and body read timeouts, a connection cap.

uvicorn's HTTP protocol (httptools, or h11 without it) extended so that:

- every accepted connection has ``TCP_NODELAY`` (asyncio sets it only on sockets created
  with ``IPPROTO_TCP``; without it Nagle's algorithm meets delayed ACK and each keep-alive
  request waits ~40 ms);
- a request's headers must arrive within ``header_timeout`` seconds of the connection opening
  (or of the previous response), and its body within ``body_timeout`` seconds of the headers:
  a slow-loris connection is closed, with ``408`` when nothing was answered on it yet;
- at most ``max_connections`` are open: at the cap, a new connection takes the place of the
  oldest one that is not in the middle of a request, and when every one is busy it is
  answered ``503`` with ``Retry-After`` and closed;
- a failing ``accept()`` (out of file descriptors) is logged once per burst with a count,
  not once per attempt with a traceback.

Settings travel on the uvicorn ``Config`` (``config.plexor_limits``), so ``--workers``
processes get them too.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - httptools not installed
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

if TYPE_CHECKING:  # pragma: no cover - typing only
    import asyncio

    from plexor.log import Logger

__all__ = ["Limits", "LimitedHttp", "default_max_connections", "install_accept_log"]

SWEEP_EVERY = 0.5  # seconds between checks of the read deadlines


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    max_connections: int = 0  # 0: derived from the file descriptor limit


def default_max_connections() -> int:
    """Three quarters of the soft file descriptor limit (the rest stays for storage, plugins, logs), at most 4096."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return 1000
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(8, min(4096, soft * 3 // 4))


_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s")


def _response(template: bytes, text: str) -> bytes:
    body = text.encode()
    return template % (len(body), body)


class _Sweeper:
    """One per event loop: closes connections whose header or body deadline has passed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.connections: set[LimitedHttp] = set()
        loop.call_later(SWEEP_EVERY, self.sweep)

    def sweep(self) -> None:
        now = self.loop.time()
        for conn in list(self.connections):
            conn.check(now)
        self.loop.call_later(SWEEP_EVERY, self.sweep)


_sweepers: dict[int, _Sweeper] = {}


class LimitedHttp(_Base):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol with the limits above (see the module docstring)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's own
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not TCP (a Unix socket)
                pass
        limits: Limits = getattr(self.config, "plexor_limits", None) or Limits()
        self._limits = limits
        sweeper = _sweepers.get(id(self.loop))
        if sweeper is None or sweeper.loop is not self.loop:
            sweeper = _sweepers[id(self.loop)] = _Sweeper(self.loop)
        self._sweeper = sweeper
        cap = limits.max_connections or default_max_connections()
        crowded = len(self.connections) >= cap
        super().connection_made(transport)
        self._mark_waiting()
        self._answered = False
        if crowded and not self._make_room():
            transport.write(_response(_503, "The server has reached its connection limit and every connection is "
                                            "busy; retry in a moment.\n"))
            transport.close()
            return
        sweeper.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._sweeper.connections.discard(self)
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self._answered = True
        super().on_response_complete()
        self._mark_waiting()

    def _mark_waiting(self) -> None:
        self._since = self.loop.time()
        self._busy = False

    def waiting(self) -> bool:
        """True between requests: no request has begun since the last response (or the connection opened)."""
        return self.cycle is None or self.cycle.response_complete

    def _make_room(self) -> bool:
        idle = [c for c in self._sweeper.connections if c.waiting() and not c.transport.is_closing()]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._since)
        oldest.expire("the server needed the connection slot")
        return True

    def expire(self, why: str) -> None:
        if self.transport.is_closing():
            return
        if not self._answered:  # an idle keep-alive connection is closed silently (a 408 could pass for the next answer)
            self.transport.write(_response(_408, f"Request timeout: {why}; send the request promptly.\n"))
        self.transport.close()

    def check(self, now: float) -> None:
        if self.transport.is_closing():
            return
        if self.waiting():
            if now - self._since > self._limits.header_timeout and self._has_partial():
                self.expire(f"the request headers did not arrive within {self._limits.header_timeout:g} s")
            return
        cycle = self.cycle
        if not self._busy:  # a request began: its body gets its own deadline from now
            self._busy = True
            self._since = now
        if cycle is not None and cycle.more_body and not cycle.response_started \
                and now - self._since > self._limits.body_timeout:
            self.expire(f"the request body did not arrive within {self._limits.body_timeout:g} s")

    def _has_partial(self) -> bool:
        """Whether bytes of a next request arrived (an idle keep-alive is uvicorn's to close), or none ever did."""
        if not self._answered:
            return True
        return self.timeout_keep_alive_task is None


class _AcceptLog:
    """An event loop exception handler that logs accept() failures once per burst."""

    def __init__(self, loop: asyncio.AbstractEventLoop, log: Logger, window: float = 10.0) -> None:
        self.loop = loop
        self.log = log
        # Resolved now: when accept() fails the process is out of file descriptors, and a logger
        # that imports structlog on first use could not open its source files then.
        self.error = log.error
        self.window = window
        self.first = 0.0
        self.count = 0
        self.previous = loop.get_exception_handler()

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if not str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if self.count and now - self.first < self.window:
            self.count += 1
            return
        if self.count > 1:
            self.error("accept_failed_repeatedly", count=self.count, seconds=round(now - self.first, 1))
        self.first, self.count = now, 1
        self.error("accept_failed", error=str(context.get("exception")),
                       hint="out of file descriptors: lower --max-connections or raise the limit (ulimit -n); "
                            "further failures in the next 10 s are only counted")


def install_accept_log(loop: asyncio.AbstractEventLoop, log: Logger) -> None:
    if not isinstance(loop.get_exception_handler(), _AcceptLog):
        loop.set_exception_handler(_AcceptLog(loop, log))
