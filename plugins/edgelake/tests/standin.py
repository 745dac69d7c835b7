"""A stand-in EdgeLake node for tests and the benchmark.

It replays the raw replies recorded from a real node (``data/responses.txt``)
byte for byte: the same status lines (including the ones whose reason phrase
is a JSON error), the same headers and the same bodies. Commands the
recording does not hold are answered the way the node answers them: ``sql``
from a real SQLite database seeded with the recorded rows, formatted like the
node's replies; an unknown command with the node's malformed error 2.

Wire details, and the only places it departs from the file:

* Bodies recorded under ``Transfer-Encoding: chunked`` were stored
  de-chunked; they are sent as one chunk plus the terminating chunk. A
  chunked reply whose recorded body is empty is sent *unframed*: the headers,
  then the connection closes, which is what made requests raise
  ``ChunkedEncodingError`` and curl exit 56 against the real node.
* Two recorded replies (``get databases`` and ``get databases where format =
  json``) had their storage paths shortened when the recording was redacted,
  so their ``Content-Length`` no longer matches the body. The stand-in sends
  the recorded body with a corrected length (see ``Record.redacted``).
* ``info table`` answered over POST is not in the recording; the stand-in
  synthesises it from SQLite (marked by the header ``X-Stand-In: synthesised``).

It runs its own event loop in a thread, so synchronous code (the benchmark)
and async tests can use it alike.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
RESPONSES = DATA / "responses.txt"

__all__ = ["Record", "StandIn", "free_port", "load_records"]


@dataclass
class Record:
    """One recorded exchange: the request that was sent and the raw reply."""

    method: str
    command: str
    destination: str
    head: bytes  # status line and headers, each ending in CRLF, without the blank line
    body: bytes  # as recorded (de-chunked)

    @property
    def status_line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]

    @property
    def chunked(self) -> bool:
        return b"transfer-encoding: chunked" in self.head.lower()

    @property
    def content_length(self) -> int | None:
        m = re.search(rb"(?im)^content-length:\s*(\d+)", self.head)
        return int(m.group(1)) if m else None

    @property
    def redacted(self) -> bool:
        """True when path redaction made the recorded Content-Length disagree with the body."""
        n = self.content_length
        return n is not None and n != len(self.body)

    def wire(self) -> tuple[bytes, bool]:
        """The bytes to send and whether the connection must close afterwards."""
        if self.chunked:
            if not self.body:
                return self.head + b"\r\n", True  # unframed: no chunk at all, then close
            chunk = f"{len(self.body):x}\r\n".encode() + self.body + b"\r\n0\r\n\r\n"
            return self.head + b"\r\n" + chunk, False
        head = self.head
        if self.redacted:
            head = re.sub(rb"(?im)^(content-length:\s*)\d+", lambda m: m.group(1) + str(len(self.body)).encode(), head)
        return head + b"\r\n" + self.body, False


def _split_body(rest: bytes, content_length: int | None) -> bytes:
    if content_length is not None and len(rest) >= content_length:
        return rest[:content_length]
    # The recorder wrote the body, a newline when the body did not end with one, then two more.
    if rest.endswith(b"\n\n"):
        rest = rest[:-2]
    if rest.endswith(b"\n") and not rest.endswith(b"\r\n"):
        rest = rest[:-1]
    return rest


def load_records(path: Path = RESPONSES) -> list[Record]:
    """Parse the recording into :class:`Record` objects, in file order."""
    raw = path.read_bytes()
    records = []
    for part in re.split(rb"(?m)^### ", raw)[1:]:
        title, rest = part.split(b"\n", 1)
        m = re.match(rb"^(GET|POST|PUT) command: (.*)$", title)
        if not m:
            raise ValueError(f"unexpected record title {title!r}")
        method, tail = m.group(1).decode(), m.group(2).decode()
        if " destination: " in tail:
            command, destination = tail.rsplit(" destination: ", 1)
        else:
            command, destination = tail[:-1] if tail.endswith(" ") else tail, ""
        head, body_part = rest.split(b"\r\n\r\n", 1)
        rec = Record(method, command.strip(), destination.strip(), head + b"\r\n", b"")
        rec.body = _split_body(body_part, rec.content_length)
        records.append(rec)
    return records


def _norm(command: str) -> str:
    return " ".join(command.split())


# -- the rows the real node held (its "select * from t" reply) ------------------------------------

def _recorded_rows(records: list[Record]) -> list[dict[str, Any]]:
    for rec in records:
        if rec.command == 'sql mydb format = json "select * from t"' and not rec.destination:
            return json.loads(rec.body)["Query"]
    raise ValueError("the recording has no 'select * from t' reply")


SCHEMA = {
    "t": "row_id INTEGER PRIMARY KEY, insert_timestamp TEXT, tsd_name TEXT, tsd_id INTEGER, "
         "timestamp TEXT, device TEXT, value REAL",
    "big": "row_id INTEGER PRIMARY KEY, insert_timestamp TEXT, tsd_name TEXT, tsd_id INTEGER, "
           "timestamp TEXT, device TEXT, value INTEGER",
}


def seed_database(path: str, records: list[Record], big_rows: int = 0) -> None:
    """Create the node's ``mydb`` as SQLite: ``t`` with the recorded rows, ``big`` with ``big_rows`` rows."""
    con = sqlite3.connect(path)
    with con:
        for table, cols in SCHEMA.items():
            con.execute(f"DROP TABLE IF EXISTS {table}")
            con.execute(f"CREATE TABLE {table} ({cols})")
        rows = _recorded_rows(records)
        con.executemany(
            "INSERT INTO t VALUES (:row_id, :insert_timestamp, :tsd_name, :tsd_id, :timestamp, :device, :value)", rows
        )
        con.executemany(
            "INSERT INTO big VALUES (?, '2026-11-22 06:50:44.372245', '110', 1, ?, ?, ?)",
            ((i, f"2026-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}", f"d{i % 7:02d}", i)
             for i in range(1, big_rows + 1)),
        )
    con.close()


