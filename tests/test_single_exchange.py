"""A stateless POST answered in its own task (the ``direct`` feature), through a real `plexor serve`.

Each behaviour of the SDK's own entry that the faster path takes over is checked here from the wire:
the answer's shape and status, a notification turning the answer into an SSE stream, a silent
handler pinged, `--json-response`, a client that goes away cancelling its call, the `Mcp-Param-*`
check, and every refusal still the SDK's own (code, status and HTTP status).
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time

import pytest
from conformance.serving import fixture_env, healthz, serve_http
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "plexor-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2026-07-28"}


def _post(port: int, body: bytes | dict, headers: dict[str, str]) -> tuple[int, str, str]:
    """(HTTP status, content type, body text) of one POST /mcp; header values are sent as given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=body if isinstance(body, bytes) else json.dumps(body), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read().decode()
    finally:
        conn.close()


def _call(rid: int | str, name: str, arguments: dict, era: str = "2026-07-28", **meta: object
          ) -> tuple[dict, dict[str, str]]:
    """A tools/call POST of ``era``: 2026-07-28 with its envelope and routing headers; 2025-11-25 as the SDK's
    stateless mode takes it (the version header, no session)."""
    if era != "2026-07-28":
        body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        if meta:
            body["params"]["_meta"] = meta
        return body, {**HEADERS, "MCP-Protocol-Version": era}
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {**META, **meta}}}
    return body, {**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": name}


def _events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


def test_a_plain_call_gets_the_sdks_json_answer_and_statuses(tmp_path):
    with serve_http(tmp_path, "--stateless") as served:
        for rid in (7, "seven"):
            status, kind, text = _post(served.port, *_call(rid, "test_echo", {"text": "hi"}))
            answer = json.loads(text)
            assert (status, kind) == (200, "application/json"), (status, kind, text)
            assert list(answer) == ["jsonrpc", "id", "result"] and answer["id"] == rid, answer
            assert answer["result"]["structuredContent"] == {"text": "hi"}, answer
        body = {"jsonrpc": "2.0", "id": 8, "method": "nothing/here", "params": {"_meta": META}}
        status, kind, text = _post(served.port, body, {**HEADERS, "Mcp-Method": "nothing/here"})
        answer = json.loads(text)
        assert answer["error"]["code"] == METHOD_NOT_FOUND and answer["id"] == 8, answer
        assert status == ERROR_CODE_HTTP_STATUS[METHOD_NOT_FOUND] and kind == "application/json"


def test_every_refusal_is_still_the_sdks_own(tmp_path):
    with serve_http(tmp_path, "--stateless") as served:
        body, headers = _call(3, "test_echo", {"text": "hi"})
        future = {**body, "params": {**body["params"], "_meta": {
            **META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}
        cases = {
            "Mcp-Name disagrees": (body, {**headers, "Mcp-Name": "test_other"}, HEADER_MISMATCH),
            "the header's version is not the body's": (body, {**headers, "MCP-Protocol-Version": "2099-01-01"},
                                                        HEADER_MISMATCH),
            "an unserved version": (future, {**headers, "MCP-Protocol-Version": "2099-01-01"},
                                    UNSUPPORTED_PROTOCOL_VERSION),
            "not JSON": (b'{"jsonrpc": "2.0", "id": 3,', headers, PARSE_ERROR),
            "a batch": (json.dumps([body]).encode(), headers, INVALID_REQUEST),
            "a response posted": ({"jsonrpc": "2.0", "id": 3, "result": {}}, headers, INVALID_REQUEST),
            "a request id that is no id": ({**body, "id": [3]}, headers, INVALID_REQUEST),
        }
        for case, (sent, sent_headers, code) in cases.items():
            status, _kind, text = _post(served.port, sent, sent_headers)
            answer = json.loads(text)
            assert answer.get("error", {}).get("code") == code, (case, answer)
            assert status == ERROR_CODE_HTTP_STATUS[code], (case, status)
        for twice in ("Mcp-Name", "MCP-Protocol-Version"):  # a routing header sent twice: the SDK's refusal
            conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
            conn.putrequest("POST", "/mcp")
            for key, value in [*headers.items(), (twice, headers[twice])]:
                conn.putheader(key, value)
            raw = json.dumps(body).encode()
            conn.putheader("Content-Length", str(len(raw)))
            conn.endheaders(raw)
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            conn.close()
            assert resp.status == 400 and answer["error"]["code"] == HEADER_MISMATCH, (twice, answer)
            assert "more than once" in answer["error"]["message"], answer
        notification = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        assert _post(served.port, notification, {**HEADERS, "Mcp-Method": "notifications/cancelled"})[0] == 202
        assert _post(served.port, body, {**headers, "Content-Type": "text/plain"})[0] == 400
        assert _post(served.port, body, {**headers, "Accept": "text/html"})[0] == 406
        # a routing header with surrounding blanks is served as if sent without them (RFC 9110 section 5.5)
        status, _kind, text = _post(served.port, body, {**headers, "Mcp-Name": "  test_echo\t"})
        assert status == 200 and json.loads(text)["result"]["structuredContent"] == {"text": "hi"}, text


def test_mcp_param_headers_are_checked_against_the_arguments(tmp_path):
    with serve_http(tmp_path, "--stateless") as served:
        body, headers = _call(4, "test_header_echo", {"region": "eu-west"})
        status, _kind, text = _post(served.port, body, {**headers, "Mcp-Param-Region": "eu-west"})
        assert status == 200 and json.loads(text)["result"]["structuredContent"] == {"region": "eu-west"}, text
        for wrong in ({"Mcp-Param-Region": "us-east"}, {}):  # disagreeing, then missing
            status, _kind, text = _post(served.port, body, {**headers, **wrong})
            assert json.loads(text)["error"]["code"] == HEADER_MISMATCH and status == 400, (wrong, text)
        # a tool whose schema names no such header: a stray one is no disagreement
        body, headers = _call(5, "test_echo", {"text": "x"})
        assert _post(served.port, body, {**headers, "Mcp-Param-Region": "eu"})[0] == 200


ERAS = pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])


@ERAS
def test_a_notification_turns_the_answer_into_a_stream_and_json_response_drops_it(tmp_path, era):
    body, headers = _call(9, "test_tool_with_progress", {}, era, progressToken="tok-9")
    with serve_http(tmp_path, "--stateless") as served:
        status, kind, text = _post(served.port, body, headers)
    assert status == 200 and kind.startswith("text/event-stream"), (status, kind, text)
    events = _events(text)
    progress = [e for e in events if e.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [0, 50, 100], events
    assert all(p["params"]["progressToken"] == "tok-9" for p in progress) and "id" not in progress[0]
    assert events[-1]["id"] == 9 and events[-1]["result"]["structuredContent"] == {"done": True}, events[-1]
    with serve_http(tmp_path / "json", "--stateless", "--json-response") as served:
        status, kind, text = _post(served.port, body, headers)
    assert (status, kind) == (200, "application/json") and json.loads(text)["result"]["structuredContent"] == {
        "done": True}, text


@ERAS
def test_a_silent_call_is_pinged_as_a_stream(tmp_path, era):
    """Pinged on PLEXOR_SSE_PING_SECONDS: the SDK's own entries ping only every 15 s, so this also shows that
    stateless requests of both eras take plexor's entry."""
    body, headers = _call(10, "test_slow", {"seconds": 3.5}, era)  # pinged at about 1, 2 and 3 seconds
    with serve_http(tmp_path, "--stateless", env={"PLEXOR_SSE_PING_SECONDS": "1"}) as served:
        status, kind, text = _post(served.port, body, headers)
        assert status == 200 and kind.startswith("text/event-stream"), (status, kind, text)
        assert text.count(": ping") >= 2 and text.index(": ping") < text.index('"result"'), text
        assert _events(text)[-1]["id"] == 10 and _events(text)[-1]["result"]["isError"] is False, text
        fast = _post(served.port, *_call(11, "test_echo", {"text": "quick"}))  # a quick one stays JSON
        assert fast[1] == "application/json", fast


@ERAS
def test_with_direct_turned_off_the_sdks_own_entry_answers(tmp_path, era):
    """PLEXOR_DISABLE=direct: the same answer, from the SDK's entry, which is not pinged on PLEXOR_SSE_PING_SECONDS
    (the direct feature's setting: the SDK pings every 15 s). Mcp-* values padded with whitespace are still
    accepted (RFC 9110 section 5.5, a MUST of the conformance suite): the kernel trims them, whatever the parser."""
    body, headers = _call(12, "test_slow", {"seconds": 1.6}, era)
    env = {"PLEXOR_DISABLE": "direct", "PLEXOR_SSE_PING_SECONDS": "0.5"}
    with serve_http(tmp_path, "--stateless", env=env) as served:
        status, kind, text = _post(served.port, body, headers)
        answer = _events(text)[-1] if kind.startswith("text/event-stream") else json.loads(text)
        assert status == 200 and answer["id"] == 12 and answer["result"]["isError"] is False, text
        assert ": ping" not in text, text
        if era == "2026-07-28":
            body, headers = _call(13, "test_echo", {"text": "x"})
            status, _kind, text = _post(served.port, body, {**headers, "Mcp-Name": " test_echo\t"})
            assert status == 200 and json.loads(text)["result"]["structuredContent"] == {"text": "x"}, text


def test_a_bad_ping_setting_stops_serve_with_what_to_set(tmp_path):
    env = fixture_env(tmp_path, PLEXOR_SSE_PING_SECONDS="soon")
    done = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "PLEXOR_SSE_PING_SECONDS='soon'" in done.stderr, done.stderr


@ERAS
def test_a_client_that_goes_away_cancels_its_call(tmp_path, era):
    body, headers = _call(12, "test_slow", {"seconds": 60}, era)
    raw = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Content-Length": str(len(raw))}.items())
    with serve_http(tmp_path, "--stateless") as served:
        sock = socket.create_connection(("127.0.0.1", served.port))
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n{head}\r\n".encode() + raw)
        deadline = time.monotonic() + 20
        while healthz(served)["kernel"]["inflight"] != 1:
            assert time.monotonic() < deadline, healthz(served)
            time.sleep(0.05)
        sock.close()
        deadline = time.monotonic() + 10  # the call is cancelled, not left to run its 60 seconds
        while healthz(served)["kernel"]["inflight"] != 0:
            assert time.monotonic() < deadline, healthz(served)
            time.sleep(0.05)


@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
def test_both_server_modes_serve_the_era(tmp_path, stateless):
    with serve_http(tmp_path, *(["--stateless"] if stateless else [])) as served:
        status, kind, text = _post(served.port, *_call(13, "test_echo", {"text": "either"}))
        assert (status, kind) == (200, "application/json") and json.loads(text)["result"]["structuredContent"] == {
            "text": "either"}
        status, kind, text = _post(served.port, *_call(14, "test_echo", {"text": "é"}, "2025-11-25"))
    if stateless:  # one request per POST, answered as the SDK's stateless mode answers: an SSE stream
        assert (status, kind) == (200, "text/event-stream"), (status, kind, text)
        assert _events(text)[-1] == {"jsonrpc": "2.0", "id": 14, "result": _events(text)[-1]["result"]}
        assert _events(text)[-1]["result"]["structuredContent"] == {"text": "é"} and '"é"' in text, text
    else:  # a session is needed: refused as before (the SDK's 400, with the request's id)
        assert status == 400 and json.loads(text)["error"]["code"] == INVALID_REQUEST, (status, text)


def test_2025_stateless_errors_and_initialize_are_the_sdks(tmp_path):
    with serve_http(tmp_path, "--stateless") as served:
        body = {"jsonrpc": "2.0", "id": 15, "method": "nothing/here", "params": {}}
        status, kind, text = _post(served.port, body, {**HEADERS, "MCP-Protocol-Version": "2025-11-25"})
        assert (status, kind) == (200, "text/event-stream") and _events(text) == [
            {"jsonrpc": "2.0", "id": 15, "error": {"code": METHOD_NOT_FOUND, "message": "Method not found",
                                                   "data": "nothing/here"}}], text
        init = {"jsonrpc": "2.0", "id": 16, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        status, kind, text = _post(served.port, init, {**HEADERS, "MCP-Protocol-Version": "2025-11-25"})
        assert status == 200 and _events(text)[-1]["result"]["serverInfo"]["name"] == "plexor", text
    with serve_http(tmp_path / "json", "--stateless", "--json-response") as served:
        status, kind, text = _post(served.port, body, {**HEADERS, "MCP-Protocol-Version": "2025-11-25"})
        assert (status, kind) == (200, "application/json") and json.loads(text)["error"]["code"] == METHOD_NOT_FOUND
