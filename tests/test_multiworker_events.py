"""Resumable SSE across processes (plexor.features.state.events): a 2025-11-25 session's dropped stream is
resumed through another server process, from the shared event store in the kernel's database.

Two real stateful `plexor serve --transport http` processes (one SQLite data directory, or PostgreSQL
with separate homes); raw HTTP on the wire, since what is tested is the transport's resumption.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import httpx
import pytest
from conformance.serving import Served, serve_http
from test_multiworker_notify import scratch_database

SITE = str(Path(__file__).resolve().parent / "multihost" / "site")
ENV = {"PLEXOR_PLUGINS": "multihost", "PYTHONPATH": SITE}
SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _events(lines):
    """(id, message) of each SSE event read from ``lines``."""
    event_id, data = None, []
    for line in lines:
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            body = "\n".join(data)
            yield event_id, (json.loads(body) if body else None)
            event_id, data = None, []


def open_session(served: Served) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=served.base, timeout=30)
    reply = client.post("/mcp", headers=SSE, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "resume-test", "version": "0"}}})
    assert reply.status_code == 200, reply.text
    session = reply.headers["mcp-session-id"]
    headers = {**SSE, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    client.headers.update(headers)
    client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return client, session


def start_call_and_drop(client: httpx.Client, request_id: int, seconds: float, progress_seen: int,
                        token: str = "p") -> tuple[str, list]:
    """POST a slow call, read its stream until ``progress_seen`` progress events, then drop the connection."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "multihost_slow", "arguments": {"seconds": seconds}, "_meta": {"progressToken": token}}}
    got = []
    with client.stream("POST", "/mcp", json=body) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        last = None
        for event_id, message in _events(stream.iter_lines()):
            last = event_id or last
            if message and message.get("method") == "notifications/progress":
                got.append(message)
                if len(got) >= progress_seen:
                    break
    assert last is not None, "the stream carried no event ids: no event store"
    return last, got


def resume(served: Served, session: str, last: str) -> tuple[int, list]:
    """GET /mcp with Last-Event-ID on ``served``: (status, the messages until the call's answer or the end)."""
    headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": last,
               "MCP-Protocol-Version": "2025-11-25"}
    out = []
    with httpx.Client(base_url=served.base, timeout=30) as client, client.stream("GET", "/mcp", headers=headers) as stream:
        if stream.status_code != 200:
            return stream.status_code, []
        for _, message in _events(stream.iter_lines()):
            if message is not None:
                out.append(message)
                if "result" in message or "error" in message:
                    break
    return 200, out


def _resumes_through_the_other_process(a: Served, b: Served) -> None:
    client, session = open_session(a)
    with contextlib.closing(client):
        last, before = start_call_and_drop(client, 7, 3.0, 2)
        status, after = resume(b, session, last)  # the balancer sent the reconnection to the other process
        assert status == 200, "the other process did not resume the stream"
        progress = [m["params"]["progress"] for m in after if m.get("method") == "notifications/progress"]
        answer = after[-1]
        assert answer["id"] == 7 and answer["result"]["structuredContent"]["pid"] == a.proc.pid, answer
        assert progress and min(progress) > max(m["params"]["progress"] for m in before), (before, progress)
        # Another session cannot resume this one's stream, and an unknown event is not resumed either.
        other, other_session = open_session(a)
        with contextlib.closing(other):
            assert resume(b, other_session, last)[0] != 200
        assert resume(b, session, "999999999")[0] != 200
        # The process that holds the session resumes from the same store (the SDK's own path).
        last2, _ = start_call_and_drop(client, 8, 1.5, 1)
        status, again = resume(a, session, last2)
        assert status == 200 and again[-1]["id"] == 8 and "result" in again[-1]


def test_a_dropped_stream_resumes_through_another_process_on_one_sqlite_data_dir(tmp_path):
    env = {**ENV, "PLEXOR_EVENT_STORE": "shared"}
    with serve_http(tmp_path, env=env) as a, serve_http(tmp_path, env=env) as b:
        _resumes_through_the_other_process(a, b)


@pytest.mark.postgres
def test_a_dropped_stream_resumes_through_another_host_on_postgres(tmp_path):
    with scratch_database() as url:  # no shared disk: the event store is shared by default on PostgreSQL
        env = {**ENV, "PLEXOR_DATABASE_URL": url}
        with serve_http(tmp_path / "a", env=env) as a, serve_http(tmp_path / "b", env=env) as b:
            _resumes_through_the_other_process(a, b)


def test_in_memory_the_other_process_cannot_resume_and_sessions_never_see_each_others_events(tmp_path):
    with serve_http(tmp_path / "a", env=ENV) as a, serve_http(tmp_path / "b", env=ENV) as b:
        first, first_session = open_session(a)
        second, second_session = open_session(a)
        with contextlib.closing(first), contextlib.closing(second):
            last_first, _ = start_call_and_drop(first, 1, 1.5, 1, token="first")
            last_second, _ = start_call_and_drop(second, 1, 1.5, 1, token="second")  # the same request id
            assert resume(b, first_session, last_first)[0] == 404  # memory: only the process that wrote it
            status, replay = resume(a, second_session, last_second)
            assert status == 200 and replay[-1]["id"] == 1
            tokens = {m["params"]["progressToken"] for m in replay if m.get("method") == "notifications/progress"}
            assert tokens == {"second"}, tokens  # request id 1 of the first session is not part of this stream
            # An event id of the first session names no stream of the second: nothing of the first's is sent.
            status, crossed = resume(a, second_session, last_first)
            assert not any(m.get("params", {}).get("progressToken") == "first" for m in crossed), crossed


def test_a_bad_event_store_setting_is_refused(tmp_path):
    import subprocess
    import sys

    from conformance.serving import fixture_env

    proc = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0"],
                          env=fixture_env(tmp_path, PLEXOR_EVENT_STORE="redis"), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0 and "PLEXOR_EVENT_STORE='redis' is not a known event store" in proc.stderr, proc.stderr
