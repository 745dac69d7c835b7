"""Serving one client over stdin/stdout, through the SDK's ``stdio_server``.

Plexor hands the SDK its own ends of the pipe:

- stdin is read through the event loop (a SIGTERM is never stuck behind a blocking read);
- stdout is written through the event loop too, or, when it is not a pipe, from a thread
  with its own limiter: never through the 40-thread pool that blocking tools share, so
  replies (even ``ping``) do not wait behind slow tool calls;
- every line the SDK refuses is answered (``plexor.serving.wire``): a request with a
  readable id gets exactly one JSON-RPC error carrying that id.

Exit is bounded: after stdin closes or the first SIGTERM/SIGINT, in-flight calls get
``grace`` seconds and the kernel's stop as long again; a watchdog ends the process if
shutdown takes longer than that (plus a margin), whatever a plugin does, and a second
signal exits at once.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from plexor.core.kernel import Kernel
from plexor.serving.watchdog import EXIT_MARGIN, Watchdog, _next_signal_by_handler

__all__ = ["serve_stdio", "stdio_streams"]

# How long a first ``server/discover`` waits for a message already sent behind it (see
# ``AnsweringStream._probe_given_up``): long enough for lines already in the pipe to be read.
PROBE_LOOKAHEAD = 0.02


class StdinLines:
    """Lines of stdin for the SDK's ``stdio_server``, read without a blocking thread.

    A pipe is read through the event loop (cancellable at once); anything else (a regular
    file) falls back to a thread. A line longer than ``limit`` is skipped whole and handed
    on as an invalid message. Each line handed out is also kept in ``given`` until the
    reader of the SDK's stream takes the message made of it (see ``AnsweringStream``).
    """

    def __init__(self, limit: int = 64 * 1024 * 1024) -> None:
        self._fd = os.dup(sys.stdin.fileno())
        self._limit = limit
        self._reader: Any = None
        self._file: Any = None
        self._limiter: Any = None
        self.given: collections.deque[str] = collections.deque()
        self.read = 0  # lines read so far: none at EOF means no client ever spoke

    def __aiter__(self) -> StdinLines:
        return self

    async def _open(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=self._limit)
        pipe = os.fdopen(self._fd, "rb", buffering=0)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
            self._reader = reader
        except (ValueError, OSError):  # not a pipe, socket or tty
            import io

            self._file = io.TextIOWrapper(pipe, encoding="utf-8", errors="replace")
            self._limiter = _own_limiter()  # never waits for a slot behind blocking tool calls

    async def __anext__(self) -> str:
        import asyncio

        import anyio

        if self._reader is None and self._file is None:
            await self._open()
        line: str
        if self._file is not None:
            line = await anyio.to_thread.run_sync(self._file.readline, abandon_on_cancel=True,
                                                  limiter=self._limiter)
        else:
            try:
                raw = await self._reader.readline()
            except (asyncio.LimitOverrunError, ValueError):
                await self._skip_rest()
                raw = b"{oversized line skipped}\n"
            line = raw.decode("utf-8", "replace")
        if not line:
            raise StopAsyncIteration
        self.read += 1
        self.given.append(line)
        return line

    async def _skip_rest(self) -> None:
        import asyncio

        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


def _modern(params: Any) -> bool:
    """Whether a request's params carry the 2026-07-28 envelope (the protocol version in ``_meta``)."""
    from mcp_types import PROTOCOL_VERSION_META_KEY

    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _own_limiter() -> Any:
    import anyio

    return anyio.CapacityLimiter(1)


