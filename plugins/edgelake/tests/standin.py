"""A stand-in EdgeLake node for tests and the benchmark.

It replays ``data/responses-2.txt`` — 157 replies captured byte for byte from
a real node (EdgeLake 1.4.2604, a copy of ``shared/reference/edgelake/``) —
exactly as captured: status lines (including the ones whose reason phrase is a
JSON error), the node's eight headers in their order, the chunk framing, the
raw JSON that follows a chunked header unframed, the headers-and-nothing
replies. Like the node it answers ONE request per connection and then closes
the socket (``Connection: close``); a second request pipelined on the same
connection is never answered.

Requests the capture does not hold are answered by the rules the capture
shows (see PROTOCOL.md, "Observed later"), with the node's headers and framing:

* ``sql``: from SQLite holding the captured tables (:mod:`standin_sql`), with
  the network-versus-local rules, table paging and empty-result forms;
  ``overrides`` replace any reply (bytes, or a function yielding pieces: huge
  replies for the ``max_reply_bytes`` tests);
* ``blockchain get TYPE|(T1, T2)|* [where k = v and ...] [bring.ip_port]``:
  from the captured ``blockchain get *`` policies; ``metadata_synced=False``
  answers every ``blockchain get`` with ``[]`` (a node still syncing);
* ``get columns ... format = json`` for any table; ``get data nodes`` filtered by
  dbms, table and company from the captured full list; a command sent to one
  ``IP:Port`` destination: the local answer wrapped as the node wraps it
  (``{"IP:Port" : {...}}`` for a JSON object, else ``\\r\\n[From Node IP:Port] ``);
* ``info table`` over POST: 200 with an empty body (the answer goes to the
  node's console), 155 with destination network, err 82 for partitions;
* the wrong HTTP method: 400 err 156; anything else: the status-line error 2;
* ``help ...`` replies come from ``data/responses-help.txt``, captured the same
  way (raw socket, byte for byte) from a real node of the same version; an
  unknown topic answers ``""``, an unknown command ``{}``, as that node does.

``data/responses-3.txt`` adds the replies recorded from a real node for issue 27 (its head says how
and when): partial replies ending in error 77, the node's wrong answers to the forms the plugin no
longer sends, the column types of its tables; ``StandIn(tcp_down=True)`` answers every network query
with the recorded error 21 (a node restarted while its TCP port was held).

It runs its own event loop in a thread, so synchronous code (the benchmark)
and async tests can use it alike. ``python standin.py`` runs it on its own.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from standin_replies import DATA, RESPONSES, Record, chunked, error, framed, load_records, norm, unframed
from standin_sql import COLUMNS, SqlNode, seed

HELP = DATA / "responses-help.txt"  # help replies, captured the same way from a real node for this plugin
ISSUE27 = DATA / "responses-3.txt"  # the replies of issue 27's cases, recorded from a real node (see its head)

__all__ = ["HELP", "ISSUE27", "RESPONSES", "Record", "Request", "StandIn", "free_port", "load_records"]


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


_GET_OK = ("sql ", "get ", "blockchain get", "blockchain read", "help", "query status", "job status", "file get",
           "test", "print")


@dataclass
class StandIn:
    """``with StandIn() as node: node.port`` — a replaying EdgeLake node on 127.0.0.1."""

    responses: Path = RESPONSES
    delays: dict[str, float] = field(default_factory=dict)  # command prefix -> seconds before answering
    delay: float = 0.0  # seconds before every reply: a node's own work per command (the benchmark's latencies)
    overrides: dict[str, bytes | Callable[[], Iterable[bytes]]] = field(default_factory=dict)  # command -> reply
    metadata_synced: bool = True  # False: every blockchain get answers [] (a node that has not synced yet)
    tcp_down: bool = False  # True: a node restarted while its TCP port was held (network queries: error 21)
    port: int = 0  # 0: any free port

    def __post_init__(self) -> None:
        self.records = load_records(self.responses) + (
            load_records(HELP) + load_records(ISSUE27) if self.responses == RESPONSES else [])
        self._by_key: dict[tuple[str, str, str, str], Record] = {}
        for r in self.records:
            variant = ("no-user-agent" if "without a User-Agent" in r.note else
                       "no-command" if "without a command header" in r.note else
                       "tcp-down" if r.note.startswith("error 21") else "")
            if "shortened" in r.note:  # not the whole reply: answered from SQLite instead
                continue
            self._by_key.setdefault((r.method, r.command, r.destination, variant), r)
        self.policies = json.loads(self._record("GET", "blockchain get *").body)
        self.requests: list[Request] = []
        self.connections = 0
        self.inflight = 0
        self.peak_inflight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._ready = threading.Event()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        seed(self._db)
        self.sql = SqlNode(self._db)

    def _record(self, method: str, command: str, destination: str = "") -> Record:
        return self._by_key[(method, command, destination, "")]

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> StandIn:
        self._thread = threading.Thread(target=self._run, name="edgelake-stand-in", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the stand-in node did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._db.close()

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
            loop.close()

    # -- one connection, one request, one reply, then close ----------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = b""
            if "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            req = Request(lines[0].split(" ", 1)[0], headers, body, conn)
            self.requests.append(req)
            self.inflight += 1
            self.peak_inflight = max(self.peak_inflight, self.inflight)
            try:
                if self.delay > 0:
                    await asyncio.sleep(self.delay)
                for prefix, seconds in self.delays.items():
                    if norm(req.command).startswith(prefix):
                        await asyncio.sleep(seconds)
                reply = self.answer(req)
            finally:
                self.inflight -= 1
            pieces = reply() if callable(reply) else (reply,)
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass

    # -- answers -----------------------------------------------------------------------------------
    def answer(self, req: Request) -> bytes | Callable[[], Iterable[bytes]]:
        """The raw reply to ``req`` (bytes, or a function yielding pieces for huge replies)."""
        command = norm(req.command)
        if command in self.overrides:
            return self.overrides[command]
        if "command" not in req.headers:
            return self._by_key[("GET", "", "", "no-command")].raw
        if "user-agent" not in req.headers:
            return self._by_key[("GET", "get status", "", "no-user-agent")].raw
        if req.method == "POST" and req.body and not command:
            try:
                payload = json.loads(req.body)
                command = norm(payload.get("command", ""))
                req.headers.setdefault("destination", payload.get("destination", ""))
            except (ValueError, AttributeError):
                pass
        dest = req.destination
        if self.tcp_down and dest and command.startswith("sql "):
            return self._by_key[("GET", 'sql mydb format = json "select count(*) from readings limit 100"', "network",
                                 "tcp-down")].raw
        rec = self._by_key.get((req.method, command, dest, ""))
        if rec is not None and (self.metadata_synced or not command.startswith("blockchain get")):
            return rec.raw
        method = req.method.lower()
        get_ok = command.startswith(_GET_OK) or command in ("get", "help")
        if req.method == "GET" and not get_ok or req.method == "POST" and command.startswith(("get ", "help")):
            return framed("400 Bad Request", "json", error(156, "Wrong HTTP method used", method))
        if command.startswith("sql "):
            if dest and dest != "network" and not self._destination_ok(dest):
                return unframed("200 OK", error(20, "IP and Port of destination servers are not properly provided"))
            kind, payload, ctype = self.sql.answer(command, network=bool(dest))
            if kind == "status400":
                return unframed(f"400 {payload.decode()}", payload)
            if kind == "unframed200":
                return unframed("200 OK", payload, ctype)
            return chunked(ctype, payload)
        if command.startswith("info table "):
            return self._info_table(command, dest)
        if dest == "network":
            return unframed("200 OK", error(155, "Failed to determine destination node", method))
        if dest and dest != "local":
            return self._relayed(req, command, dest)
        if command.startswith("blockchain get"):
            return self._blockchain_get(command)
        if command.startswith("get columns "):
            return self._columns(command)
        if command.startswith("get data nodes "):
            return self._data_nodes(command)
        if command.startswith("help"):
            return self._help(command)
        return unframed(f"400 {error(2, 'Error Command Structure', method).decode()}", error(2, "Error Command Structure", method))

    @staticmethod
    def _destination_ok(dest: str) -> bool:
        parts = [p.strip() for p in dest.split(",")]
        return len(parts) == len(set(parts)) and all(re.fullmatch(r"[\w.-]+:\d+", p) for p in parts)

    def _relayed(self, req: Request, command: str, dest: str) -> bytes:
        if not self._destination_ok(dest):
            return unframed("200 OK", error(20, "IP and Port of destination servers are not properly provided"))
        local = self.answer(Request(req.method, {**req.headers, "destination": ""}, req.body, req.connection))
        assert isinstance(local, bytes)
        status = local.split(b"\r\n", 1)[0]
        body = local.split(b"\r\n\r\n", 1)[1]
        if not status.startswith(b"HTTP/1.1 200") or b"Transfer-Encoding: chunked" in local.split(b"\r\n\r\n")[0]:
            return local
        chunks = []
        for one in dest.split(","):
            one = one.strip()
            text = body.decode()
            if text.startswith("{"):
                chunks.append(f'{{"{one}" : {text}}}'.encode())
            else:
                chunks.append(f"\r\n[From Node {one}] ".encode() + body)
        return chunked("text/json", chunks)

    def _info_table(self, command: str, dest: str) -> bytes:
        parts = command.split()
        if len(parts) < 5:
            return unframed(f"400 {error(2, 'Error Command Structure', 'post').decode()}", error(2, "Error Command Structure", "post"))
        if dest == "network":
            return unframed("200 OK", error(155, "Failed to determine destination node", "post"))
        if dest:
            return chunked("text/json", [f"\r\n[From Node {dest}] ".encode()])
        if parts[4] == "partitions":
            err = error(82, "Missing partition declaration", "post",
                        local_msg=f"Missing 'partition' declaration for table '{parts[2]}.{parts[3]}'")
            return unframed(f"400 {err.decode()}", err)
        return framed("200 OK", "text", b"")  # the answer is printed on the node's console only

    def _blockchain_get(self, command: str) -> bytes:
        m = re.match(r"^blockchain get (\*|\w+|\([\w\s,]+\))(?: where (.+?))?(?: (bring.*))?$", command)
        if not m:
            return unframed(f"400 {error(2, 'Error Command Structure').decode()}", error(2, "Error Command Structure"))
        if not self.metadata_synced:
            return framed("200 OK", "text/json", b"[]")
        kinds = {k.strip() for k in m.group(1).strip("()").split(",")}
        policies = [p for p in self.policies if "*" in kinds or next(iter(p)) in kinds]
        if m.group(2):
            for cond in re.split(r"\s+and\s+", m.group(2)):
                cm = re.match(r'^(\w+)\s*=\s*"?([^"]*?)"?$', cond.strip())
                if not cm:
                    return unframed(f"400 {error(2, 'Error Command Structure').decode()}", error(2, "Error Command Structure"))
                policies = [p for p in policies if str(next(iter(p.values())).get(cm.group(1))) == cm.group(2)]
        bring = m.group(3)
        if bring is None:
            return framed("200 OK", "text/json", json.dumps(policies).encode())
        if bring == "bring.ip_port":
            addresses = [f"{v['ip']}:{v['port']}" for p in policies for v in p.values() if "ip" in v and "port" in v]
            return framed("200 OK", "text", ",".join(addresses).encode())
        if bring == "bring.json.children":
            return framed("200 OK", "text/json", b"[]")
        return unframed(f"400 {error(2, 'Error Command Structure').decode()}", error(2, "Error Command Structure"))

    def _columns(self, command: str) -> bytes:
        m = re.match(r"^get columns where dbms = (\w+) and table = (\w+) and format = json$", command)
        if not m:
            return unframed(f"400 {error(2, 'Error Command Structure').decode()}", error(2, "Error Command Structure"))
        if m.group(1) != "mydb" or m.group(2) not in COLUMNS:
            err = error(132, "Local table not declared in blockchain")
            return unframed(f"400 {err.decode()}", err)
        return framed("200 OK", "text/json", json.dumps(dict(COLUMNS[m.group(2)])).encode())

    def _data_nodes(self, command: str) -> bytes:
        """The captured full list, filtered as a real node filters it (company may come last, quoted or not)."""
        m = re.match(r'^get data nodes where dbms = (\S+) and table = (\S+) and format = json(?: and company = "?([^"]*)"?)?$',
                     command)
        if not m:
            return unframed(f"400 {error(2, 'Error Command Structure').decode()}", error(2, "Error Command Structure"))
        rows = json.loads(self._record("GET", "get data nodes where dbms = * and table = * and format = json").content)
        for key, want in (("DBMS", m.group(1)), ("Table", m.group(2)), ("Company", m.group(3))):
            if want not in (None, "*"):
                rows = [r for r in rows if r[key] == want]
        return framed("200 OK", "text/json", json.dumps(rows).encode())

    def _help(self, command: str) -> bytes:
        # What the real node answered for a topic or a command it does not know (responses-help.txt).
        if command.startswith("help index "):
            return framed("200 OK", "text", b'""')
        return framed("200 OK", "text/json", b"{}")


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening (for the node-is-down tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":  # pragma: no cover - handy for poking at it with curl; the benchmark runs it so
    import argparse

    ap = argparse.ArgumentParser(description="A stand-in EdgeLake node replaying captured replies.")
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
