"""The EdgeLake REST client: one HTTP/1.1 connection per request on asyncio, replies parsed by httptools.

The node answers every request with ``Connection: close`` and closes the
socket after one reply; a second request pipelined on the same connection is
never answered (PROTOCOL.md, "Observed later"). So the client makes no
keep-alive assumption: it opens a connection, sends one request saying
``Connection: close``, reads the reply to its end (or to the close) and drops
the connection. ``max_connections`` bounds the calls in flight per node.

The request is plain bytes (a prefix rendered once per node and method, then
the ``command`` and ``destination`` headers), sent right after the connect
when the handshake is already done (loopback, near nodes). The reply is read
in the event loop's readiness callback and parsed by httptools (llhttp)
inside ``data_received``: one wake-up of the waiting call per reply,
``asyncio.timeout`` deadlines and clean cancellation.

Every read is bounded: a reply larger than ``max_reply_bytes`` is abandoned
(the connection closed at once) and reported with an error naming the
setting, so a runaway reply cannot exhaust memory.

It also survives the node's malformed replies: the status line whose reason
phrase is a JSON error; ``Transfer-Encoding: chunked`` followed by raw JSON
with no chunk framing (kept as the reply's body for :mod:`replies` to read);
chunked followed by nothing at all.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from plexor import InvalidArgument, span
from plexor_edgelake.nodes import EdgeLakeError, Node, NodeTimeout, NodeUnreachable, ReplyTooLarge, parse_nodes
from plexor_edgelake.wire import Exchange

__all__ = ["EdgeLakeClient", "EdgeLakeError", "Node", "NodeTimeout", "NodeUnreachable", "Reply", "ReplyTooLarge",
           "parse_nodes"]


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
    framing_error: str | None = None  # the body could not be read as framed (the node's malformed replies)
    elapsed: float = 0.0

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class EdgeLakeClient:
    """Sends commands to EdgeLake nodes; one instance per kernel, shared by every tool.

    :param nodes: the configured nodes; the first is the default.
    :param max_connections: calls in flight per node (each has its own connection).
    :param retries: extra attempts after a connection failure, for read-only commands only.
    :param backoff: seconds before the first retry; doubled for each next one.
    :param max_reply_bytes: the most bytes read of one reply (status line and headers included).
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
        max_reply_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.nodes = nodes
        self.user_agent = user_agent
        self.connect_timeout = connect_timeout
        self.max_connections = max(1, max_connections)
        self.retries = max(0, retries)
        self.backoff = max(0.0, backoff)
        self.max_reply_bytes = max(1024, max_reply_bytes)
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._prefixes: dict[tuple[str, str], bytes] = {}
        self._addresses: dict[Node, tuple[int, Any]] = {}
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

    async def aclose(self) -> None:
        self._limits.clear()  # nothing is kept open between requests

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
        """Send ``command`` on a new connection and return the node's raw reply.

        Connection failures are retried when read-only. Raises :class:`NodeUnreachable`,
        :class:`NodeTimeout` and :class:`ReplyTooLarge` with guidance; every other reply,
        malformed or not, is returned for :func:`replies.check` to judge.
        """
        request = self.request_bytes(node, method, command, destination, headers)
        limit = self._limits.get(node.address)
        if limit is None:
            limit = self._limits[node.address] = asyncio.Semaphore(self.max_connections)
        attempts = 1 + (self.retries if read_only else 0)
        started = time.perf_counter()
        last_error: BaseException | None = None
        async with limit:
            for attempt in range(attempts):
                if attempt:
                    self.stats["retries"] += 1
                    await asyncio.sleep(self.backoff * (2 ** (attempt - 1)))
                try:
                    async with asyncio.timeout(timeout):
                        attributes: dict[str, Any] = {"server.address": node.host, "server.port": node.port,
                                                      "http.request.method": method}
                        with span(method, **attributes):
                            reply = await self._exchange(node, request, method, command)
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

    async def _address(self, loop: asyncio.AbstractEventLoop, node: Node) -> tuple[int, Any]:
        """The node's socket address; an IP literal is parsed once, a name is resolved on every call."""
        known = self._addresses.get(node)
        if known is not None:
            return known
        try:
            ip = ipaddress.ip_address(node.host)
        except ValueError:
            infos = await loop.getaddrinfo(node.host, node.port, type=socket.SOCK_STREAM)
            if not infos:
                raise OSError(f"cannot resolve {node.host}") from None
            return infos[0][0], infos[0][4]
        known = self._addresses[node] = (
            (socket.AF_INET6, (node.host, node.port, 0, 0)) if ip.version == 6 else (socket.AF_INET, (node.host, node.port)))
        return known

    def request_bytes(self, node: Node, method: str, command: str, destination: str | None,
                      headers: dict[str, str] | None) -> bytes:
        """The request's bytes: a prefix rendered once per node and method, then this call's headers."""
        prefix = self._prefixes.get((node.address, method))
        if prefix is None:
            prefix = self._prefixes[(node.address, method)] = (
                f"{method} / HTTP/1.1\r\nHost: {node.address}\r\n"
                f"User-Agent: {_header_value(self.user_agent, 'user_agent', node, command)}\r\nConnection: close\r\n"
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

    async def _exchange(self, node: Node, request: bytes, method: str, command: str) -> Reply:
        # A plain non-blocking socket: every system call is tried first and the loop is asked to
        # wait only when it would block, so a request takes fewer loop iterations than a transport
        # and protocol would (measured in BENCH.md).
        loop = asyncio.get_running_loop()
        limit = self.max_reply_bytes
        family, address = await self._address(loop, node)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sent = await self._connect_and_send(loop, sock, address, request)
            self.stats["connections_opened"] += 1
            if sent < len(request):
                await loop.sock_sendall(sock, memoryview(request)[sent:])
            conn = Exchange(limit)
            await _read(loop, sock, conn)
        finally:
            sock.close()  # one request per connection: the node closes its side too
        if conn.too_large:
            raise ReplyTooLarge(
                f"EdgeLake node {node.label()} sent more than {limit:,} bytes in reply to {command!r}; "
                "the reply was abandoned ([edgelake] max_reply_bytes)",
                "Narrow the request (a where clause, fewer columns, a smaller limit), or raise "
                f"[edgelake] max_reply_bytes (now {limit}) in plexor.toml or PLEXOR_EDGELAKE_MAX_REPLY_BYTES.",
                data=_details(node, command, max_reply_bytes=limit),
            )
        if not conn.headers_done:
            if conn.error is not None:
                raise _unreadable(node, command, f"the status line or headers are malformed: {conn.error}")
            if conn.received:
                raise _unreadable(node, command, "the node closed the connection in the middle of the reply's headers")
            raise _unreadable(node, command, "the node closed the connection without a reply")
        framing_error: str | None = None
        if not conn.complete:
            framing_error = conn.error or "the node closed the connection before the reply's body ended"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in conn.header_list}
        return Reply(node, method, command, conn.status, conn.reason.decode("latin-1"), headers,
                     conn.body(), framing_error)

    async def _connect_and_send(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any,
                                request: bytes) -> int:
        """Connect ``sock`` and send what the socket takes of ``request`` at once; the bytes sent.

        A non-blocking connect answers "in progress" even on loopback, where the handshake has
        in fact finished by the time the call returns; so the request is tried at once, and only
        if the socket is not writable yet does the call wait for the connection (under
        ``connect_timeout``), saving a turn of the event loop on every request to a near node.
        A refused connection raises here, from the connect or from the first send.
        """
        err = sock.connect_ex(address)
        if err not in _CONNECTING:
            raise OSError(err, os.strerror(err))
        if err == 0:
            return 0
        try:
            return sock.send(request)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            if exc.errno != errno.ENOTCONN:  # some systems say "not connected" instead of "try again"
                raise
        try:
            async with asyncio.timeout(self.connect_timeout):
                await loop.sock_connect(sock, address)
        except TimeoutError:  # a connection failure like any other: retried, then reported as unreachable
            # Not OSError(ETIMEDOUT): that is a TimeoutError, which send() reports as a slow answer.
            raise ConnectionError(f"no connection within {self.connect_timeout:g} s ([edgelake] connect_timeout)") from None
        except OSError as exc:
            if exc.errno != errno.EISCONN:  # the handshake ended between the send and this connect
                raise
        return 0


