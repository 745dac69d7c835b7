"""The EdgeLake REST client: pooled keep-alive HTTP/1.1 connections on asyncio, replies parsed by httptools.

Why this shape: a call's cost is dominated by the fixed per-request work, so
the request is plain bytes (a prefix rendered once per node and method, then
the ``command`` and ``destination`` headers) and the reply is parsed by
httptools — the Python binding of llhttp, Node.js's HTTP parser, which
uvicorn uses — inside the connection's ``data_received``: one wake-up of the
waiting call per reply. Measured against the stand-in node on this machine
(see BENCH.md), parsing one reply takes about 2 µs this way against 40-90 µs
with h11's pure-Python state machine (the previous client), and a whole
request costs about as much as a blocking ``http.client`` request, with real
concurrency (no thread per call), ``asyncio.timeout`` deadlines and clean
cancellation.

It also has to survive the node's malformed replies: llhttp reads the status
line whose reason phrase is a JSON error, and when the chunked body never
comes (the connection closes) the response head is kept and the framing
error recorded, so :mod:`plexor_edgelake.replies` can still report the node's
error code and text.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from plexor import InvalidArgument, PlexorError

__all__ = ["EdgeLakeClient", "EdgeLakeError", "Node", "NodeUnreachable", "NodeTimeout", "Reply", "parse_nodes"]


class EdgeLakeError(PlexorError):
    """The node answered with an error, or with a reply that cannot be read."""

    code = "edgelake_error"


class NodeUnreachable(EdgeLakeError):
    """No connection could be made to the node."""

    code = "edgelake_unreachable"


class NodeTimeout(EdgeLakeError):
    """The node did not answer in time."""

    code = "edgelake_timeout"


@dataclass(frozen=True)
class Node:
    """A configured node: its name (as given in ``nodes``) and address."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def label(self) -> str:
        return self.address if self.name == self.address else f"{self.name} ({self.address})"


_NODE = re.compile(r"^(?:(?P<name>[A-Za-z_][\w.-]*)\s*=\s*)?(?:https?://)?(?P<host>[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})/?$")


def parse_nodes(values: Any, source: str = "[edgelake] nodes") -> list[Node]:
    """``["127.0.0.1:32049", "edge2=10.0.0.2:32049"]`` as :class:`Node` objects; the first is the default."""
    from plexor import ConfigError

    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{source} must list at least one node", 'Set nodes = ["127.0.0.1:32049"] (host:port, or name=host:port).')
    nodes: list[Node] = []
    for raw in values:
        m = _NODE.match(str(raw).strip())
        if not m or not 0 < int(m.group("port")) < 65536:
            raise ConfigError(
                f"{source}: {raw!r} is not host:port or name=host:port",
                'Write each node as "127.0.0.1:32049" or "edge2=10.0.0.2:32049" (the node\'s REST port).',
            )
        host, port = m.group("host").strip("[]"), int(m.group("port"))
        address = f"{host}:{port}"
        node = Node(m.group("name") or address, host, port)
        if any(n.name == node.name for n in nodes):
            raise ConfigError(f"{source}: the node {node.name!r} is listed twice", "Give each node once (or a distinct name=).")
        nodes.append(node)
    return nodes


