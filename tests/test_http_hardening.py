"""HTTP hardening, one test per rule, against a real `plexor serve --transport http` process.

Rules: loopback by default; a non-loopback bind needs --token or --allow-unauthenticated;
Origin and Host allowlists (403 / 421), extendable by flag and by environment; bearer
token (401) by flag and PLEXOR_TOKEN; body limit (413); per-request timeout; stateless
workers; graceful SIGTERM with the in-flight call finishing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from conformance.serving import INIT, MCP_HEADERS, Served, fixture_env, healthz, modern_post, serve_http

from plexor.transports import is_loopback

pytestmark = pytest.mark.anyio


def _wait_health(served, condition, timeout: float = 30.0) -> None:
    """Poll ``/healthz`` (200 or 503) until ``condition(kernel)`` holds: an event to wait for, not a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        kernel = httpx.get(f"{served.base}/healthz", timeout=5).json()["kernel"]
        if condition(kernel):
            return
        assert time.monotonic() < deadline, f"/healthz never showed the awaited state: {kernel}"
        time.sleep(0.02)


def _post(served, body, headers=None, **kw):
    return httpx.post(served.url, content=body if isinstance(body, (bytes, str)) else json.dumps(body),
                      headers={**MCP_HEADERS, **(headers or {})}, timeout=30, **kw)