async def _read(loop: asyncio.AbstractEventLoop, sock: socket.socket, conn: Exchange) -> None:
    """Read the reply into ``conn`` until it is done or the node closes the connection.

    The socket stays registered with the loop for the whole reply and each readable event is
    handled in the loop's own callback, so the waiting call wakes once per reply rather than
    once per chunk (the node writes a query's rows chunk by chunk); what is there already is
    read before anything is registered.
    """
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if done.done():
            return
        try:
            data = sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            done.set_exception(exc)
            return
        if not data:
            conn.connection_lost(None)
        else:
            conn.data_received(data)
            if not conn.done:
                return
        done.set_result(None)

    readable()
    if done.done():
        return done.result()
    fd = sock.fileno()
    try:
        loop.add_reader(fd, readable)
    except NotImplementedError:  # a loop without readiness callbacks (the proactor on Windows)
        while not conn.done:
            data = await loop.sock_recv(sock, _RECV)
            if not data:
                conn.connection_lost(None)
                break
            conn.data_received(data)
        return None
    try:
        await done
    finally:
        loop.remove_reader(fd)
    return None


_RECV = 262144
_CONNECTING = frozenset({0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN, errno.EALREADY, errno.EINTR})


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
            "(for example a like pattern with _ in place of the character, in a query with destination local: "
            "network queries refuse LIKE patterns).",
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
