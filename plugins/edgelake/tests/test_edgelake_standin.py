"""The stand-in node is faithful: the shipped copy of the recording, and byte-for-byte replay."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path

import pytest
from standin import RESPONSES, StandIn, load_records

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference" / "edgelake" / "responses.txt"


def test_shipped_copy_equals_the_shared_reference() -> None:
    if not SHARED.exists():
        pytest.skip(f"the shared reference {SHARED} is not beside this checkout")
    assert RESPONSES.read_bytes() == SHARED.read_bytes()


def test_recording_has_its_33_exchanges() -> None:
    records = load_records()
    assert len(records) == 33
    assert records[0].method == "GET" and records[0].command == "get status" and records[0].body == b"el-test@127.0.0.1:32048 running"
    assert [r.command for r in records if r.method == "POST"] == ["blockchain reload metadata"]
    network = [r for r in records if r.destination == "network"]
    assert len(network) == 8 and all(r.command.startswith("sql ") for r in network)
    # Only the two replies whose storage paths were shortened by redaction disagree with their Content-Length.
    assert [r.command for r in records if r.redacted] == ["get databases", "get databases where format = json"]


def _raw_exchange(port: int, request: bytes) -> bytes:
    """Send one request on a fresh socket and read until the stand-in closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        s.settimeout(0.5)
        data = b""
        while True:
            try:
                part = s.recv(65536)
            except TimeoutError:
                break
            if not part:
                break
            data += part
    return data


def _request(command: str, method: str = "GET", destination: str = "") -> bytes:
    extra = f"destination: {destination}\r\n" if destination else ""
    return (f"{method} / HTTP/1.1\r\nHost: x\r\nUser-Agent: AnyLog/1.23\r\ncommand: {command}\r\n{extra}"
            "Connection: close\r\n\r\n").encode()


@pytest.mark.parametrize("index", range(33))
def test_every_recorded_reply_is_replayed_byte_for_byte(node: StandIn, index: int) -> None:
    rec = node.records[index]
    got = _raw_exchange(node.port, _request(rec.command, rec.method, rec.destination))
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head + b"\r\n" == rec.head or rec.redacted, "status line and headers must be the recorded bytes"
    assert head.split(b"\r\n")[0] == rec.status_line
    if rec.chunked and rec.body:
        size, _, after = rest.partition(b"\r\n")
        assert int(size, 16) == len(rec.body)
        assert after == rec.body + b"\r\n0\r\n\r\n"
    elif rec.chunked:
        assert rest == b""  # unframed: no chunk at all, the connection just closes
    else:
        assert rest == rec.body


def test_malformed_status_line_reaches_the_wire_unchanged(node: StandIn) -> None:
    got = _raw_exchange(node.port, _request("get nonsense command"))
    assert got.startswith(b'HTTP/1.1 400 {"method": "get", "node": "127.0.0.1", "err_code": 2, '
                          b'"err_text": "Error Command Structure"}\r\n')
    assert got.endswith(b"Transfer-Encoding: chunked\r\n\r\n")


def test_sql_answers_from_sqlite_match_the_recorded_formats(node: StandIn) -> None:
    """Unrecorded queries are answered from SQLite in the node's formats; checked against recorded ones."""
    recorded = {(r.command, r.destination): r.body for r in node.records}
    table_cmd = 'sql mydb format = table "select device, value from t limit 3"'
    # Answer the recorded table query from SQLite (bypassing the replay) and compare bytes.
    node._by_key.pop(("GET", table_cmd, "network"))
    got = _raw_exchange(node.port, _request(table_cmd, destination="network"))
    body = got.partition(b"\r\n\r\n")[2]
    size, _, after = body.partition(b"\r\n")
    assert after[: int(size, 16)] == recorded[(table_cmd, "network")]
    group = 'sql mydb format = json "select device, count(*), avg(value) from t group by device order by device"'
    node._by_key.pop(("GET", group, "network"))
    got = _raw_exchange(node.port, _request(group, destination="network"))
    body = got.partition(b"\r\n\r\n")[2].partition(b"\r\n")[2]
    assert body.startswith(recorded[(group, "network")])


def test_seeded_rows_are_the_recorded_rows(node: StandIn) -> None:
    got = _raw_exchange(node.port, _request('sql mydb format = json "select * from t where value > 0"'))
    body = got.partition(b"\r\n\r\n")[2].partition(b"\r\n")[2]
    rows = json.loads(body[: body.rindex(b"}") + 1])["Query"]
    recorded = json.loads(next(r.body for r in node.records if r.command == 'sql mydb format = json "select * from t"'))
    assert rows == recorded["Query"]


def test_big_table_rows_are_generated() -> None:
    with StandIn(big_rows=2500) as n:
        got = _raw_exchange(n.port, _request('sql mydb format = json "select count(*) from big"', destination="network"))
    assert b'"count(*)":2500' in got


def test_a_delay_holds_every_reply_back() -> None:
    with StandIn(delay=0.05) as slow:
        conn = http.client.HTTPConnection("127.0.0.1", slow.port, timeout=5)
        for command in ("get status", "blockchain get table"):
            started = time.perf_counter()
            conn.request("GET", "/", headers={"command": command, "User-Agent": "AnyLog/1.23"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read()
            assert time.perf_counter() - started >= 0.05
        conn.close()