class StdoutPipe:
    """The protocol's end of stdout, for the SDK's ``stdio_server`` (``write`` + ``flush``).

    fd 1 is moved to a private descriptor and pointed at stderr, so a stray ``print`` in a
    plugin (or a child process) never reaches the protocol stream. A pipe or socket is
    written through the event loop; anything else from a dedicated thread.
    """

    def __init__(self, log: Any = None) -> None:
        sys.stdout.flush()
        self._fd = os.dup(1)  # not inheritable (PEP 446), and above 2 since 0-2 are open
        os.dup2(2, 1)
        self._writer: Any = None
        self._limiter: Any = None
        self._pending: list[str] = []
        self._file: Any = None
        self._log = log
        self.closed = False  # the client closed its end: what is written from now on is dropped

    async def _open(self) -> None:
        import asyncio
        import stat

        mode = os.fstat(self._fd).st_mode
        shared = _same_file(self._fd, 2)  # non-blocking would leak onto stderr through a shared description
        if (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and not shared:
            loop = asyncio.get_running_loop()
            pipe = os.fdopen(self._fd, "wb", buffering=0, closefd=False)
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        else:
            self._file = os.fdopen(self._fd, "wb", buffering=0, closefd=False)
            self._limiter = _own_limiter()

    async def write(self, text: str) -> None:
        self._pending.append(text)

    async def flush(self) -> None:
        import anyio

        if self._writer is None and self._file is None:
            await self._open()
        data = "".join(self._pending).encode("utf-8", "replace")
        self._pending.clear()
        if self.closed:
            return
        try:
            if self._writer is not None:
                if self._writer.transport.is_closing():
                    raise ConnectionResetError("Connection lost")
                self._writer.write(data)
                await self._writer.drain()
            else:
                await anyio.to_thread.run_sync(self._write_all, data, limiter=self._limiter)
        except (ConnectionResetError, BrokenPipeError):
            # The client closed the pipe without reading its reply (it left, or gave up): nothing more
            # can reach it, which is no fault of the server. Later replies are dropped; stdin's end
            # (or a signal) ends serving as usual.
            self.closed = True
            if self._log is not None:
                self._log.info("stdout_closed", dropped_bytes=len(data),
                               note="the client closed its end of stdout; replies are dropped until stdin closes")

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._file.write(view) or 0:]

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait (bounded) until what the event loop still buffers has reached the pipe."""
        import anyio

        if self._writer is None:
            return
        with anyio.move_on_after(timeout):
            while self._writer.transport.get_write_buffer_size():
                await anyio.sleep(0.01)

    def restore(self) -> None:
        try:
            os.dup2(self._fd, 1)
        except OSError:
            pass


def _same_file(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


class AnsweringStream:
    """The SDK's read stream, answering what it could not parse instead of dropping it.

    The SDK's stdin reader turns each line into exactly one item, a message or an
    exception, so the lines handed out and the items taken here pair off in order.
    """

    def __init__(self, inner: Any, write: Any, lines: collections.deque[str], log: Any) -> None:
        self._inner = inner
        self._write = write
        self._lines = lines
        self._log = log
        self._opened = False  # the first request (which decides the connection's era) has been seen
        self._held: collections.deque[tuple[Any, str, Any]] = collections.deque()  # (item, line, context)
        self._context: Any = None
        from plexor.serving.wire import max_depth

        self._depth = max_depth()  # PLEXOR_MAX_NESTING: both eras, as over HTTP (plexor.serving.bounds)

    @property
    def last_context(self) -> Any:
        return self._context if self._context is not None else getattr(self._inner, "last_context", None)

    async def _next(self) -> tuple[Any, str]:
        if self._held:
            item, line, self._context = self._held.popleft()
            return item, line
        self._context = None
        item = await self._inner.receive()
        return item, (self._lines.popleft() if self._lines else "")

    async def receive(self) -> Any:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        from plexor.serving.bounds import too_deep
        from plexor.serving.wire import INVALID_REQUEST, Reply, _too_deep, diagnose, id_of, stray_id

        while True:
            item, line = await self._next()
            if (not isinstance(item, Exception) and isinstance(item.message, types.JSONRPCRequest)
                    and line.count("[") + line.count("{") > self._depth + 1 and too_deep(line.encode(), self._depth)):
                reply = Reply(id_of(item.message.id), INVALID_REQUEST, _too_deep(self._depth))
                await self._write.send(SessionMessage(types.JSONRPCError.model_validate(reply.wire())))
                continue
            if not self._opened and not isinstance(item, Exception) and isinstance(item.message, types.JSONRPCRequest):
                self._opened = True
                if item.message.method == "server/discover" and _modern(item.message.params):
                    item = await self._probe_given_up(item)
            if isinstance(item, Exception):
                replies = diagnose(line)
            elif isinstance(item.message, types.JSONRPCNotification):
                stray = stray_id(line)
                replies = [stray] if stray is not None else []
                if not replies:
                    return item
            else:
                return item
            self._log.info("message_refused", answered=len(replies), reason=replies[0].message[:120] if replies else
                           "a malformed response or notification")
            for reply in replies:
                error = types.JSONRPCError.model_validate(reply.wire())
                await self._write.send(SessionMessage(error))

    async def _probe_given_up(self, discover: Any) -> Any:
        """The message to serve first when the client opened with ``server/discover``.

        A client that probes with ``server/discover`` and hears nothing within its own timeout
        (a fresh server may still be importing) falls back to ``initialize`` on the same pipe.
        If that ``initialize`` is already waiting behind the discover, the client has given up
        on the probe: the discover gets one error reply, and ``initialize`` opens the
        connection in the handshake era. Otherwise the discover is served as usual.
        """
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        from plexor.serving.wire import INVALID_REQUEST, Reply, id_of

        following: Any = None
        with anyio.move_on_after(PROBE_LOOKAHEAD):
            following = await self._inner.receive()  # cancel-safe: nothing is lost on timeout
        if following is None:
            return discover
        context = getattr(self._inner, "last_context", None)
        line = self._lines.popleft() if self._lines else ""
        if not (isinstance(following, SessionMessage) and isinstance(following.message, types.JSONRPCRequest)
                and following.message.method == "initialize"):
            self._held.append((following, line, context))
            return discover
        reply = Reply(id_of(discover.message.id), INVALID_REQUEST, (
            "server/discover was not answered before this client sent initialize on the same connection, so the "
            "client has fallen back to the initialize handshake: this connection serves the handshake era "
            "(2025-11-25 and earlier). To use the 2026-07-28 protocol, start a new server process and wait for "
            "the server/discover answer (a fresh server can take a few seconds to start) before sending initialize."))
        self._log.info("discover_abandoned", id=reply.id, era="handshake")
        await self._write.send(SessionMessage(types.JSONRPCError.model_validate(reply.wire())))
        self._held.append((following, line, context))
        return (await self._next())[0]

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()

    def __aiter__(self) -> AnsweringStream:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


async def _run_until_signal(kernel: Kernel, scope: Any, grace: float, watchdog: Watchdog,
                            listening: Callable[[], None] | None = None, boot: Any = None) -> None:
    """On SIGTERM/SIGINT: stop taking calls, let in-flight ones finish, then end serving.

    ``listening`` runs once the signals are caught (the terminal hint says Ctrl+C works: it must).
    """
    import anyio

    try:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            if listening is not None:
                listening()
            async for signum in signals:
                name = signal.Signals(signum).name
                break
            else:  # pragma: no cover - the receiver never ends by itself
                return
    except NotImplementedError:  # Windows: its event loops have no add_signal_handler
        if listening is not None:
            listening()
        name = await _next_signal_by_handler()
    kernel.log.info("signal", signal=name)
    watchdog.arm(name)  # after the receiver is gone, which put the default handlers back
    if boot is not None:
        boot.abort()  # requests still waiting for the plugins to load get "shutting down", not silence
    await kernel.drain(grace)
    await anyio.sleep(0.2)  # let the answers of the calls that just finished reach the client
    scope.cancel()


def _freeze_heap() -> None:
    """Move what exists after start-up out of the garbage collector's sight (``gc.freeze``).

    The kernel, the plugins, their schemas and the SDK's models live as long as the process; a
    full collection walked all of them on every request burst (about 30 us a call under load,
    bench/http_profile.py). Only serving processes do this, never a kernel made in a test.
    """
    import gc

    gc.freeze()


@contextlib.asynccontextmanager
async def stdio_streams(log: Any, stdin: StdinLines | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server`` with Plexor's ends: stdin and stdout through the event loop, refused lines answered."""
    from mcp.server.stdio import stdio_server

    stdin, stdout = stdin or StdinLines(), StdoutPipe(log)
    try:
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
            yield AnsweringStream(read_stream, write_stream, stdin.given, log), write_stream
    finally:
        import anyio

        with anyio.CancelScope(shield=True):
            await stdout.settle()
        stdout.restore()