def _serve_cli(home, *args, env=None):
    """Run `plexor serve ...` expecting it to stop by itself (refusal or bind error)."""
    return subprocess.run([sys.executable, "-m", "plexor", "serve", *args], env=fixture_env(home, **(env or {})),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


# ---------------------------------------------------------------- binding
def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("[::1]")
    assert is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("example.com")


@pytest.fixture(scope="module")
def default_server(tmp_path_factory):
    """One `plexor serve --transport http` with no options, for the tests that only send it requests."""
    with serve_http(tmp_path_factory.mktemp("default")) as served:
        yield served


def test_http_binds_loopback_by_default(default_server):
    served = default_server
    assert "on http://127.0.0.1:" in served.stderr()
    assert healthz(served)["kernel"]["state"] == "ready"


def test_non_loopback_bind_without_token_is_refused(tmp_path):
    r = _serve_cli(tmp_path, "--transport", "http", "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 2
    assert "--token" in r.stderr and "--allow-unauthenticated" in r.stderr and "0.0.0.0" in r.stderr


@pytest.mark.parametrize("extra", [["--token", "s3cret"], ["--allow-unauthenticated"]], ids=["token", "allow-unauthenticated"])
def test_non_loopback_bind_passes_the_guard_with_token_or_explicit_opt_in(tmp_path, extra):
    # 192.0.2.1 (TEST-NET-1) is not on this machine: the guard lets the command through, the bind then fails cleanly.
    r = _serve_cli(tmp_path, "--transport", "http", "--host", "192.0.2.1", "--port", "0", *extra)
    assert "exposes the server" not in r.stderr
    assert r.returncode == 2 and "cannot listen on 192.0.2.1" in r.stderr
    if extra == ["--allow-unauthenticated"]:
        assert "without a token" in r.stderr


def test_workers_need_stateless(tmp_path):
    r = _serve_cli(tmp_path, "--transport", "http", "--port", "0", "--workers", "2")
    assert r.returncode == 2 and "--stateless" in r.stderr


# ---------------------------------------------------------------- Origin / Host
def test_foreign_origin_gets_403_and_foreign_host_gets_421(default_server):
    served = default_server
    assert _post(served, INIT).status_code == 200
    assert _post(served, INIT, {"Origin": f"http://127.0.0.1:{served.port}"}).status_code == 200
    assert _post(served, INIT, {"Origin": "http://evil.example"}).status_code == 403
    assert _post(served, INIT, {"Host": "evil.example"}).status_code == 421


def test_origin_and_host_allowlists_by_flag_and_environment(tmp_path):
    env = {"PLEXOR_ALLOWED_ORIGINS": "https://env.example", "PLEXOR_ALLOWED_HOSTS": "env-host.example:*"}
    with serve_http(tmp_path, "--allow-origin", "https://flag.example", "--allow-host", "flag-host.example", env=env) as served:
        assert _post(served, INIT, {"Origin": "https://flag.example"}).status_code == 200
        assert _post(served, INIT, {"Origin": "https://env.example"}).status_code == 200
        assert _post(served, INIT, {"Origin": "https://other.example"}).status_code == 403
        assert _post(served, INIT, {"Host": "flag-host.example"}).status_code == 200
        assert _post(served, INIT, {"Host": "env-host.example:8443"}).status_code == 200
        assert _post(served, INIT, {"Host": "other.example"}).status_code == 421


# ---------------------------------------------------------------- bearer token
@pytest.mark.parametrize("via", ["flag", "env"])
def test_bearer_token_missing_or_wrong_gets_401(tmp_path, via):
    args, env = (["--token", "t0ken"], None) if via == "flag" else ([], {"PLEXOR_TOKEN": "t0ken"})
    with serve_http(tmp_path, *args, env=env, token="t0ken") as served:
        missing = _post(served, INIT)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in missing.json()["guidance"]
        assert _post(served, INIT, {"Authorization": "Bearer nope"}).status_code == 401
        assert _post(served, INIT, {"Authorization": "t0ken"}).status_code == 401
        assert _post(served, INIT, {"Authorization": "Bearer t0ken"}).status_code == 200
        assert httpx.get(f"{served.base}/healthz").status_code == 401
        assert healthz(served, "t0ken")["kernel"]["state"] == "ready"


# ---------------------------------------------------------------- limits
def test_body_over_the_limit_gets_413(tmp_path):
    with serve_http(tmp_path, "--max-body", "2048") as served:
        small = dict(INIT)
        assert _post(served, small).status_code == 200
        big = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": "x" * 4096, "version": "0"}}}
        assert _post(served, big).status_code == 413


def test_mcp_header_values_are_compared_without_surrounding_whitespace(default_server):
    call = {"name": "test_echo", "arguments": {"text": "hi"}}
    served = default_server
    status, reply = modern_post(served, "tools/call", call, headers={"Mcp-Name": "  test_echo \t"})
    assert status == 200 and reply["result"]["structuredContent"] == {"text": "hi"}, reply
    status, reply = modern_post(served, "tools/call", call, headers={"Mcp-Name": " test_other "})
    assert status == 400 and reply["error"]["code"] == -32020  # still compared, after trimming


async def test_a_call_over_the_request_timeout_is_cancelled_with_guidance(tmp_path):
    from mcp import Client

    with serve_http(tmp_path, "--request-timeout", "0.5") as served:
        async with Client(served.url, mode="legacy") as client:
            started = time.monotonic()
            r = await client.call_tool("test_slow", {"seconds": 5})
            assert time.monotonic() - started < 4
            assert r.is_error
            assert "limit of 0.5 s" in r.content[0].text and "--request-timeout" in r.content[0].text
            fast = await client.call_tool("test_slow", {"seconds": 0.01})
            assert not fast.is_error and fast.structured_content == {"slept": 0.01}


async def test_each_call_in_flight_is_cut_at_its_own_deadline(tmp_path):
    """One loop timer serves every request's limit (plexor.serving.deadlines): calls started at different
    moments are each cut when *their* limit is reached, calls that end first are left alone, and a call
    started after the timer fired is timed afresh."""
    import anyio
    from mcp import Client

    with serve_http(tmp_path, "--request-timeout", "1") as served:
        async with Client(served.url, mode="legacy") as client:
            took: dict[str, tuple[float, bool]] = {}

            async def call(label: str, seconds: float, after: float) -> None:
                await anyio.sleep(after)
                started = time.monotonic()
                r = await client.call_tool("test_slow", {"seconds": seconds})
                took[label] = (time.monotonic() - started, r.is_error)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "first", 30, 0)
                tg.start_soon(call, "quick", 0.2, 0.1)
                tg.start_soon(call, "second", 30, 0.5)  # due 0.5 s after the first: not cut with it, nor forgotten
                tg.start_soon(call, "later", 30, 2.5)  # begins after both were cut: the timer is armed again
            assert took["quick"][1] is False and took["quick"][0] < 1
            for label in ("first", "second", "later"):
                elapsed, is_error = took[label]
                assert is_error and 0.9 <= elapsed < 2, (label, took)


# ---------------------------------------------------------------- workers
async def test_stateless_workers_answer_from_several_processes(tmp_path):
    from mcp import Client

    with serve_http(tmp_path, "--stateless", "--workers", "2") as served:
        assert "with 2 workers" in served.stderr()
        pids = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            async with Client(served.url, mode="legacy") as client:
                r = await client.call_tool("plexor_health", {})
                pids.add(r.structured_content["pid"])
                assert (await client.call_tool("test_echo", {"text": "w"})).structured_content == {"text": "w"}
        assert len(pids) == 2, pids
        assert served.proc.pid not in pids  # the supervisor only supervises
        # Both workers share the data directory (one PLEXOR_HOME).
        assert {healthz(served)["kernel"]["state"] for _ in range(4)} == {"ready"}


# ---------------------------------------------------------------- shutdown
def test_sigterm_lets_the_in_flight_http_call_finish(tmp_path):
    with serve_http(tmp_path, "--grace", "20") as served:
        sid_resp = _post(served, INIT)
        sid = sid_resp.headers["mcp-session-id"]
        headers = {"mcp-session-id": sid}
        _post(served, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        result: dict = {}

        def call() -> None:
            r = _post(served, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": {"name": "test_slow", "arguments": {"seconds": 2}}}, headers)
            result["status"] = r.status_code
            result["body"] = r.text

        t = threading.Thread(target=call)
        t.start()
        _wait_health(served, lambda kernel: kernel["inflight"] >= 1)  # the call is running
        served.proc.send_signal(signal.SIGTERM)
        t.join(30)
        assert result.get("status") == 200, result
        data = [json.loads(line[5:]) for line in result["body"].splitlines() if line.startswith("data:") and line[5:].strip()]
        final = next(m for m in data if m.get("id") == 7)
        assert final["result"]["structuredContent"] == {"slept": 2}
        # uvicorn re-raises the signal once it has shut down cleanly: the exit status says "terminated by SIGTERM".
        assert served.proc.wait(30) in (0, -signal.SIGTERM)
        assert "Traceback" not in served.stderr()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{served.base}/healthz", timeout=2)


def test_a_call_arriving_while_draining_is_refused_with_guidance(tmp_path):
    with serve_http(tmp_path, "--grace", "20", "--stateless") as served:
        def call(seconds, out):
            r = _post(served, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "test_slow", "arguments": {"seconds": seconds}}},
                      {"MCP-Protocol-Version": "2025-11-25"})
            out.append(r.text)

        first: list = []
        t = threading.Thread(target=call, args=(2, first))
        t.start()
        _wait_health(served, lambda kernel: kernel["inflight"] >= 1)  # the first call is running
        served.proc.send_signal(signal.SIGTERM)
        _wait_health(served, lambda kernel: kernel["state"] != "ready")  # SIGTERM heard: draining
        late: list = []
        call(0.01, late)
        t.join(30)
        assert '"slept":2' in first[0].replace(" ", "")
        assert "shutting down" in late[0] and "Reconnect" in late[0]
        served.proc.wait(30)


STOPPED = "the server shut down while this call ran: it outlived the grace period and was stopped"


@pytest.mark.parametrize(("era", "disabled"), [("2026-07-28", ""), ("2025-11-25", ""), ("2026-07-28", "direct"),
                                               ("2025-11-25", "direct"), ("session", ""), ("2026-07-28", "workers"),
                                               ("2025-11-25", "workers")])
def test_a_call_running_past_the_grace_period_is_answered_not_cut_off(tmp_path, era, disabled):
    """SIGTERM with --grace 1 and a call that needs 30 s: the call is stopped and answered (a tool error naming the
    shutdown and what to do), in every era, through both entries (the direct feature's, the SDK's) and in each of
    several workers. Before, the 2026-07-28 caller got a bare `500 Internal Server Error` and a 2025-11-25 stream
    ended without an answer."""
    from test_single_exchange import _call

    env = {"PLEXOR_DISABLE": disabled} if disabled and disabled != "workers" else {}
    mode = () if era == "session" else ("--stateless", "--workers", "2") if disabled == "workers" else ("--stateless",)
    with serve_http(tmp_path, "--grace", "1", *mode, env=env) as served:
        if era == "session":
            headers = {"mcp-session-id": _post(served, INIT).headers["mcp-session-id"]}
            _post(served, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
            body = {"jsonrpc": "2.0", "id": 21, "method": "tools/call",
                    "params": {"name": "test_slow", "arguments": {"seconds": 30}}}
        else:
            body, headers = _call(21, "test_slow", {"seconds": 30}, era)
        answered: list[httpx.Response] = []
        t = threading.Thread(target=lambda: answered.append(_post(served, body, headers)))
        t.start()
        _wait_health(served, lambda kernel: kernel["inflight"] >= 1)  # the call is running
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        t.join(30)
        assert answered and answered[0].status_code == 200, answered
        reply = answered[0]
        final = reply.json() if reply.headers["content-type"].startswith("application/json") else next(
            json.loads(line[5:]) for line in reply.text.splitlines() if line.startswith("data:") and '"id":21' in line)
        assert final["id"] == 21 and final["result"]["isError"] is True, final
        error = final["result"]["structuredContent"]["error"]
        assert error["message"] == STOPPED and "Call it again" in error["guidance"], error
        assert time.monotonic() - started < 10  # stopped at the end of the grace period, not run to its end
        served.proc.wait(30)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdks_client_gets_the_shutdown_answer_of_a_call_past_the_grace_period(tmp_path, mode):
    """The same, through the SDK's own `Client` (a session in 2025-11-25, stateless in 2026-07-28): the call returns
    a tool error naming the shutdown, which a client and its model can act on, instead of a transport failure."""
    import anyio
    from mcp import Client

    with serve_http(tmp_path, "--grace", "1") as served:
        async with Client(served.url, mode=mode) as client:
            async with anyio.create_task_group() as tg:
                got: list = []

                async def call() -> None:
                    got.append(await client.call_tool("test_slow", {"seconds": 30}))

                tg.start_soon(call)
                with anyio.fail_after(20):
                    while healthz(served)["kernel"]["inflight"] < 1:
                        await anyio.sleep(0.05)
                served.proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(15):
                    while not got:
                        await anyio.sleep(0.05)
            assert got[0].is_error and STOPPED in got[0].content[0].text, got[0]
            assert got[0].structured_content["error"]["guidance"].startswith("Call it again"), got[0]
        served.proc.wait(30)


def test_a_legacy_sse_call_running_past_the_grace_period_is_answered_on_its_stream(tmp_path):
    with serve_http(tmp_path, "--transport", "sse", "--grace", "1") as served:
        lines: list[str] = []

        def read() -> None:
            with contextlib.suppress(httpx.HTTPError), httpx.stream("GET", served.base + "/sse", timeout=60) as stream:
                lines.extend(stream.iter_lines())  # until the server closes it

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 10
        while not any(line.startswith("data: /messages/") for line in lines):
            assert time.monotonic() < deadline, lines
            time.sleep(0.05)
        endpoint = served.base + next(line for line in lines if line.startswith("data: /messages/"))[6:]
        for message in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "test_slow", "arguments": {"seconds": 30}}}):
            assert httpx.post(endpoint, json=message, timeout=10).status_code == 202
        _wait_health(served, lambda kernel: kernel["inflight"] >= 1)
        served.proc.send_signal(signal.SIGTERM)
        reader.join(20)
        final = next(json.loads(line[6:]) for line in lines if line.startswith("data: {") and '"id":3' in line)
        assert final["result"]["structuredContent"]["error"]["message"] == STOPPED, final
        served.proc.wait(30)


