"""Serving one client over stdin/stdout, through the SDK's ``stdio_server``.

Plexor hands the SDK its own ends of the pipe (:mod:`plexor.serving.pipes`):

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
import signal
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from plexor.core.kernel import Kernel
from plexor.serving.pipes import StdinLines, StdoutPipe
from plexor.serving.watchdog import EXIT_MARGIN, Watchdog, _next_signal_by_handler

if TYPE_CHECKING:  # pragma: no cover - typing only
    import contextvars

    import anyio
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

    from plexor.features.auth.config import Profile
    from plexor.log import Logger
    from plexor.serving.boot import Boot

__all__ = ["serve_stdio", "stdio_streams"]

# How long a first ``server/discover`` waits for a message already sent behind it (see
# ``AnsweringStream._probe_given_up``): long enough for lines already in the pipe to be read.
PROBE_LOOKAHEAD = 0.02


def _modern(params: object) -> bool:
    """Whether a request's params carry the 2026-07-28 envelope (the protocol version in ``_meta``)."""
    from mcp_types import PROTOCOL_VERSION_META_KEY

    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


class AnsweringStream:
    """The SDK's read stream, answering what it could not parse instead of dropping it.

    The SDK's stdin reader turns each line into exactly one item, a message or an
    exception, so the lines handed out and the items taken here pair off in order.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage],
                 lines: collections.deque[str], log: Logger) -> None:
        self._inner = inner
        self._write = write
        self._lines = lines
        self._log = log
        self._opened = False  # the first request (which decides the connection's era) has been seen
        # (item, line, context)
        self._held: collections.deque[tuple[SessionMessage | Exception, str, contextvars.Context | None]] = collections.deque()
        self._context: contextvars.Context | None = None
        from plexor.serving.wire import max_depth

        self._depth = max_depth()  # PLEXOR_MAX_NESTING: both eras, as over HTTP (plexor.serving.bounds)

    @property
    def last_context(self) -> contextvars.Context | None:
        return self._context if self._context is not None else getattr(self._inner, "last_context", None)

    async def _next(self) -> tuple[SessionMessage | Exception, str]:
        if self._held:
            item, line, self._context = self._held.popleft()
            return item, line
        self._context = None
        item = await self._inner.receive()
        return item, (self._lines.popleft() if self._lines else "")

    async def receive(self) -> SessionMessage | Exception:
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

    async def _probe_given_up(self, discover: SessionMessage) -> SessionMessage | Exception:
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

        following: SessionMessage | Exception | None = None
        with anyio.move_on_after(PROBE_LOOKAHEAD):
            following = await self._inner.receive()  # cancel-safe: nothing is lost on timeout
        if following is None:
            return discover
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        line = self._lines.popleft() if self._lines else ""
        if not (isinstance(following, SessionMessage) and isinstance(following.message, types.JSONRPCRequest)
                and following.message.method == "initialize"):
            self._held.append((following, line, context))
            return discover
        asked_id = discover.message.id if isinstance(discover.message, types.JSONRPCRequest) else None
        reply = Reply(id_of(asked_id), INVALID_REQUEST, (
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

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _run_until_signal(kernel: Kernel, scope: anyio.CancelScope, grace: float, watchdog: Watchdog,
                            listening: Callable[[], None] | None = None, boot: Boot | None = None) -> None:
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
async def stdio_streams(log: Logger, stdin: StdinLines | None = None
                        ) -> AsyncIterator[tuple[AnsweringStream, WriteStream[SessionMessage]]]:
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
                      profile: Profile | None = None, silent: Callable[[], None] | None = None) -> None:
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