async def serve_stdio(kernel: Kernel, *, grace: float = 30.0, listening: Callable[[], None] | None = None,
                      profile: Any = None, silent: Callable[[], None] | None = None) -> None:
    """Serve one client over stdin/stdout until EOF or a signal; then drain and stop the kernel.

    :param listening: called once SIGTERM/SIGINT are handled (for the hint on a terminal).
    :param profile: the client's tool profile (``serve --profile``): the same authorization layer as HTTP's.
    :param silent: called when stdin ended before a single line arrived (no client was ever there).
    """
    import anyio

    from plexor.serving.boot import Boot
    from plexor.serving.server import build_server

    boot = Boot(kernel, on_started=_freeze_heap)
    server = build_server(kernel, boot=boot, profile=profile)  # a profile: the auth plugin's authorization layer
    watchdog = Watchdog(kernel, 2 * grace + EXIT_MARGIN)
    try:
        async with anyio.create_task_group() as tg:
            # The handshake is answered first; plugins load and start right after
            # it, and requests that need them wait for loading (and a plugin still
            # starting is waited for, bounded) instead of failing.
            boot.attach(tg)
            tg.start_soon(boot.fallback, 0.5)
            tg.start_soon(_run_until_signal, kernel, tg.cancel_scope, grace, watchdog, listening, boot)
            stdin = StdinLines()
            async with stdio_streams(kernel.log, stdin) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            kernel.log.info("stdin_closed", lines=stdin.read)
            if not stdin.read and silent is not None:
                silent()
            watchdog.arm("stdin closed")
            await kernel.drain(grace)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await kernel.stop(grace)
