"""Reading one reply off the wire with httptools (llhttp), under a byte limit, quirks of the node included."""

from __future__ import annotations

__all__ = ["Exchange"]


_KEEP_RAW = 65536  # bytes of raw reply kept to recover an unframed body (the node's errors are small)


class Exchange:
    """The reading of one reply, under a byte limit.

    httptools calls the ``on_*`` methods from ``feed_data``; ``done`` turns
    true once: when the reply is complete, unreadable, too large, or the
    connection closed. When a chunked header is followed by bytes that are not
    chunk framing, parsing stops and the raw bytes after the headers are kept
    until the node closes: that is where the node puts its error JSON.
    """

    def __init__(self, limit: int) -> None:
        import httptools

        self.limit = limit
        self.done = False
        self.parser = httptools.HttpResponseParser(self)
        self.reason = b""
        self.header_list: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.raw: bytearray | None = bytearray()  # the first bytes as received, while they may be needed
        self.received = 0
        self.status = 0
        self.headers_done = False
        self.until_close = False  # no Content-Length, not chunked: the body ends when the node closes
        self.complete = False
        self.unframed = False
        self.too_large = False
        self.error: str | None = None

    def data_received(self, data: bytes) -> None:
        import httptools

        if self.complete or self.done and not self.unframed:
            return
        self.received += len(data)
        if self.received > self.limit:
            self.too_large = True
            self._abandon()
            return
        if self.raw is not None:
            self.raw += data
            if len(self.raw) > _KEEP_RAW and not self.unframed:
                self.raw = None
        if self.unframed:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.complete:
                return  # bytes after the reply's end: ignored, the connection is dropped anyway
            if self.headers_done and not self.chunks and self.raw is not None:
                self.unframed = True  # chunked declared, raw bytes follow: read them until the close
                self.error = "the body is not chunk-framed although the headers say chunked"
                return
            self.error = str(exc) or type(exc).__name__
            self._wake()
        except httptools.HttpParserUpgrade:
            self.error = "the node asked to switch protocols"
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.headers_done and self.until_close and not self.complete and self.error is None:
            self.complete = True
        self._wake()

    def _abandon(self) -> None:
        self.chunks, self.raw = [], None  # the caller drops the connection: not another byte is read
        self._wake()

    def _wake(self) -> None:
        self.done = True

    def body(self) -> bytes:
        if self.unframed and self.raw is not None:
            at = bytes(self.raw).find(b"\r\n\r\n")
            return bytes(self.raw[at + 4:]) if at >= 0 else b""
        return b"".join(self.chunks)

    # -- httptools callbacks -----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:  # a second message after the reply: stop parsing (nobody asked for it)
            raise Extra()

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_list.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.status = self.parser.get_status_code()
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


class Extra(Exception):
    """Raised from a parser callback to stop at the end of the reply."""