# ---------------------------------------------------------------- exact Host/Origin, token forms
def _raw(served, method, path, headers=(), body=None, timeout=10):
    """One request with headers exactly as given (repeats and odd Host values included); returns (status, text)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=timeout)
    try:
        names = {k.lower() for k, _ in headers}
        conn.putrequest(method, path, skip_host="host" in names, skip_accept_encoding=True)
        for name, value in headers:
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body.encode() if body is not None else None)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def test_host_and_origin_are_matched_exactly_on_every_route(default_server):
    served = default_server
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    mcp = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json"),
           ("MCP-Protocol-Version", "2025-11-25")]
    port = served.port
    for host in (f"127.0.0.1:{port}@evil.example", f"127.0.0.1:{port}.evil.example", "evil.example",
                 f"localhost:{port}/x", f"127.0.0.1:{port} evil"):
        status, text = _raw(served, "GET", "/healthz", [("Host", host)])
        assert status == 421 and "--allow-host" in text, (host, status, text)  # DNS rebinding: pid and version stay hidden
        assert _raw(served, "POST", "/mcp", [("Host", host), *mcp], ping)[0] == 421
    assert _raw(served, "GET", "/healthz", [("Host", f"127.0.0.1:{port}")])[0] == 200
    assert _raw(served, "GET", "/healthz", [("Host", f"localhost:{port}")])[0] == 200
    for origin in (f"http://127.0.0.1:{port}.evil.example", f"http://127.0.0.1:{port}@evil.example",
                   "http://localhost.evil.example", "null", f"http://127.0.0.1:{port}/path"):
        assert _raw(served, "POST", "/mcp", [("Origin", origin), *mcp], ping)[0] == 403, origin
        assert _raw(served, "GET", "/healthz", [("Origin", origin)])[0] == 403, origin
    assert _raw(served, "POST", "/mcp", [("Origin", f"http://localhost:{port}"), *mcp], json.dumps(INIT))[0] == 200


def test_host_and_origin_verdicts_hold_past_the_values_the_guard_remembers(tmp_path):
    # The guard remembers its verdict per header value (256 of them, then it starts over): a refused
    # value stays refused on later requests, and an allowed one stays allowed after the memory is reset.
    with serve_http(tmp_path) as served:
        port, ping = served.port, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        mcp = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json"),
               ("MCP-Protocol-Version", "2025-11-25")]
        for i in range(300):
            assert _raw(served, "GET", "/healthz", [("Host", f"h{i}.evil.example")])[0] == 421, i
        for _ in range(2):
            assert _raw(served, "GET", "/healthz", [("Host", "h0.evil.example")])[0] == 421
            assert _raw(served, "GET", "/healthz", [("Host", f"127.0.0.1:{port}")])[0] == 200
            assert _raw(served, "POST", "/mcp", [("Origin", "http://evil.example"), *mcp], ping)[0] == 403
            assert _raw(served, "POST", "/mcp", [("Origin", f"http://localhost:{port}"), *mcp], json.dumps(INIT))[0] == 200


def test_bearer_scheme_is_case_insensitive_and_two_authorization_headers_are_refused(tmp_path):
    with serve_http(tmp_path, "--token", "t0ken", token="t0ken") as served:
        for value in ("bearer t0ken", "BEARER t0ken", "Bearer  t0ken"):
            assert _raw(served, "GET", "/healthz", [("Authorization", value)])[0] == 200, value
        for pair in (("Bearer t0ken", "Bearer nope"), ("Bearer nope", "Bearer t0ken"), ("Bearer t0ken", "Bearer t0ken")):
            status, text = _raw(served, "GET", "/healthz", [("Authorization", pair[0]), ("Authorization", pair[1])])
            assert status == 400 and "exactly one" in text, (pair, status, text)
        assert _raw(served, "GET", "/healthz", [("Authorization", "Basic t0ken")])[0] == 401


# ---------------------------------------------------------------- connection limits
def test_keep_alive_round_trips_do_not_wait_for_delayed_acks(tmp_path):
    import http.client
    import statistics

    with serve_http(tmp_path, "--stateless") as served:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        times = []
        for _ in range(40):
            started = time.perf_counter()
            conn.request("POST", "/mcp", body, MCP_HEADERS)
            resp = conn.getresponse()
            assert resp.status == 200 and b'"id":1' in resp.read().replace(b" ", b"")
            times.append(time.perf_counter() - started)
        conn.close()
        # Nagle's algorithm meeting delayed ACK holds the body of every reply ~40 ms without TCP_NODELAY;
        # half of that tells the two apart however busy the machine (a loaded 2-core box measured 5.4 ms).
        assert statistics.median(times[5:]) < 0.020, [round(t * 1000, 1) for t in times]


def _partial(port, data=b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(data)
    return s


def _drained(s, timeout):
    """Everything the server sends before it closes the connection (fails if it stays open past ``timeout``)."""
    s.settimeout(timeout)
    got = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:  # closed with a reset: closed all the same
            return got
        if not chunk:
            return got
        got += chunk


@pytest.mark.serial  # a bound of a second or so on wall-clock time: run alone (tests/conftest.py)
def test_slow_loris_connections_are_timed_out_and_healthz_keeps_answering(tmp_path):
    with serve_http(tmp_path, "--header-timeout", "1", "--body-timeout", "1", "--max-connections", "20") as served:
        loris = [_partial(served.port) for _ in range(60)]  # three times the cap, headers never finished
        started = time.monotonic()
        assert healthz(served)["kernel"]["state"] == "ready"  # a new connection takes the oldest idle one's place
        assert time.monotonic() - started < 1.0
        slow_body = _partial(served.port, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                          b"Content-Length: 100\r\n\r\n{\"jsonrpc\"")
        for s in loris + [slow_body]:
            got = _drained(s, 5)  # closed by the server within the timeouts, not left open
            assert got == b"" or got.startswith(b"HTTP/1.1 408"), got[:200]
            s.close()
        assert healthz(served)["kernel"]["state"] == "ready"
        assert "Traceback" not in served.stderr()


def test_at_the_connection_cap_with_every_connection_busy_a_new_one_gets_503(tmp_path):
    with serve_http(tmp_path, "--stateless", "--max-connections", "3") as served:
        done: list = []

        def slow_call():
            status, text = _raw(served, "POST", "/mcp", [(k, v) for k, v in MCP_HEADERS.items()],
                                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                            "params": {"name": "test_slow", "arguments": {"seconds": 3}}}), timeout=30)
            done.append((status, text))

        threads = [threading.Thread(target=slow_call) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        status, text = _raw(served, "GET", "/healthz")
        assert status == 503 and "connection limit" in text
        for t in threads:
            t.join(30)
        assert [s for s, _ in done] == [200, 200, 200]
        assert healthz(served)["kernel"]["state"] == "ready"


def test_accept_failures_are_logged_once_per_burst(tmp_path):
    import resource

    def low_fd_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (96, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    err = tmp_path / "serve.err"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0",
                                 "--max-connections", "1000", "--header-timeout", "30"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=fh, env=fixture_env(tmp_path), preexec_fn=low_fd_limit)
    try:
        deadline = time.monotonic() + 30
        while "on http://" not in err.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        port = int(err.read_text().split("on http://127.0.0.1:")[1].split()[0])
        _wait_health(Served(proc, port, err), lambda kernel: kernel["state"] == "ready")  # plugins loaded
        socks = []
        for _ in range(150):  # more than the server has descriptors for
            try:
                socks.append(_partial(port))
            except OSError:
                break
        time.sleep(3.5)  # asyncio retries accept() every second
        for s in socks:
            s.close()
        time.sleep(1.0)
        text = err.read_text()
        assert text.count('"accept_failed"') == 1, text[-3000:]
        assert "Traceback" not in text and len(text) < 20_000
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # serving again
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert _drained(s, 5).startswith(b"HTTP/1.1 200")
    finally:
        proc.kill()
        proc.wait()


HANGING_SHUTDOWN = """
import os
import time
from plexor import hookimpl

