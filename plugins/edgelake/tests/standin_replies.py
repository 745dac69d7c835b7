"""The stand-in's reply bytes: the capture's records, and replies framed the way the node frames them."""

from __future__ import annotations

import email.utils
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
RESPONSES = DATA / "responses-2.txt"

__all__ = ["Record", "chunked", "error", "framed", "load_records", "norm", "unframed"]


@dataclass
class Record:
    """One captured exchange: the request and the reply's exact bytes."""

    method: str
    command: str
    destination: str
    note: str
    raw: bytes

    @property
    def status_line(self) -> bytes:
        return self.raw.split(b"\r\n", 1)[0]

    @property
    def head(self) -> bytes:
        return self.raw.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"

    @property
    def body(self) -> bytes:
        """Everything after the headers, as it came off the wire (chunk framing included)."""
        return self.raw.split(b"\r\n\r\n", 1)[1]

    @property
    def content(self) -> bytes:
        """The body a client reads: chunks joined when well framed, else the bytes as sent."""
        body = self.body
        if b"transfer-encoding: chunked" not in self.head.lower():
            return body
        out, at = b"", 0
        while True:
            end = body.find(b"\r\n", at)
            if end < 0 or not re.fullmatch(rb"[0-9a-f]+", body[at:end]):
                return body if not out else out  # not chunk-framed: the raw bytes are the body
            size = int(body[at:end], 16)
            if size == 0:
                return out
            out += body[end + 2:end + 2 + size]
            at = end + 2 + size + 2


def load_records(path: Path = RESPONSES) -> list[Record]:
    """The capture as :class:`Record` objects, in file order (each entry ends with three newlines)."""
    raw = path.read_bytes()
    records = []
    for part in re.split(rb"(?m)^### ", raw)[1:]:
        title, rest = part.split(b"\n", 1)
        if not rest.endswith(b"\n\n\n"):
            raise ValueError(f"entry {title!r} does not end with the three-newline separator")
        text = title.decode()
        note = ""
        if "## note:" in text:
            text, note = (s.strip() for s in text.split("## note:", 1))
        m = re.match(r"^(GET|POST|PUT) command: ?(.*)$", text)
        if not m:
            raise ValueError(f"unexpected entry title {title!r}")
        command, _, destination = m.group(2).partition(" destination: ")
        records.append(Record(m.group(1), " ".join(command.split()), destination.strip(), note, rest[:-3]))
    return records


def norm(command: str) -> str:
    return " ".join(command.split())


def _headers(ctype: str, framing: str) -> str:
    return (f"Server: BaseHTTP/0.6 Python/3.11.7\r\nDate: {email.utils.formatdate(usegmt=True)}\r\n"
            f"Content-Type: {ctype}\r\nAccess-Control-Allow-Origin: *\r\nVary: Origin\r\n"
            f"Access-Control-Expose-Headers: *\r\n{framing}\r\nConnection: close\r\n\r\n")


def framed(status: str, ctype: str, body: bytes) -> bytes:
    """A Content-Length reply, as the node sends ``get`` and ``blockchain get`` answers."""
    return f"HTTP/1.1 {status}\r\n".encode() + _headers(ctype, f"Content-Length: {len(body)}").encode() + body


def chunked(ctype: str, chunks: Iterable[bytes], status: str = "200 OK") -> bytes:
    """A well-framed chunked reply; with no chunks, the headers alone (the node's empty body: no 0 chunk)."""
    parts = [f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks]
    head = f"HTTP/1.1 {status}\r\n".encode() + _headers(ctype, "Transfer-Encoding: chunked").encode()
    return head + b"".join(parts) + (b"0\r\n\r\n" if parts else b"")


def unframed(status: str, body: bytes, ctype: str = "text/json") -> bytes:
    """Chunked declared, then raw bytes with no chunk framing (the node's status-line and 155/20 errors)."""
    return f"HTTP/1.1 {status}\r\n".encode() + _headers(ctype, "Transfer-Encoding: chunked").encode() + body


def error(code: int, text: str, method: str = "get", **extra: Any) -> bytes:
    return json.dumps({"method": method, "node": "127.0.0.1", "err_code": code, "err_text": text, **extra}).encode()