_SQL_CMD = re.compile(
    r'^sql\s+(?P<dbms>\S+)\s+(?P<opts>(?:format\s*=\s*[\w:]+)(?:\s+and\s+stat\s*=\s*\w+)?)\s+"(?P<sql>.*)"$', re.S
)


def _error(err_code: int, err_text: str, **extra: Any) -> dict[str, Any]:
    return {"method": "get", "node": "127.0.0.1", "err_code": err_code, "err_text": err_text, **extra}


@dataclass
class Request:
    method: str
    headers: dict[str, str]
    body: bytes
    connection: int  # which TCP connection carried it

    @property
    def command(self) -> str:
        return self.headers.get("command", "")

    @property
    def destination(self) -> str:
        return self.headers.get("destination", "")


@dataclass
class StandIn:
    """``with StandIn() as node: node.port`` — a replaying EdgeLake node on 127.0.0.1."""

    responses: Path = RESPONSES
    big_rows: int = 0
    db_path: str | None = None
    delays: dict[str, float] = field(default_factory=dict)  # command prefix -> seconds before answering
    delay: float = 0.0  # seconds before every reply: a node's own work per command (the benchmark's latencies)
    overrides: dict[str, bytes] = field(default_factory=dict)  # command -> raw reply (closes afterwards)
    port: int = 0  # 0: any free port

    def __post_init__(self) -> None:
        self.records = load_records(self.responses)
        self._by_key = {(r.method, _norm(r.command), r.destination): r for r in self.records}
        self.requests: list[Request] = []
        self.connections = 0
        self.inflight = 0
        self.peak_inflight = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._ready = threading.Event()
        self._db: sqlite3.Connection | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> StandIn:
        if self.db_path is None:
            self.db_path = ":memory:"
        if self.db_path == ":memory:":
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
            self._seed_memory()
        else:
            seed_database(self.db_path, self.records, self.big_rows)
            self._db = sqlite3.connect(self.db_path, check_same_thread=False)
        self._thread = threading.Thread(target=self._run, name="edgelake-stand-in", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the stand-in node did not start")
        return self

    def _seed_memory(self) -> None:
        assert self._db is not None
        import os
        import tempfile

        fd, tmp = tempfile.mkstemp(suffix=".db")
        os.close(fd)
        try:
            seed_database(tmp, self.records, self.big_rows)
            disk = sqlite3.connect(tmp)
            disk.backup(self._db)
            disk.close()
        finally:
            os.unlink(tmp)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        if self._db is not None:
            self._db.close()

    def drop_connections(self) -> None:
        """Close every open connection, as a node does with idle keep-alive connections."""
        assert self._loop is not None
        done = threading.Event()

        def close_all() -> None:
            for w in list(self._writers):
                w.close()
            done.set()

        self._loop.call_soon_threadsafe(close_all)
        done.wait(5)

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        loop.run_until_complete(serve())
        try:
            loop.run_forever()
        finally:
            self._server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    # -- one connection ----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ", 1)[0]
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = b""
                if "content-length" in headers:
                    body = await reader.readexactly(int(headers["content-length"]))
                req = Request(method, headers, body, conn)
                self.requests.append(req)
                self.inflight += 1
                self.peak_inflight = max(self.peak_inflight, self.inflight)
                try:
                    if self.delay > 0:
                        try:
                            await asyncio.sleep(self.delay)
                        except asyncio.CancelledError:
                            return
                    for prefix, seconds in self.delays.items():
                        if _norm(req.command).startswith(prefix):
                            try:
                                await asyncio.sleep(seconds)
                            except asyncio.CancelledError:
                                return
                    data, close = self.answer(req)
                finally:
                    self.inflight -= 1
                writer.write(data)
                try:
                    await writer.drain()
                except (ConnectionError, asyncio.CancelledError):
                    return
                if close or headers.get("connection", "").lower() == "close":
                    return
        finally:
            self._writers.discard(writer)
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass

    # -- answers -----------------------------------------------------------------------------------
    def answer(self, req: Request) -> tuple[bytes, bool]:
        """The raw reply to ``req`` and whether to close the connection after it."""
        command = _norm(req.command)
        if command in self.overrides:
            return self.overrides[command], True
        if req.method == "POST" and req.body and not command:
            try:
                payload = json.loads(req.body)
                command = _norm(payload.get("command", ""))
                req.headers.setdefault("destination", payload.get("destination", ""))
            except (ValueError, AttributeError):
                pass
        rec = self._by_key.get((req.method, command, req.destination))
        if rec is not None:
            return rec.wire()
        if req.method == "GET" and not _get_allowed(command):
            return _framed(400, "Bad Request", "json", json.dumps(_error(156, "Wrong HTTP method used")).encode()), False
        if command.startswith("sql "):
            return self._sql(command, req)
        if req.method == "POST" and command.startswith("info table "):
            return self._info_table(command)
        if command.startswith("blockchain get "):
            return self._blockchain_get(command)
        if req.method == "POST" and command == "blockchain reload metadata":
            return self._by_key[("POST", command, "")].wire()
        return _malformed(_error(2, "Error Command Structure")), True

    def _sql(self, command: str, req: Request) -> tuple[bytes, bool]:
        m = _SQL_CMD.match(command)
        network = req.destination == "network"
        if not m:
            return _malformed(_error(2, "Error Command Structure")), True
        opts = " ".join(m.group("opts").split())
        fmt = re.search(r"format\s*=\s*([\w:]+)", opts).group(1)  # type: ignore[union-attr]
        if fmt not in ("json", "table", "json:list"):
            return _chunked(200, "text/json", json.dumps(_error(175, "Wrong value assigned to a key")).encode()), False
        if m.group("dbms") != "mydb":
            if network:
                return _chunked(200, "text/json", json.dumps(_error(45, "Failed to load table metadata from blockchain")).encode()), False
            return _malformed(_error(29, "No metadata info", local_msg=f"DBMS '{m.group('dbms')}' not defined")), True
        sql = m.group("sql")
        table = re.search(r"\bfrom\s+(\w+)", sql, re.I)
        if table and table.group(1) not in SCHEMA:
            if network:
                return _chunked(200, "text/json", json.dumps(_error(45, "Failed to load table metadata from blockchain")).encode()), False
            msg = f"Table '{table.group(1)}' in DBMS 'mydb' not defined (using 'sqlite')"
            return _malformed(_error(29, "No metadata info", local_msg=msg)), True
        assert self._db is not None
        try:
            if not re.match(r"(?is)^\s*select\b", sql) or ";" in sql:
                raise sqlite3.OperationalError("not a single select")
            cur = self._db.execute(sql)
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, row, strict=False)) for row in cur.fetchall()]
        except sqlite3.Error:
            if network:
                return _chunked(200, "text/json", b""), True  # the node's empty 200
            return _malformed(_error(155, "Failed to process SQL")), True
        nodes = 1 if network else 0
        if fmt == "table":
            return _chunked(200, "text", _table_text(names, rows, nodes)), False
        if fmt == "json:list" or "stat = false" in opts:
            body = "[" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "]"
            return _chunked(200, "text/json", body.encode()), False
        body = ('{"Query":[' + ",".join(json.dumps(r, separators=(",", ":")) for r in rows) + "],\n"
                f'"Statistics":[{{"Count": {len(rows)},"Time":"00:00:00","Nodes": {nodes}}}]}}')
        return _chunked(200, "text/json", body.encode()), False

    def _info_table(self, command: str) -> tuple[bytes, bool]:
        parts = command.split()
        if len(parts) < 5:
            return _malformed(_error(2, "Error Command Structure")), True
        dbms, table, what = parts[2], parts[3], " ".join(parts[4:])
        exists = dbms == "mydb" and table in SCHEMA
        if what == "exists":
            body = b"true" if exists else b"false"
        elif not exists:
            return _malformed(_error(29, "No metadata info")), True
        elif what == "columns":
            assert self._db is not None
            cols = [{"name": r[1], "type": r[2].lower()} for r in self._db.execute(f"PRAGMA table_info({table})")]
            body = json.dumps(cols).encode()
        else:
            body = json.dumps([{"table": table, "partition": "none"}]).encode()
        return _framed(200, "OK", "text/json", body, extra=b"X-Stand-In: synthesised\r\n"), False

    def _blockchain_get(self, command: str) -> tuple[bytes, bool]:
        # Policies come from the recorded "blockchain get table"; a where clause of key = value pairs
        # (joined by and) filters them, as the node does; anything else is the node's error 2.
        m = re.match(r"^blockchain get (\*|\w+)(?: where (.+?))?(?: bring(.*))?$", command)
        if not m:
            return _malformed(_error(2, "Error Command Structure")), True
        policies = json.loads(self._by_key[("GET", "blockchain get table", "")].body)
        kind = m.group(1)
        if kind not in ("*", "table"):
            policies = []
        if m.group(2):
            for cond in re.split(r"\s+and\s+", m.group(2)):
                cm = re.match(r'^(\w+)\s*=\s*"?([^"]*)"?$', cond.strip())
                if not cm:
                    return _malformed(_error(2, "Error Command Structure")), True
                key, value = cm.groups()
                policies = [p for p in policies if str(next(iter(p.values())).get(key)) == value]
        if m.group(3) is not None:
            fields = re.findall(r"\[\s*'?(\w+|\*)'?\s*\]", m.group(3))
            out = []
            for p in policies:
                value: Any = p
                for f in fields:
                    value = next(iter(value.values())) if f == "*" else value.get(f) if isinstance(value, dict) else None
                out.append(value)
            text = "\r\n".join("" if v is None else str(v) for v in out)
            return _framed(200, "OK", "text", text.encode()), False
        return _framed(200, "OK", "text/json", json.dumps(policies).encode()), False


