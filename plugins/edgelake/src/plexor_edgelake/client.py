"""The EdgeLake REST client: pooled HTTP/1.1 connections over asyncio streams, parsed by h11.

Why h11 over asyncio streams rather than httpx or ``http.client`` in threads:
measured against the stand-in node on this machine, one keep-alive request
costs about 115 µs this way, 170 µs with ``http.client`` in a worker thread
and 800-950 µs with httpx (sync or async); a bare ``http.client`` loop takes
about 105 µs. h11 is the sans-IO HTTP/1.1 parser that httpx and uvicorn use
underneath (well kept, already installed with the kernel's uvicorn), so the
framing is not hand-written; asyncio gives real concurrency (no thread per
call), ``asyncio.timeout`` deadlines and clean cancellation.

It also has to survive the node's malformed replies: h11 reads the status
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


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    h11: Any
    uses: int = 0

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - closing a dead socket
            pass


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
        import h11

        request_headers = [("Host", node.address), ("User-Agent", self.user_agent), ("command", command)]
        if destination:
            request_headers.append(("destination", destination))
        for k, v in (headers or {}).items():
            request_headers.append((k, v))
        if method == "POST":
            request_headers.append(("Content-Length", "0"))
        request = h11.Request(method=method, target="/", headers=request_headers)
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

    async def _connect(self, pool: _Pool) -> _Conn:
        import h11

        async with asyncio.timeout(self.connect_timeout):
            reader, writer = await asyncio.open_connection(pool.node.host, pool.node.port)
        pool.opened += 1
        self.stats["connections_opened"] += 1
        return _Conn(reader, writer, h11.Connection(h11.CLIENT))

    async def _exchange(self, pool: _Pool, request: Any, method: str, command: str) -> Reply:
        import h11

        conn = pool.idle.pop() if pool.idle else None
        reused = conn is not None
        if conn is None:
            conn = await self._connect(pool)
        response: Any = None
        chunks: list[bytes] = []
        framing_error: str | None = None
        received_any = False
        try:
            conn.writer.write(conn.h11.send(request) + conn.h11.send(h11.EndOfMessage()))
            await conn.writer.drain()
            while True:
                try:
                    event = conn.h11.next_event()
                except h11.RemoteProtocolError as exc:
                    if response is None:
                        if reused and not received_any:
                            raise _StaleConnection() from None
                        raise _unreadable(pool.node, command, f"the status line or headers are malformed: {exc}") from None
                    framing_error = str(exc)
                    break
                if event is h11.NEED_DATA:
                    data = await conn.reader.read(65536)
                    received_any = received_any or bool(data)
                    conn.h11.receive_data(data)
                elif isinstance(event, h11.Response):
                    response = event
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    if isinstance(event, h11.ConnectionClosed) and response is None:
                        if reused and not received_any:
                            raise _StaleConnection()
                        raise _unreadable(pool.node, command, "the node closed the connection without a reply")
                    break
        except (ConnectionError, h11.LocalProtocolError) as exc:
            conn.close()
            if reused and response is None and not received_any:
                raise _StaleConnection() from None
            if isinstance(exc, h11.LocalProtocolError):
                raise _unreadable(pool.node, command, f"the request could not be sent: {exc}") from None
            raise
        except BaseException:
            conn.close()  # a timeout or cancellation mid-reply leaves the connection unusable
            raise
        conn.uses += 1
        if framing_error is None and conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
            pool.idle.append(conn)
        else:
            conn.close()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
        return Reply(
            pool.node, method, command, response.status_code, response.reason.decode("latin-1"), headers,
            b"".join(chunks), framing_error,
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
