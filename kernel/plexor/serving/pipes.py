"""Plexor's ends of stdin and stdout, handed to the SDK's ``stdio_server`` (:mod:`plexor.serving.stdio`).

Both are served through the event loop when they are a pipe or socket, and otherwise from a thread
with its own limiter: never through the 40-thread pool that blocking tools share, so replies (even
``ping``) do not wait behind slow tool calls.
"""

from __future__ import annotations

import collections
import os
import sys
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    import asyncio

    import anyio

    from plexor.log import Logger

__all__ = ["StdinLines", "StdoutPipe"]


class StdinLines:
    """Lines of stdin for the SDK's ``stdio_server``, read without a blocking thread.

    A pipe is read through the event loop (cancellable at once); anything else (a regular
    file) falls back to a thread. A line longer than ``limit`` is skipped whole and handed
    on as an invalid message. Each line handed out is also kept in ``given`` until the
    reader of the SDK's stream takes the message made of it (see ``plexor.serving.stdio.AnsweringStream``).
    """

    def __init__(self, limit: int = 64 * 1024 * 1024) -> None:
        self._fd = os.dup(sys.stdin.fileno())
        self._limit = limit
        self._reader: asyncio.StreamReader | None = None
        self._file: IO[str] | None = None
        self._limiter: anyio.CapacityLimiter | None = None
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
        if self._file is not None or self._reader is None:
            line = await anyio.to_thread.run_sync(self._readline, abandon_on_cancel=True, limiter=self._limiter)
        else:
            try:  # not readline(): past the limit it drops the line itself when its newline has arrived, and
                # skipping on to the newline then swallowed the next line whole (an answer never sent)
                raw = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:  # the last line, without its newline (or none: EOF)
                raw = end.partial
            except asyncio.LimitOverrunError:  # the buffer is left as it was: skip through this line's newline
                await _skip_rest(self._reader)
                raw = b"{oversized line skipped}\n"
            line = raw.decode("utf-8", "replace")
        if not line:
            raise StopAsyncIteration
        self.read += 1
        self.given.append(line)
        return line

    def _readline(self) -> str:
        return self._file.readline() if self._file is not None else ""


async def _skip_rest(reader: asyncio.StreamReader) -> None:
    import asyncio

    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return


def _own_limiter() -> anyio.CapacityLimiter:
    import anyio

    return anyio.CapacityLimiter(1)


class StdoutPipe:
    """The protocol's end of stdout, for the SDK's ``stdio_server`` (``write`` + ``flush``).

    fd 1 is moved to a private descriptor and pointed at stderr, so a stray ``print`` in a
    plugin (or a child process) never reaches the protocol stream. A pipe or socket is
    written through the event loop; anything else from a dedicated thread.
    """

    def __init__(self, log: Logger | None = None) -> None:
        sys.stdout.flush()
        self._fd = os.dup(1)  # not inheritable (PEP 446), and above 2 since 0-2 are open
        os.dup2(2, 1)
        self._writer: asyncio.StreamWriter | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._pending: list[str] = []
        self._file: IO[bytes] | None = None
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
        while view and self._file is not None:
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