def _get_allowed(command: str) -> bool:
    return command.startswith(("sql ", "get ", "blockchain get", "blockchain read", "help", "query status",
                               "job status", "file get", "test", "print")) or command in ("get", "help")


def _framed(status: int, reason: str, ctype: str, body: bytes, extra: bytes = b"") -> bytes:
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n".encode()
            + extra + b"\r\n" + body)


def _chunked(status: int, ctype: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    if not body:
        return head
    return head + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


def _malformed(error: dict[str, Any]) -> bytes:
    """The node's broken error reply: the JSON in the reason phrase, chunked, no body, then close."""
    return (f"HTTP/1.1 400 {json.dumps(error)}\r\nContent-Type: text/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()


def _table_text(names: list[str], rows: list[dict[str, Any]], nodes: int) -> bytes:
    cells = [[("" if r[n] is None else str(r[n])) for n in names] for r in rows]
    numeric = [all(isinstance(r[n], (int, float)) for r in rows) and bool(rows) for n in names]
    widths = [max([len(n)] + [len(c[i]) for c in cells]) for i, n in enumerate(names)]
    out = ["", " ".join(n.ljust(w) for n, w in zip(names, widths, strict=False)).rstrip(),
           " ".join("-" * w for w in widths) + " "]
    for c in cells:
        out.append(" ".join((v.rjust(w) if num else v.ljust(w)) for v, w, num in zip(c, widths, numeric, strict=False)) + " ")
    stats = (f'{{"Statistics":[{{"Count": {len(rows)},\n                "Time":"00:00:00",\n'
             f'                "Nodes": {nodes}}}]}}')
    return ("\n".join(out) + "\n\n" + stats).encode()


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening (for the node-is-down tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":  # pragma: no cover - handy for poking at it with curl; the benchmark runs it so
    import argparse

    ap = argparse.ArgumentParser(description="A stand-in EdgeLake node replaying recorded replies.")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    ap.add_argument("--delay", type=float, default=0.0,
                    help="seconds to wait before every reply, emulating a real node's work per command")
    ns = ap.parse_args()
    with StandIn(port=ns.port, delay=ns.delay) as node:
        print(f"stand-in EdgeLake node on {node.address}; delay {ns.delay * 1000:g} ms; Ctrl-C to stop", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