@hookimpl
def plexor_shutdown(plugin):
    os.write(2, b"shutdown hook hangs now\\n")
    time.sleep(600)
"""


@pytest.mark.serial  # a bound of a second or so on wall-clock time: run alone (tests/conftest.py)
def test_a_second_sigterm_exits_at_once_while_a_shutdown_hook_hangs(tmp_path, site_dir):
    from conformance.serving import SITE
    from conftest import install_fake_dist

    install_fake_dist(site_dir, "plexor-fakehang", "fakehang", "plexor_fakehang", HANGING_SHUTDOWN)
    env = {"PLEXOR_PLUGINS": "conformance,fakehang", "PYTHONPATH": f"{site_dir}{os.pathsep}{SITE}",
           "PLEXOR_START_WAIT": "300"}
    with serve_http(tmp_path, "--grace", "1", env=env) as served:
        served.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while "shutdown hook hangs now" not in served.stderr():
            assert time.monotonic() < deadline, served.stderr()[-3000:]
            time.sleep(0.05)
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(5) == 128 + signal.SIGTERM
        assert time.monotonic() - started < 2.0
        assert "exit_forced" in served.stderr()


def test_json_response_answers_each_post_with_one_json_body(tmp_path):
    with serve_http(tmp_path, "--stateless", "--json-response") as served:
        r = _post(served, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert r.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}