@dataclass
class Reply:
    """One raw reply, as the node sent it."""

    node: Node
    method: str
    command: str
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    framing_error: str | None = None  # the body could not be read to its end (the node's malformed replies)
    elapsed: float = 0.0

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class _Conn(asyncio.Protocol):
    """One keep-alive connection to a node; it reads one reply at a time.

    The reply is parsed as it arrives (httptools calls the ``on_*`` methods
    from ``feed_data``) and the waiting call is woken once: when the reply is
    complete, unreadable, or the connection closed.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.uses = 0
        self._waiter: asyncio.Future[None] | None = None
        self._parser: Any = None
        self._begin(None)

    def _begin(self, waiter: asyncio.Future[None] | None) -> None:
        self._waiter = waiter
        self.reason = b""
        self.header_list: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.status = 0
        self.headers_done = False
        self.until_close = False  # no Content-Length, not chunked: the body ends when the node closes
        self.complete = False
        self.keep_alive = False
        self.received = False
        self.error: str | None = None

    async def exchange(self, request: bytes) -> None:
        """Send ``request`` and wait until its reply is complete, unreadable, or the connection closed."""
        import httptools

        waiter = asyncio.get_running_loop().create_future()
        self._begin(waiter)
        self._parser = httptools.HttpResponseParser(self)
        assert self.transport is not None
        self.transport.write(request)
        try:
            await waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        import httptools

        if self._waiter is None or self.complete:
            self.keep_alive = False  # bytes nobody asked for: this connection cannot be trusted any more
            self.close()
            return
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.complete:
                self.keep_alive = False  # more bytes after the reply's end
            else:
                self.error = str(exc) or type(exc).__name__
            self._wake()
        except httptools.HttpParserUpgrade:
            self.error = "the node asked to switch protocols"
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and self.until_close and not self.complete and self.error is None:
            self.complete = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- httptools callbacks -----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:  # a second message in the same read: stop parsing, drop the connection after this reply
            raise _Extra()

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_list.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self._parser
        self.headers_done = True
        self.status = parser.get_status_code()
        self.keep_alive = parser.should_keep_alive()
        if not (100 <= self.status < 200 or self.status in (204, 304)):
            names = {n.lower() for n, _ in self.header_list}
            self.until_close = b"content-length" not in names and b"transfer-encoding" not in names

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200:  # an interim reply (100 Continue): the real one follows
            self.reason, self.header_list, self.headers_done, self.status = b"", [], False, 0
            return
        self.complete = True
        self._wake()


class _Extra(Exception):
    """Raised from a parser callback to stop at the end of the reply."""


class _StaleConnection(Exception):
    """A pooled connection was closed by the node before it answered anything."""


@dataclass
class _Pool:
    node: Node
    limit: asyncio.Semaphore
    idle: deque[_Conn] = field(default_factory=deque)
    opened: int = 0


class EdgeLakeClient:
    """Sends commands to EdgeLake nodes; one instance per kernel, shared by every tool.

    :param nodes: the configured nodes; the first is the default.
    :param max_connections: connections per node (and so calls in flight per node).
    :param retries: extra attempts after a connection failure, for read-only commands only.
    :param backoff: seconds before the first retry; doubled for each next one.
    """

    def __init__(
        self,
        nodes: list[Node],
        *,
        user_agent: str = "AnyLog/1.23",
        connect_timeout: float = 5.0,
        max_connections: int = 16,
        retries: int = 2,
        backoff: float = 0.25,
    ) -> None:
        self.nodes = nodes
        self.user_agent = user_agent
        self.connect_timeout = connect_timeout
        self.max_connections = max(1, max_connections)
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        self._pools: dict[str, _Pool] = {}
        self._prefixes: dict[tuple[str, str], bytes] = {}
        self.stats = {"requests": 0, "connections_opened": 0, "retries": 0}

    # -- nodes -------------------------------------------------------------------------------------
    def node(self, choice: str | None) -> Node:
        """The node named ``choice`` (by name or host:port), or the default one."""
        if choice is None or choice == "":
            return self.nodes[0]
        for n in self.nodes:
            if choice in (n.name, n.address):
                return n
        known = ", ".join(n.label() for n in self.nodes)
        raise InvalidArgument(
            f"node {choice!r} is not one of the configured EdgeLake nodes",
            f"Use one of: {known}; or add it to [edgelake] nodes in plexor.toml.",
        )

    def _pool(self, node: Node) -> _Pool:
        pool = self._pools.get(node.address)
        if pool is None:
            pool = self._pools[node.address] = _Pool(node, asyncio.Semaphore(self.max_connections))
        return pool

    async def aclose(self) -> None:
        for pool in self._pools.values():
            while pool.idle:
                pool.idle.popleft().close()
        self._pools.clear()

    # -- one request -------------------------------------------------------------------------------
    async def send(
        self,
        node: Node,
        method: str,
        command: str,
        *,
        destination: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 20.0,
        read_only: bool = True,
    ) -> Reply:
        """Send ``command`` and return the node's raw reply; connection failures are retried when read-only.

        Raises :class:`NodeUnreachable` and :class:`NodeTimeout` with guidance; every
        other reply, malformed or not, is returned for :func:`replies.check` to judge.
        """
        request = self._request(node, method, command, destination, headers)
        pool = self._pool(node)
        attempts = 1 + (self.retries if read_only else 0)
        started = time.perf_counter()
        last_error: BaseException | None = None
        async with pool.limit:
            for attempt in range(attempts):
                if attempt:
                    self.stats["retries"] += 1
                    await asyncio.sleep(self.backoff * (2 ** (attempt - 1)))
                try:
                    async with asyncio.timeout(timeout):
                        reply = await self._exchange(pool, request, method, command)
                except _StaleConnection as exc:
                    last_error = exc
                    if not read_only:
                        raise EdgeLakeError(
                            f"EdgeLake node {node.label()} closed the connection before answering {command!r}",
                            "The command may or may not have run; check the node before sending it again.",
                            data=_details(node, command),
                        ) from None
                    continue
                except TimeoutError:
                    raise NodeTimeout(
                        f"EdgeLake node {node.label()} did not answer {command!r} within {timeout:g} s",
                        "Narrow the request (a where clause, a smaller limit), or raise the tool's timeout "
                        "([edgelake] timeout, network_timeout, or timeout: in the tool's YAML).",
                        data=_details(node, command, timeout=timeout),
                    ) from None
                except OSError as exc:
                    last_error = exc
                    continue
                reply.elapsed = time.perf_counter() - started
                self.stats["requests"] += 1
                return reply
        reason = getattr(last_error, "strerror", None) or str(last_error) or type(last_error).__name__
        others = [n.label() for n in self.nodes if n != node]
        raise NodeUnreachable(
            f"EdgeLake node {node.label()} is unreachable: {reason} "
            f"({attempts} attempt{'s' if attempts > 1 else ''}, command {command!r})",
            f"Start the node (its REST server should listen on {node.address}) or set [edgelake] nodes in "
            "plexor.toml (or PLEXOR_EDGELAKE_NODES) to a running node"
            + (f"; other configured nodes: {', '.join(others)} (pass node=...)" if others else "") + ".",
            data=_details(node, command, reason=reason),
        )

    def _request(self, node: Node, method: str, command: str, destination: str | None,
                 headers: dict[str, str] | None) -> bytes:
        """The request's bytes: a prefix rendered once per node and method, then this call's headers."""
        prefix = self._prefixes.get((node.address, method))
        if prefix is None:
            prefix = self._prefixes[(node.address, method)] = (
                f"{method} / HTTP/1.1\r\nHost: {node.address}\r\nUser-Agent: {_header_value(self.user_agent, 'user_agent', node, command)}\r\n"
            ).encode("ascii")
        lines = ["command: ", _header_value(command, "command", node, command), "\r\n"]
        if destination:
            lines += ["destination: ", _header_value(destination, "destination", node, command), "\r\n"]
        if headers:
            for k, v in headers.items():
                lines += [_header_value(k, "header name", node, command), ": ", _header_value(v, f"header {k}", node, command), "\r\n"]
        if method == "POST":
            lines.append("Content-Length: 0\r\n")
        lines.append("\r\n")
        return prefix + "".join(lines).encode("ascii")

    async def _connect(self, pool: _Pool) -> _Conn:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout):
            _, conn = await loop.create_connection(_Conn, pool.node.host, pool.node.port)
        pool.opened += 1
        self.stats["connections_opened"] += 1
        return conn

    async def _exchange(self, pool: _Pool, request: bytes, method: str, command: str) -> Reply:
        conn: _Conn | None = None
        while pool.idle:
            conn = pool.idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                break
            conn = None  # the node closed it while it was idle
        reused = conn is not None
        if conn is None:
            conn = await self._connect(pool)
        try:
            await conn.exchange(request)
        except BaseException:
            conn.close()  # a timeout or cancellation mid-reply leaves the connection unusable
            raise
        conn.uses += 1
        if not conn.headers_done:
            conn.close()
            if conn.error is not None:
                raise _unreadable(pool.node, command, f"the status line or headers are malformed: {conn.error}")
            if reused and not conn.received:
                raise _StaleConnection()
            if conn.received:
                raise _unreadable(pool.node, command, "the node closed the connection in the middle of the reply's headers")
            raise _unreadable(pool.node, command, "the node closed the connection without a reply")
        framing_error: str | None = None
        if not conn.complete:
            framing_error = conn.error or "the node closed the connection before the reply's body ended"
        if conn.complete and conn.keep_alive and not conn.closed:
            pool.idle.append(conn)
        else:
            conn.close()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in conn.header_list}
        return Reply(
            pool.node, method, command, conn.status, conn.reason.decode("latin-1"), headers,
            b"".join(conn.chunks), framing_error,
        )


def _header_value(value: str, what: str, node: Node, command: str) -> str:
    """``value`` if an HTTP header can carry it (printable ASCII and tabs); otherwise a clear error."""
    if value.isascii() and value.isprintable():
        return value
    bad = next((c for c in value if not (c.isascii() and (c.isprintable() or c == "\t"))), None)
    if bad is None:
        return value
    where = value.index(bad)
    if what == "command":
        raise InvalidArgument(
            f"the EdgeLake command {command!r} cannot be sent: it holds {bad!r} at position {where}",
            "EdgeLake takes the command in an HTTP header, which carries printable ASCII only: "
            "leave out line breaks and control characters, and write non-ASCII text another way "
            "(for example a like pattern with _ in place of the character).",
            data=_details(node, command),
        )
    raise InvalidArgument(
        f"the {what} value {value!r} cannot be sent to EdgeLake node {node.label()}: it holds {bad!r} at position {where}",
        "HTTP headers carry printable ASCII only; fix the value in plexor.toml or in the tool's YAML.",
        data=_details(node, command),
    )


def _details(node: Node, command: str, **extra: Any) -> dict[str, Any]:
    return {"node": node.name, "address": node.address, "command": command, **extra}


def _unreadable(node: Node, command: str, why: str) -> EdgeLakeError:
    return EdgeLakeError(
        f"EdgeLake node {node.label()} sent an unreadable reply to {command!r}: {why}",
        "Check that the address in [edgelake] nodes is the node's REST port (not its TCP port); "
        "if it is, look at the node's log for this command.",
        data=_details(node, command),
    )
