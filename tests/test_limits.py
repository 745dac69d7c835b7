"""Every surface bounded per caller (docs/security.md#limits), each through a real ``plexor serve``.

Each test drives one client to a limit and proves with a second, real MCP client that the server
still serves everyone else; where the limit is about memory, the server's own RSS is read from
``/proc``. Payloads are the smallest that still show the bound (the limits are lowered by their
settings for the test).
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from conformance.serving import INIT, MCP_HEADERS, healthz, modern_post, serve_http

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def rss_mib(pid: int) -> float:
    """The resident set of process ``pid`` in MiB (Linux ``/proc``)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def deep_call(levels: int, rid: int | str = 41) -> bytes:
    nested = "[" * levels + "]" * levels
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": "test_echo", "arguments": {"text": "x", "deep": "@"}}}).replace(
        '"@"', nested).encode()


MODERN = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
          "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_echo"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "plexor-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def _modern_deep(levels: int) -> bytes:
    body = json.loads(deep_call(2))
    body["params"]["_meta"] = META
    return json.dumps(body).replace("[[]]", "[" * levels + "]" * levels).encode()


def _session(served, headers=None) -> dict[str, str]:
    r = httpx.post(served.url, json=INIT, headers={**MCP_HEADERS, **(headers or {})}, timeout=30)
    assert r.status_code == 200, r.text
    sent = {**MCP_HEADERS, **(headers or {}), "Mcp-Session-Id": r.headers["mcp-session-id"]}
    httpx.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=sent, timeout=30)
    return sent


def _answer(response: httpx.Response) -> dict:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])
    return response.json()


async def _echo_through_sdk(url: str, mode: str, token: str | None = None, tool: str = "test_echo") -> str:
    """A second, well-behaved client: the SDK's own, in era ``mode``; the tool's text."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        result = await client.call_tool(tool, {"text": "still served"} if tool == "test_echo" else {})
        assert not result.is_error, result
        return str(result.content[0].text)


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
async def test_nesting_is_refused_at_200_levels_in_both_eras(tmp_path, stateless):
    with serve_http(tmp_path, *(["--stateless"] if stateless else [])) as served:
        legacy = MCP_HEADERS if stateless else _session(served)
        for levels in (201, 900, 5000):
            for headers, body in ((legacy, deep_call(levels)), (MODERN, _modern_deep(levels))):
                r = httpx.post(served.url, content=body, headers=headers, timeout=30)
                assert r.status_code == 400, (levels, headers["MCP-Protocol-Version"], r.status_code, r.text[:300])
                error = r.json()
                assert error["id"] == 41 and error["error"]["code"] == -32600
                assert "nested deeper than 200 levels" in error["error"]["message"]
        # 200 levels below the message (params, arguments and 198 more) are still taken, as before
        ok = httpx.post(served.url, content=_modern_deep(198), headers=MODERN, timeout=30)
        assert ok.status_code == 200 and _answer(ok)["id"] == 41 and "result" in _answer(ok), ok.text[:300]
        for mode in ("legacy", "2026-07-28"):
            assert "still served" in await _echo_through_sdk(served.url, mode)


@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
async def test_the_nesting_limit_is_a_setting_in_both_eras(tmp_path, stateless):
    with serve_http(tmp_path, *(["--stateless"] if stateless else []), env={"PLEXOR_MAX_NESTING": "50"}) as served:
        legacy = MCP_HEADERS if stateless else _session(served)
        for headers, body in ((legacy, deep_call(49)), (MODERN, _modern_deep(49))):  # 51 levels below the message
            r = httpx.post(served.url, content=body, headers=headers, timeout=30)
            assert r.status_code == 400 and r.json()["error"]["code"] == -32600, (headers, r.status_code, r.text[:300])
            assert "nested deeper than 50 levels" in r.json()["error"]["message"]
            assert "PLEXOR_MAX_NESTING" in r.json()["error"]["message"]
        ok = httpx.post(served.url, content=_modern_deep(48), headers=MODERN, timeout=30)
        assert ok.status_code == 200 and "result" in _answer(ok), ok.text[:300]
        assert "still served" in await _echo_through_sdk(served.url, "legacy")


async def test_the_nesting_limit_setting_holds_with_oauth_on(tmp_path):
    keys = Keys()
    try:
        served, _resource = _oauth(tmp_path, keys, env={"PLEXOR_MAX_NESTING": "50"})
        with served as px:
            deep = json.loads(deep_call(2))
            deep["params"]["name"] = "ledger_post"
            body = json.dumps(deep).replace("[[]]", "[" * 60 + "]" * 60)
            r = httpx.post(px.url, content=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {px.static}"},
                           timeout=30)
            assert r.status_code == 400 and "nested deeper than 50 levels" in r.json()["error"]["message"], r.text[:300]
            assert px.calls() == []
            assert "balance" in await _echo_through_sdk(px.url, "2026-07-28", px.static, tool="ledger_balance")
    finally:
        keys.close()


def test_the_nesting_limit_setting_holds_on_stdio(tmp_path):
    from conformance.serving import fixture_env, stdio_answers

    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, json.loads(deep_call(2, rid=7)),
             {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "test_echo",
                                                                          "arguments": {"text": "still served"}}}]
    text = "\n".join(json.dumps(m) for m in lines).replace("[[]]", "[" * 60 + "]" * 60) + "\n"
    env = fixture_env(tmp_path, PLEXOR_MAX_NESTING="50")
    answers = stdio_answers(env, text, {7, 8})  # the deep call answered, then the next one, over the same pipe
    assert answers[7]["error"]["code"] == -32600, answers
    assert "nested deeper than 50 levels" in answers[7]["error"]["message"]
    assert "still served" in answers[8]["result"]["content"][0]["text"], answers[8]


def test_an_echoed_progress_token_or_id_is_length_capped(tmp_path):
    with serve_http(tmp_path, env={"PLEXOR_MAX_ECHOED_LENGTH": "64", "PLEXOR_OTEL": "1"}) as served:
        sent = _session(served)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p" * 65}}}
        error = _answer(httpx.post(served.url, json=call, headers=sent, timeout=30))
        assert error["id"] == 5 and error["error"]["code"] == -32600, error
        assert "progress token is 65 characters" in error["error"]["message"]
        assert "PLEXOR_MAX_ECHOED_LENGTH" in error["error"]["message"]
        long_id = {**call, "id": "i" * 65, "params": {"name": "test_echo", "arguments": {"text": "x"}}}
        error = _answer(httpx.post(served.url, json=long_id, headers=sent, timeout=30))
        assert "request id is 65 characters" in error["error"]["message"]
        call["params"]["_meta"]["progressToken"] = "p" * 64  # at the limit: served, with its progress
        done = httpx.post(served.url, json=call, headers=sent, timeout=30)
        assert done.text.count('"progressToken":"' + "p" * 64) >= 1 and '"result"' in done.text
        modern = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "test_echo", "arguments": {"text": "x"}, "_meta": {**META, "progressToken": "q" * 65}}}
        error = _answer(httpx.post(served.url, json=modern, headers=MODERN, timeout=30))
        assert error["id"] == 6 and "progress token is 65 characters" in error["error"]["message"], error
        assert "still served" in modern_post(served, "tools/call", {"name": "test_echo", "arguments": {
            "text": "still served"}}, name="test_echo")[1]["result"]["content"][0]["text"]
        metrics = httpx.get(served.base + "/metrics", timeout=10).text  # telemetry on: each refusal is counted
        assert 'plexor_limit_refusals_total{plexor_limit="echoed_length"} 3.0' in metrics
        assert healthz(served)["kernel"]["state"] == "ready"


# ---------------------------------------------------------------- JWKS and introspection fetches
class Keys:
    """A misbehaving authorization server (the attacker's, or one having a bad day): serves its JWKS
    as ``mode`` says (``ok``, ``500``, ``drip``: a byte every 5 s, ``huge``: ``size`` bytes) and counts
    each fetch. Only the failures the real one cannot be made to show are played here."""

    def __init__(self, mode: str = "ok", size: int = 0) -> None:
        import http.server
        import threading

        from auth.support import rsa_jwk

        self.key, jwk = rsa_jwk("k1")
        public = {k: v for k, v in jwk.items() if k in ("kty", "n", "e", "kid", "use", "alg")}
        self.document = json.dumps({"keys": [public]}).encode()
        self.mode, self.size, self.fetches = mode, size, 0
        self.stop = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - the stdlib's name
                outer.fetches += 1
                outer.serve(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def serve(self, handler) -> None:
        if self.mode == "500":
            handler.send_error(500)
            return
        body = self.document
        if self.mode == "huge":  # valid JSON, mostly padding
            body = b'{"keys": [], "pad": "' + b"x" * self.size + b'"}'
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if self.mode != "drip":
            handler.wfile.write(body)
            return
        for byte in body:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            if self.stop.wait(5):
                return

    def mint(self, resource: str, sub: str = "alice", **claims) -> str:
        import time

        import jwt

        now = int(time.time())
        body = {"iss": self.url, "aud": resource, "sub": sub, "client_id": "c", "scope": "ledger:read ledger:write",
                "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": "k1"})

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _oauth(tmp_path, keys: Keys, env: dict[str, str] | None = None, args: tuple[str, ...] = ()):
    from auth.support import free_port, served_plexor

    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    auth = {"issuer": keys.url, "resource": resource, "jwks_uri": keys.url + "/jwks", "leeway": 0}
    return served_plexor(tmp_path / "home", port, auth=auth, args=args, env=env), resource


LEDGER = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "ledger_balance", "arguments": {}}}


def _call(px, token: str, body=LEDGER, **headers) -> httpx.Response:
    return httpx.post(px.url, json=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}", **headers},
                      timeout=60)


async def test_with_oauth_on_deep_nesting_is_400_not_500(tmp_path):
    keys = Keys()
    try:
        served, _resource = _oauth(tmp_path, keys)
        with served as px:
            for levels in (201, 5000):
                deep = json.loads(deep_call(2))
                deep["params"]["name"] = "ledger_post"
                body = json.dumps(deep).replace("[[]]", "[" * levels + "]" * levels)
                r = httpx.post(px.url, content=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {px.static}"},
                               timeout=30)
                assert r.status_code == 400 and r.json()["error"]["code"] == -32600, (levels, r.status_code, r.text[:200])
                assert "200 levels" in r.json()["error"]["message"]
            assert px.calls() == []  # nothing ran
            for mode in ("legacy", "2026-07-28"):
                assert "balance" in await _echo_through_sdk(px.url, mode, px.static, tool="ledger_balance")
    finally:
        keys.close()


async def _burst(px, tokens: list[str]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as http:
        import asyncio

        return list(await asyncio.gather(*(http.post(px.url, json=LEDGER, headers={
            **MCP_HEADERS, "Authorization": f"Bearer {t}"}) for t in tokens)))


async def test_keys_that_cannot_be_loaded_are_fetched_once_then_backed_off(tmp_path):
    keys = Keys("500")
    try:
        served, resource = _oauth(tmp_path, keys)
        with served as px:
            stranger = Keys()  # a token of another issuer, signed by its key: never makes this server fetch
            try:
                refused = await _burst(px, [stranger.mint(resource)] * 5 + [keys.mint(resource, aud="http://other/mcp")])
            finally:
                stranger.close()
            assert [r.status_code for r in refused] == [401] * 6 and keys.fetches == 0
            answers = await _burst(px, [keys.mint(resource, sub=f"u{i}") for i in range(40)])
            assert [r.status_code for r in answers] == [401] * 40
            assert keys.fetches <= 2, keys.fetches  # was 81 (two per request, no back-off)
            assert any("not asked again" in r.headers["www-authenticate"] for r in answers)
            for mode in ("legacy", "2026-07-28"):  # the static token's client is served throughout
                assert "balance" in await _echo_through_sdk(px.url, mode, px.static, tool="ledger_balance")
            keys.mode = "ok"  # the server recovers once the back-off has passed
            import time

            deadline = time.monotonic() + 30
            while (ok := _call(px, keys.mint(resource))).status_code == 401 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert ok.status_code == 400 or ok.status_code == 200, ok.text  # past the token check (no session: 400)
            assert keys.fetches <= 8
    finally:
        keys.close()


async def test_a_dripping_key_set_is_cut_off_at_the_total_deadline(tmp_path):
    import time

    keys = Keys("drip")
    try:
        served, resource = _oauth(tmp_path, keys, env={"PLEXOR_AUTH_FETCH_SECONDS": "2"})
        with served as px:
            started = time.monotonic()
            answers = await _burst(px, [keys.mint(resource, sub=f"u{i}") for i in range(5)])
            took = time.monotonic() - started
            assert [r.status_code for r in answers] == [401] * 5
            assert took < 10, took  # was unanswered at 70 s: the 10 s timeout was per read
            assert keys.fetches == 1  # one fetch in flight, its outcome shared
            assert "PLEXOR_AUTH_FETCH_SECONDS" in answers[0].headers["www-authenticate"]
            assert "balance" in await _echo_through_sdk(px.url, "2026-07-28", px.static, tool="ledger_balance")
    finally:
        keys.close()


async def test_a_huge_key_set_is_refused_at_the_size_cap_without_growing_the_server(tmp_path):
    keys = Keys("huge", size=24 * 2**20)
    try:
        served, resource = _oauth(tmp_path, keys, env={"PLEXOR_AUTH_FETCH_BYTES": "65536"})
        with served as px:
            pid = int(healthz(px, px.static)["pid"])
            before = rss_mib(pid)
            r = _call(px, keys.mint(resource))
            assert r.status_code == 401 and "PLEXOR_AUTH_FETCH_BYTES" in r.headers["www-authenticate"], r.headers
            grown = rss_mib(pid) - before
            assert grown < 12, grown  # a 24 MiB key set read whole would add several times that
            assert "balance" in await _echo_through_sdk(px.url, "legacy", px.static, tool="ledger_balance")
    finally:
        keys.close()


class Introspector:
    """An RFC 7662 introspection endpoint (stdlib): ``active`` holds the tokens it vouches for; it counts the
    questions per token and how many were in flight at once, and answers each after ``delay`` seconds."""

    def __init__(self) -> None:
        import collections
        import http.server
        import threading
        import urllib.parse

        self.active: dict[str, dict] = {}
        self.asked: collections.Counter[str] = collections.Counter()
        self.inflight = self.peak = 0
        self.delay = 0.0
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802 - the stdlib's name
                import time

                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                token = form.get("token", [""])[0]
                with lock:
                    outer.asked[token] += 1
                    outer.inflight += 1
                    outer.peak = max(outer.peak, outer.inflight)
                try:
                    time.sleep(outer.delay)
                    body = json.dumps(outer.active.get(token, {"active": False})).encode()
                finally:
                    with lock:
                        outer.inflight -= 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def grant(self, token: str, resource: str, sub: str) -> str:
        import time

        self.active[token] = {"active": True, "iss": self.url, "aud": resource, "sub": sub, "client_id": "c",
                              "scope": "ledger:read ledger:write", "exp": int(time.time()) + 300}
        return token

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.serial  # a bound of a second or so on wall-clock time: run alone (tests/conftest.py)
async def test_introspection_is_bounded_in_flight_remembers_refusals_and_sees_a_revocation_in_time(tmp_path):
    import asyncio
    import time

    from auth.support import free_port, served_plexor

    intro = Introspector()
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    auth = {"issuer": intro.url, "resource": resource, "introspection_endpoint": intro.url + "/introspect",
            "client_id": "plexor", "client_secret": "secret", "leeway": 0}
    env = {"PLEXOR_AUTH_MAX_INTROSPECTIONS": "2", "PLEXOR_AUTH_FETCH_SECONDS": "2.5",
           "PLEXOR_AUTH_RECHECK_SECONDS": "2", "PLEXOR_AUTH_REFUSED_CACHE_SECONDS": "30"}
    try:
        with served_plexor(tmp_path / "home", port, auth=auth, env=env, args=("--stateless",)) as px:
            # At most two questions at once: of six new tokens sent together (each answered in 1.5 s), four are
            # asked two by two and served; the last two find no free place within the 2.5 s deadline.
            intro.delay = 1.5
            tokens = [intro.grant(f"opaque-{i}", resource, f"u{i}") for i in range(6)]
            async with httpx.AsyncClient(timeout=60) as http:
                async def static() -> tuple[int, float]:
                    await asyncio.sleep(0.3)
                    started = time.monotonic()
                    r = await http.post(px.url, json=LEDGER, headers={**MCP_HEADERS, "Authorization": f"Bearer {px.static}"})
                    return r.status_code, time.monotonic() - started

                *answers, (status, took) = await asyncio.gather(*(http.post(px.url, json=LEDGER, headers={
                    **MCP_HEADERS, "Authorization": f"Bearer {t}"}) for t in tokens), static())
            assert status == 200 and took < 1.0, (status, took)  # another client is served meanwhile, at once
            assert intro.peak == 2, intro.peak
            assert sorted(r.status_code for r in answers) == [200] * 4 + [401] * 2, [r.text for r in answers]
            busy = [r for r in answers if r.status_code == 401]
            assert all("PLEXOR_AUTH_MAX_INTROSPECTIONS" in r.headers["www-authenticate"] for r in busy)
            intro.delay = 0.0
            assert _call(px, tokens[-1]).status_code == 200  # no back-off: the endpoint did not fail

            # A token found inactive is refused without asking again.
            assert [_call(px, "junk").status_code for _ in range(5)] == [401] * 5
            assert intro.asked["junk"] == 1

            # An active token is trusted for 2 s (PLEXOR_AUTH_RECHECK_SECONDS), then asked about again: its
            # revocation is seen then (it was trusted until it expired).
            token = intro.grant("opaque-revoked", resource, "r")
            assert _call(px, token).status_code == 200 and _call(px, token).status_code == 200
            assert intro.asked[token] == 1
            del intro.active[token]
            deadline = time.monotonic() + 10
            while (refused := _call(px, token)).status_code == 200:
                assert time.monotonic() < deadline, "the revoked token is still accepted"
                time.sleep(0.25)
            assert refused.status_code == 401 and "not active" in refused.headers["www-authenticate"]
            assert intro.asked[token] == 2
    finally:
        intro.close()


# ---------------------------------------------------------------- subscriptions and listen
def _listen_body(rid: int, uris: list[str]) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": uris}, "_meta": META}}


def _open_listen(stack, http: httpx.Client, url: str, rid: int, token: str, uris: list[str] | None = None) -> dict:
    """Open a listen stream and keep it open (in ``stack``); its first frame (the acknowledgement, or an error)."""
    headers = {**MODERN, "Mcp-Method": "subscriptions/listen", "Authorization": f"Bearer {token}"}
    headers.pop("Mcp-Name")
    response = stack.enter_context(http.stream("POST", url, json=_listen_body(rid, uris or ["test://a"]),
                                               headers=headers))
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        response.read()
        return response.json()
    lines = response.iter_lines()
    _OPEN.append(lines)  # dropping the iterator would close the connection (and so the stream)
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    raise AssertionError("the listen stream ended without a frame")


_OPEN: list = []


def test_listen_streams_per_caller_are_capped_below_the_server_wide_cap(tmp_path):
    import contextlib

    keys = Keys()
    env = {"PLEXOR_MAX_LISTEN_PER_CALLER": "3", "PLEXOR_MAX_LISTEN_STREAMS": "8", "PLEXOR_MAX_SUBSCRIPTIONS": "4",
           "PLEXOR_MAX_URI_LENGTH": "64"}
    try:
        served, resource = _oauth(tmp_path, keys, env=env, args=("--stateless",))
        with served as px, contextlib.ExitStack() as stack, httpx.Client(timeout=30) as http:
            stack.callback(_OPEN.clear)
            hog, other = keys.mint(resource, sub="hog"), keys.mint(resource, sub="other")
            for rid in range(3):
                ack = _open_listen(stack, http, px.url, rid, hog)
                assert ack["method"] == "notifications/subscriptions/acknowledged", ack
            refused = _open_listen(stack, http, px.url, 3, hog)
            assert refused["error"]["code"] == -32600 and "PLEXOR_MAX_LISTEN_PER_CALLER" in refused["error"]["message"]
            assert "3 open listen streams per caller" in refused["error"]["message"]
            # another caller is served as before, while the first holds its limit
            assert _open_listen(stack, http, px.url, 4, other)["method"] == "notifications/subscriptions/acknowledged"
            too_many = _open_listen(stack, http, px.url, 5, other, [f"test://{i}" for i in range(5)])
            assert "PLEXOR_MAX_SUBSCRIPTIONS" in too_many["error"]["message"], too_many
            too_long = _open_listen(stack, http, px.url, 6, other, ["test://" + "x" * 64])
            assert "a URI of 71 characters" in too_long["error"]["message"] and "PLEXOR_MAX_URI_LENGTH" in too_long[
                "error"]["message"]
            assert _call(px, other, {**LEDGER, "params": {**LEDGER["params"], "_meta": META}},
                         **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                            "Mcp-Name": "ledger_balance"}).status_code == 200
            for rid in range(7, 12):  # the server-wide cap still holds for everyone
                _open_listen(stack, http, px.url, rid, keys.mint(resource, sub=f"s{rid}"))
            full = _open_listen(stack, http, px.url, 12, keys.mint(resource, sub="late"))
            assert "PLEXOR_MAX_LISTEN_STREAMS" in full["error"]["message"], full
    finally:
        keys.close()


def test_subscriptions_per_session_and_uri_length_are_capped(tmp_path):
    env = {"PLEXOR_MAX_SUBSCRIPTIONS": "5", "PLEXOR_MAX_URI_LENGTH": "1024"}
    with serve_http(tmp_path, env=env) as served:
        pid = int(healthz(served)["pid"])
        sent = _session(served)

        def subscribe(rid: int, uri: str) -> dict:
            body = {"jsonrpc": "2.0", "id": rid, "method": "resources/subscribe", "params": {"uri": uri}}
            return _answer(httpx.post(served.url, json=body, headers=sent, timeout=30))

        for i in range(5):
            assert "result" in subscribe(i, f"test://feed/{i}")
        assert "result" in subscribe(5, "test://feed/0")  # again: still five
        error = subscribe(6, "test://feed/6")["error"]
        assert "this session would hold 6 URIs" in error["message"] and "PLEXOR_MAX_SUBSCRIPTIONS" in error["message"]
        before = rss_mib(pid)
        for i in range(40):  # 40 URIs of 256 KiB, refused: nothing kept
            assert "PLEXOR_MAX_URI_LENGTH" in subscribe(100 + i, "test://" + "x" * (256 * 1024))["error"]["message"]
        assert rss_mib(pid) - before < 6  # 10 MiB would have been kept
        unsubscribe = {"jsonrpc": "2.0", "id": 200, "method": "resources/unsubscribe", "params": {"uri": "test://feed/0"}}
        assert "result" in _answer(httpx.post(served.url, json=unsubscribe, headers=sent, timeout=30))
        assert "result" in subscribe(201, "test://feed/7")  # room again
        other = _session(served)  # another session has its own five
        body = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "test://feed/x"}}
        assert "result" in _answer(httpx.post(served.url, json=body, headers=other, timeout=30))


def test_subscribed_uri_bytes_are_capped_per_caller_across_sessions_and_listen_streams(tmp_path):
    import contextlib

    keys = Keys()
    try:
        served, resource = _oauth(tmp_path, keys, env={"PLEXOR_MAX_SUBSCRIPTION_BYTES_PER_CALLER": "4096"})
        with served as px, contextlib.ExitStack() as stack, httpx.Client(timeout=30) as http:
            stack.callback(_OPEN.clear)
            hog, other = keys.mint(resource, sub="hog"), keys.mint(resource, sub="other")

            def subscribe(sent: dict, rid: int, uri: str, method: str = "resources/subscribe") -> dict:
                body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"uri": uri}}
                return _answer(httpx.post(px.url, json=body, headers=sent, timeout=30))

            first, second = (_session(px, {"Authorization": f"Bearer {hog}"}) for _ in range(2))
            for rid, sent in enumerate((first, first, second, second)):  # four URIs of 1,009 bytes, two sessions
                assert "result" in subscribe(sent, rid, f"test://{rid}/" + "é" * 500), rid
            refused = subscribe(second, 9, "test://x/" + "a" * 80)["error"]
            assert refused["code"] == -32602 and "would take 4125 bytes" in refused["message"], refused
            assert "PLEXOR_MAX_SUBSCRIPTION_BYTES_PER_CALLER" in refused["message"]
            stream = _open_listen(stack, http, px.url, 20, hog, ["test://x/" + "a" * 80])  # the same caller's stream
            assert "PLEXOR_MAX_SUBSCRIPTION_BYTES_PER_CALLER" in stream["error"]["message"], stream
            mine = _session(px, {"Authorization": f"Bearer {other}"})  # another caller has its own budget
            for rid in range(4):
                assert "result" in subscribe(mine, rid, f"test://{rid}/" + "é" * 500)
            ack = _open_listen(stack, http, px.url, 21, other, ["test://y"])
            assert ack["method"] == "notifications/subscriptions/acknowledged", ack
            assert "result" in subscribe(first, 10, "test://0/" + "é" * 500, "resources/unsubscribe")
            assert "result" in subscribe(second, 11, "test://x/" + "a" * 80)  # room again
            assert _call(px, other, {**LEDGER, "params": {**LEDGER["params"], "_meta": META}},
                         **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                            "Mcp-Name": "ledger_balance"}).status_code == 200
    finally:
        keys.close()


# ---------------------------------------------------------------- the SSE event store
def _echo_call(sent: dict, rid: int, size: int) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "test_echo",
                                                                             "arguments": {"text": "e" * size}}}
    r = httpx.post(SERVED_URL[0], json=body, headers=sent, timeout=60)
    assert r.status_code == 200 and '"result"' in r.text, r.text[:300]
    return r


SERVED_URL: list[str] = []


@pytest.mark.parametrize("store", ["memory", "shared"])
async def test_the_event_store_is_bounded_in_bytes_and_a_deleted_session_is_freed(tmp_path, store):
    import sqlite3

    env = {"PLEXOR_EVENT_STORE": store, "PLEXOR_EVENT_STORE_SESSION_BYTES": str(2 * 2**20),
           "PLEXOR_EVENT_STORE_BYTES": str(3 * 2**20)}
    with serve_http(tmp_path, env=env) as served:
        SERVED_URL[:] = [served.url]
        pid = int(healthz(served)["pid"])
        hog = _session(served)
        _echo_call(hog, 1, 512 * 1024)  # warm up: the first answer's allocations are not the store's
        before = rss_mib(pid)
        for rid in range(2, 26):  # 24 answers of about 1 MiB (text and structured content), kept for resumption
            _echo_call(hog, rid, 512 * 1024)
        grown = rss_mib(pid) - before
        database = tmp_path / "data" / "plexor.sqlite3"

        def stored(session: str | None = None) -> int:
            with sqlite3.connect(database) as db:
                where, args = ("WHERE session = ?", (session,)) if session else ("", ())
                return int(db.execute(f"SELECT COALESCE(SUM(LENGTH(body)), 0) FROM plexor_sse_events {where}",
                                      args).fetchone()[0])

        if store == "memory":
            assert grown < 14, grown  # 24 MiB of answers would have been kept
        else:
            assert stored() <= 3 * 2**20 * 9 // 8, stored()  # the table is trimmed (it grew 2.8 GB in 48 s)
        other = _session(served)  # another client is served as before, and can resume its stream
        answer = _echo_call(other, 1, 8)
        last = [line[3:].strip() for line in answer.text.splitlines() if line.startswith("id:")][0]
        with httpx.stream("GET", served.url, headers={**other, "Last-Event-ID": last}, timeout=30) as resumed:
            assert resumed.status_code == 200
            lines = resumed.iter_lines()
            assert any('"result"' in line for line in lines if line.startswith("data:"))  # the answer, replayed
            del lines
        assert "still served" in await _echo_through_sdk(served.url, "legacy")
        hog_id = hog["Mcp-Session-Id"]
        if store == "shared":
            assert 0 < stored(hog_id) <= 2 * 2**20 * 9 // 8
        assert httpx.delete(served.url, headers=hog, timeout=10).status_code in (200, 204)
        if store == "shared":
            assert stored(hog_id) == 0  # dropped before the DELETE was answered


def _event_ids(response: httpx.Response) -> list[str]:
    return [line[3:].strip() for line in response.text.splitlines() if line.startswith("id:")]


def _resumed(url: str, sent: dict, last: str) -> bool:
    """Whether a resumption from event ``last`` replays the answer (False: refused, the stream ends empty)."""
    with httpx.stream("GET", url, headers={**sent, "Last-Event-ID": last}, timeout=30) as resumed:
        assert resumed.status_code == 200
        return any('"result"' in line for line in resumed.iter_lines() if line.startswith("data:"))


@pytest.mark.serial  # a 5 s idle timeout on wall-clock time: run alone (tests/conftest.py)
@pytest.mark.parametrize("store", ["memory", "shared"])
def test_the_event_store_counts_bytes_not_characters_and_frees_an_expired_session_at_once(tmp_path, store):
    import sqlite3
    import time

    # glibc then maps every block of 64 KiB or more on its own, so a freed event leaves the RSS at once
    env = {"PLEXOR_EVENT_STORE": store, "PLEXOR_EVENT_STORE_SESSION_BYTES": str(4 * 2**20),
           "PLEXOR_SESSION_IDLE_TIMEOUT": "5", "MALLOC_MMAP_THRESHOLD_": "65536"}
    with serve_http(tmp_path, env=env) as served:
        SERVED_URL[:] = [served.url]
        database = tmp_path / "data" / "plexor.sqlite3"

        def stored(session: str) -> int:
            with sqlite3.connect(database) as db:
                return int(db.execute("SELECT COUNT(*) FROM plexor_sse_events WHERE session = ? AND body IS NOT NULL",
                                      (session,)).fetchone()[0])

        def echo(sent: dict, rid: int, text: str) -> httpx.Response:
            body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                    "params": {"name": "test_echo", "arguments": {"text": text}}}
            r = httpx.post(served.url, json=body, headers=sent, timeout=60)
            assert r.status_code == 200 and '"result"' in r.text, r.text[:300]
            return r

        # An expired session's events are dropped when it expires, not with the next event written (memory)
        # or ten minutes later (shared).
        pid = int(healthz(served)["pid"])
        warm = _session(served)  # the first answers' allocations are not the store's
        echo(warm, 1, "ü" * 700_000)
        assert httpx.delete(served.url, headers=warm, timeout=10).status_code in (200, 204)
        baseline = rss_mib(pid)
        idle = []
        for _ in range(8):  # each keeps one answer of 2.8 MB (a second would pass its 4 MiB); filled as it
            sent = _session(served)  # opens, so none sits idle for the 5 s timeout before it is filled
            for rid in range(1, 3):
                echo(sent, rid, "ü" * 700_000)
            idle.append(sent)
        if store == "shared":
            assert all(stored(sent["Mcp-Session-Id"]) == 1 for sent in idle)
        time.sleep(5)  # the 5 s idle timeout; nothing is written from now on

        def freed() -> bool:
            if store == "shared":
                return all(stored(sent["Mcp-Session-Id"]) == 0 for sent in idle)
            return rss_mib(pid) - baseline < 8  # 20 MB more stayed before the fix

        deadline = time.monotonic() + 15
        while not freed():
            assert time.monotonic() < deadline, (baseline, rss_mib(pid))
            time.sleep(0.5)
        ended = httpx.post(served.url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=idle[0], timeout=10)
        assert ended.status_code == 404, ended.text
        # An answer of 800,000 "€" is 1.6 million characters (text and structured content) but 4.8 MB: over the
        # 4 MiB a session may keep, it is not kept, nor what came before it (counted in characters, it was kept).
        hog = _session(served)
        first = _event_ids(echo(hog, 1, "small"))
        big = _event_ids(echo(hog, 2, "€" * 800_000))
        assert not _resumed(served.url, hog, big[0]) and not _resumed(served.url, hog, first[0])
        if store == "shared":
            assert stored(hog["Mcp-Session-Id"]) == 0
        other = _session(served)  # non-ASCII under the cap in bytes (1.8 MB) is kept and resumed as before
        kept = _event_ids(echo(other, 1, "€" * 300_000))
        assert _resumed(served.url, other, kept[0])
        assert "still served" in echo(_session(served), 1, "still served").text


# ---------------------------------------------------------------- legacy SSE connections
async def test_legacy_sse_connections_per_caller_are_capped_and_others_keep_being_served(tmp_path):
    import contextlib

    from mcp import Client
    from mcp.client.sse import sse_client

    keys = Keys()
    try:
        served, resource = _oauth(tmp_path, keys, env={"PLEXOR_MAX_SSE_PER_CALLER": "4"},
                                  args=("--transport", "sse", "--max-connections", "12"))
        with served as px, contextlib.ExitStack() as stack, httpx.Client(timeout=30) as http:
            stack.callback(_OPEN.clear)
            hog = {"Authorization": f"Bearer {keys.mint(resource, sub='hog')}"}
            statuses = []
            for _ in range(16):  # more than the server's connections: was 503 for everyone
                response = stack.enter_context(http.stream("GET", px.base + "/sse", headers=hog))
                statuses.append(response.status_code)
                if response.status_code == 200:
                    _OPEN.append(response.iter_lines())
                    assert next(_OPEN[-1]).startswith("event: endpoint")
                else:
                    response.read()
                    assert "4 open legacy SSE connections per caller" in response.json()["message"]
                    assert "PLEXOR_MAX_SSE_PER_CALLER" in response.json()["message"]
                    response.close()
            assert statuses == [200] * 4 + [429] * 12
            assert healthz(px, px.static)["kernel"]["state"] == "ready"
            other = {"Authorization": f"Bearer {keys.mint(resource, sub='other')}"}
            async with Client(sse_client(px.base + "/sse", headers=other), mode="legacy") as client:
                result = await client.call_tool("ledger_balance", {})
                assert not result.is_error
    finally:
        keys.close()


# ---------------------------------------------------------------- tasks
TASKS_CAPS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _task_call(px, token: str, seconds: float, label: str = "", ttl: int | None = None) -> dict:
    from auth.support import SITE as AUTH_SITE  # noqa: F401 - the served plugins are on its path

    meta = {**META, "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS}
    params: dict = {"name": "slow_compute", "arguments": {"seconds": seconds, "label": label}, "_meta": meta}
    if ttl is not None:
        params["task"] = {"ttl": ttl}
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    return _answer(_call(px, token, body, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                             "Mcp-Name": "slow_compute"}))


def _task_get(px, token: str, task_id: str) -> dict:
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS}
    body = {"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
    return _answer(_call(px, token, body, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get",
                                             "Mcp-Name": task_id}))


def _task_cancel(px, token: str, task_id: str) -> None:
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": TASKS_CAPS}
    body = {"jsonrpc": "2.0", "id": 8, "method": "tasks/cancel", "params": {"taskId": task_id, "_meta": meta}}
    answer = _call(px, token, body, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/cancel",
                                       "Mcp-Name": task_id})
    assert answer.status_code == 200 and "result" in _answer(answer), answer.text


def test_tasks_are_capped_per_caller_in_arguments_and_in_results(tmp_path):
    import time

    from auth.support import SITE as AUTH_SITE
    from conformance.serving import SITE as FIXTURES

    keys = Keys()
    env = {"PLEXOR_PLUGINS": "ledger,conformance-slow", "PYTHONPATH": os.pathsep.join([str(AUTH_SITE), str(FIXTURES)]),
           "PLEXOR_MAX_TASKS_PER_CALLER": "2", "PLEXOR_MAX_TASK_ARGUMENTS_BYTES": "4096",
           "PLEXOR_MAX_TASK_RESULT_BYTES": "4096", "PLEXOR_MAX_STORED_TASKS_PER_CALLER": "3"}
    try:
        served, resource = _oauth(tmp_path, keys, env=env, args=("--stateless",))
        with served as px:
            hog = keys.mint(resource, sub="hog", scope="conformance-slow:read conformance-slow:write")
            other = keys.mint(resource, sub="other", scope="conformance-slow:read conformance-slow:write ledger:read")
            started = [_task_call(px, hog, 60) for _ in range(2)]
            started = [t.get("result", t) for t in started]
            assert all(t.get("resultType") == "task" for t in started), started
            refused = _task_call(px, hog, 60)
            assert "this caller has 2 tasks running" in refused["error"]["message"], refused
            assert "PLEXOR_MAX_TASKS_PER_CALLER" in refused["error"]["message"]
            _task_cancel(px, hog, started.pop(0)["taskId"])  # still kept (cancelled) until it expires
            started.append(_task_call(px, hog, 60)["result"])
            _task_cancel(px, hog, started.pop(0)["taskId"])
            kept = _task_call(px, hog, 60)  # one running, three kept
            assert "this caller has 3 tasks kept" in kept["error"]["message"], kept
            assert "PLEXOR_MAX_STORED_TASKS_PER_CALLER" in kept["error"]["message"]
            assert _task_call(px, other, 0.1, ttl=60_000)["result"]["resultType"] in ("task", "complete")
            big = _task_call(px, other, 0.1, label="x" * 5000)
            assert "PLEXOR_MAX_TASK_ARGUMENTS_BYTES" in big["error"]["message"], big
            grown = _task_call(px, other, 1.0, label="y" * 3000, ttl=60_000)["result"]  # 3 KB in, twice that out
            task_id = grown["taskId"]
            deadline = time.monotonic() + 30
            while (task := _task_get(px, other, task_id)["result"])["status"] == "working":
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert task["status"] == "failed" and "PLEXOR_MAX_TASK_RESULT_BYTES" in task["statusMessage"], task
            for running in started:  # the server then stops at once, not after the hog's 60 s
                _task_cancel(px, hog, running["taskId"])
    finally:
        keys.close()


def test_the_bytes_of_a_callers_stored_tasks_are_capped(tmp_path):
    import time

    from auth.support import SITE as AUTH_SITE
    from conformance.serving import SITE as FIXTURES

    keys = Keys()
    env = {"PLEXOR_PLUGINS": "ledger,conformance-slow", "PYTHONPATH": os.pathsep.join([str(AUTH_SITE), str(FIXTURES)]),
           "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER": "8192"}
    try:
        served, resource = _oauth(tmp_path, keys, env=env, args=("--stateless",))
        with served as px:
            hog = keys.mint(resource, sub="hog", scope="conformance-slow:read conformance-slow:write")
            other = keys.mint(resource, sub="other", scope="conformance-slow:read conformance-slow:write ledger:read")
            running = [_task_call(px, hog, 60, "€" * 1000)["result"] for _ in range(2)]  # 3,025 bytes of arguments each
            assert all(t["resultType"] == "task" for t in running), running
            refused = _task_call(px, hog, 60, "€" * 1000)["error"]
            assert refused["code"] == -32600 and "would hold 9075 bytes" in refused["message"], refused
            assert "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER" in refused["message"]

            def ended(task_id: str) -> dict:
                deadline = time.monotonic() + 30
                while (task := _task_get(px, other, task_id)["result"])["status"] == "working":
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
                return dict(task)

            kept = _task_call(px, other, 0.2, "y" * 1800, ttl=60_000)["result"]  # another caller is served (about 5.7 KB)
            assert ended(kept["taskId"])["status"] == "completed"
            grown = _task_call(px, other, 0.2, "z" * 1500, ttl=60_000)["result"]  # admitted; its result passes
            task = ended(grown["taskId"])
            assert task["status"] == "failed" and "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER" in task["statusMessage"], task
            for started in running:
                _task_cancel(px, hog, started["taskId"])
    finally:
        keys.close()


def test_task_caps_hold_against_a_burst_of_concurrent_calls(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from auth.support import SITE as AUTH_SITE
    from conformance.serving import SITE as FIXTURES

    keys = Keys()
    env = {"PLEXOR_PLUGINS": "ledger,conformance-slow", "PYTHONPATH": os.pathsep.join([str(AUTH_SITE), str(FIXTURES)]),
           "PLEXOR_MAX_TASKS_PER_CALLER": "2", "PLEXOR_MAX_STORED_TASKS_PER_CALLER": "3"}
    try:
        served, resource = _oauth(tmp_path, keys, env=env, args=("--stateless",))
        with served as px:
            hog = keys.mint(resource, sub="hog", scope="conformance-slow:read conformance-slow:write")
            other = keys.mint(resource, sub="other", scope="conformance-slow:read conformance-slow:write ledger:read")
            with ThreadPoolExecutor(12) as pool:  # twelve at once, each on its own connection
                burst = list(pool.map(lambda i: _task_call(px, hog, 60, f"b{i}"), range(12)))
            tasks = [a["result"] for a in burst if a.get("result", {}).get("resultType") == "task"]
            refused = [a["error"]["message"] for a in burst if "error" in a]
            assert len(tasks) == 2 and len(refused) == 10, burst  # all twelve became tasks before the fix
            assert all("PLEXOR_MAX_TASKS_PER_CALLER" in m for m in refused), refused
            assert _task_call(px, other, 0.1, ttl=60_000)["result"]["resultType"] in ("task", "complete")
            for running in tasks:
                _task_cancel(px, hog, running["taskId"])
    finally:
        keys.close()


def test_an_expired_task_stops_running(tmp_path):
    import time

    from conformance.serving import SITE as FIXTURES  # noqa: F401

    with serve_http(tmp_path, env={"PLEXOR_PLUGINS": "conformance-slow"}) as served:
        sent = _session(served)  # 2025-11-25: the client sets the task's ttl
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "slow_compute", "arguments": {"seconds": 120}, "task": {"ttl": 1000}}}
        reply = _answer(httpx.post(served.url, json=call, headers=sent, timeout=30))
        assert "task" in reply["result"], reply
        assert healthz(served)["kernel"]["inflight"] == 1
        deadline = time.monotonic() + 20  # the task's work ends with its ttl, not after 120 s
        while healthz(served)["kernel"]["inflight"]:
            assert time.monotonic() < deadline, "the expired task is still running"
            time.sleep(0.2)
        done = modern_post(served, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.1, "label": "again"}},
                           name="slow_compute")[1]
        assert "Computed again" in done["result"]["content"][0]["text"], done


def test_a_task_obeys_the_request_time_limit_unless_its_tool_declares_longer(tmp_path):
    import time

    from conformance.serving import SITE as FIXTURES  # noqa: F401

    tasks_caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    with serve_http(tmp_path, "--request-timeout", "2", env={"PLEXOR_PLUGINS": "conformance,conformance-slow",
                                                              "PLEXOR_OTEL": "1"}) as served:
        sent = _session(served)

        def legacy_task(tool: str, seconds: float) -> str:
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": tool, "arguments": {"seconds": seconds}, "task": {"ttl": 600_000}}}
            reply = _answer(httpx.post(served.url, json=call, headers=sent, timeout=30))
            return str(reply["result"]["task"]["taskId"])

        def legacy_get(task_id: str) -> dict:
            body = {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": task_id}}
            return dict(_answer(httpx.post(served.url, json=body, headers=sent, timeout=30))["result"])

        def modern_task(tool: str, seconds: float) -> str:
            status, reply = modern_post(served, "tools/call", {"name": tool, "arguments": {"seconds": seconds}},
                                        caps=tasks_caps, name=tool)
            assert reply["result"]["resultType"] == "task", reply
            return str(reply["result"]["taskId"])

        def modern_get(task_id: str) -> dict:
            return dict(modern_post(served, "tasks/get", {"taskId": task_id}, caps=tasks_caps, name=task_id)[1]["result"])

        def ended(get, task_id: str) -> dict:
            deadline = time.monotonic() + 20
            while (task := get(task_id))["status"] == "working":
                assert time.monotonic() < deadline, task
                time.sleep(0.2)
            return task

        started = time.monotonic()
        overrun = [(legacy_get, legacy_task("slow_compute", 60)), (modern_get, modern_task("slow_compute", 60)),
                   (legacy_get, legacy_task("slow_detached", 60))]  # a call that became a task (ctx.detach())
        patient = [(legacy_get, legacy_task("slow_patient", 3.5)), (modern_get, modern_task("slow_patient", 3.5))]
        for get, task_id in overrun:  # as a plain call would be: cancelled at 2 s, the task failed, naming the limit
            task = ended(get, task_id)
            assert task["status"] == "failed", task
            assert "limit of 2 s" in task["statusMessage"] and "--request-timeout" in task["statusMessage"], task
            assert "PLEXOR_REQUEST_TIMEOUT" in task["statusMessage"]
        assert time.monotonic() - started < 15  # not the tool's 60 s
        modern_failed = modern_get(overrun[1][1])
        assert modern_failed["error"]["data"] == {"type": "timeout", "limit_seconds": 2.0}, modern_failed
        for get, task_id in patient:  # a tool declaring timeout=30 runs past the server's 2 s, as a task
            assert ended(get, task_id)["status"] == "completed"
        plain = modern_post(served, "tools/call", {"name": "slow_patient", "arguments": {"seconds": 3}},
                            name="slow_patient")[1]["result"]  # and as a plain call
        assert not plain.get("isError") and "Computed it in 3 s" in plain["content"][0]["text"], plain
        cut = modern_post(served, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 3}},
                          name="slow_compute")[1]["result"]
        assert cut["isError"] and "limit of 2 s" in cut["content"][0]["text"], cut
        assert healthz(served)["kernel"]["inflight"] == 0
        metrics = httpx.get(served.base + "/metrics", timeout=10).text
        assert 'plexor_limit_refusals_total{plexor_limit="run_seconds"} 4.0' in metrics, metrics[-2000:]
        done = modern_post(served, "tools/call", {"name": "test_echo", "arguments": {"text": "still served"}},
                           name="test_echo")[1]
        assert "still served" in done["result"]["content"][0]["text"]


SYNC_NAP = """
import time
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def nap(seconds: float) -> dict:
        '''Sleep in a worker thread (a plain def), then answer.'''
        time.sleep(seconds)
        return {"slept": seconds}
    register(nap, task="optional")
"""


def test_a_sync_tool_is_answered_at_the_time_limit_not_when_its_thread_returns(tmp_path, site_dir):
    """A plain `def` tool runs in a thread nothing can interrupt; before, the caller waited for it however long the
    limit was (and then got its result). Now it is answered at the limit, plain or as a task, in both eras."""
    import time

    from conformance.serving import SITE
    from conftest import install_fake_dist
    from test_single_exchange import _call, _events

    install_fake_dist(site_dir, "plexor-fakesync", "fakesync", "plexor_fakesync", SYNC_NAP)
    env = {"PLEXOR_PLUGINS": "conformance,fakesync", "PYTHONPATH": f"{site_dir}{os.pathsep}{SITE}"}
    tasks_caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    with serve_http(tmp_path, "--stateless", "--request-timeout", "1", env=env) as served:
        for era in ("2026-07-28", "2025-11-25"):
            started = time.monotonic()
            body, headers = _call(1, "fakesync_nap", {"seconds": 30}, era)
            reply = httpx.post(served.url, json=body, headers=headers, timeout=60)
            answer = reply.json() if reply.headers["content-type"].startswith("application/json") else _events(
                reply.text)[-1]
            assert answer["result"]["isError"] and "limit of 1 s" in answer["result"]["content"][0]["text"], answer
            assert time.monotonic() - started < 10, era  # not the tool's 30 s
        status, reply = modern_post(served, "tools/call", {"name": "fakesync_nap", "arguments": {"seconds": 30}},
                                    caps=tasks_caps, name="fakesync_nap")
        task_id = reply["result"]["taskId"]
        deadline = time.monotonic() + 10
        while (task := modern_post(served, "tasks/get", {"taskId": task_id}, caps=tasks_caps,
                                   name=task_id)[1]["result"])["status"] == "working":
            assert time.monotonic() < deadline, task
            time.sleep(0.2)
        assert task["status"] == "failed" and "limit of 1 s" in task["statusMessage"], task
        quick = modern_post(served, "tools/call", {"name": "fakesync_nap", "arguments": {"seconds": 0.1}},
                            name="fakesync_nap")[1]["result"]
        assert quick["structuredContent"] == {"slept": 0.1}, quick  # and a sync call within the limit is served

        async def through_the_sdks_client() -> None:
            import anyio
            from mcp import Client

            async with Client(served.url, mode="2026-07-28") as client:
                with anyio.fail_after(10):  # not the tool's 30 s
                    result = await client.call_tool("fakesync_nap", {"seconds": 30})
            assert result.is_error and "limit of 1 s" in result.content[0].text, result

        import anyio

        anyio.run(through_the_sdks_client)


# ---------------------------------------------------------------- stateful sessions
async def test_sessions_per_caller_and_in_total_make_room_by_closing_the_oldest_idle_one(tmp_path):
    keys = Keys()
    env = {"PLEXOR_MAX_SESSIONS_PER_CALLER": "2", "PLEXOR_MAX_SESSIONS": "4"}
    try:
        served, resource = _oauth(tmp_path, keys, env=env)
        with served as px:
            def opened(sub: str) -> dict[str, str]:
                return _session(px, {"Authorization": f"Bearer {keys.mint(resource, sub=sub)}"})

            def works(sent: dict[str, str]) -> httpx.Response:
                return httpx.post(px.url, json=LEDGER, headers=sent, timeout=30)

            first, second = opened("hog"), opened("hog")
            assert works(first).status_code == 200  # the first is now the more recently used
            third = opened("hog")
            closed = works(second)
            assert closed.status_code == 404, closed.text
            assert "PLEXOR_MAX_SESSIONS_PER_CALLER" in closed.json()["error"]["message"]
            assert "to make room for a newer one" in closed.json()["error"]["message"]
            assert works(first).status_code == 200 and works(third).status_code == 200
            mine = [opened("other"), opened("other")]  # another caller has its own two
            assert all(works(s).status_code == 200 for s in mine)
            late = opened("late")  # five in all: the oldest idle of anyone's goes
            gone = works(first)
            assert gone.status_code == 404 and "(PLEXOR_MAX_SESSIONS)" in gone.json()["error"]["message"]
            assert all(works(s).status_code == 200 for s in (third, *mine, late))
            assert "balance" in await _echo_through_sdk(px.url, "legacy", px.static, tool="ledger_balance")
    finally:
        keys.close()


async def test_sessions_never_closed_stay_within_the_cap_in_memory(tmp_path):
    import asyncio

    env = {"PLEXOR_MAX_SESSIONS_PER_CALLER": "64", "PLEXOR_MAX_SESSIONS": "64"}
    with serve_http(tmp_path, env=env) as served:
        pid = int(healthz(served)["pid"])
        async with httpx.AsyncClient(timeout=60) as http:
            async def opened(count: int) -> list[str]:
                ids = []
                for _ in range(count // 8):  # eight at a time, each initialized and never closed
                    answers = await asyncio.gather(*(http.post(served.url, json=INIT, headers=MCP_HEADERS)
                                                     for _ in range(8)))
                    assert all(r.status_code == 200 for r in answers), [(r.status_code, r.text[:300]) for r in answers if r.status_code != 200]
                    ids += [r.headers["mcp-session-id"] for r in answers]
                return ids

            await opened(128)  # warm up: the cap reached, sessions already closed to make room
            before = rss_mib(pid)
            ids = await opened(1600)
            grown = rss_mib(pid) - before
            assert grown < 16, grown  # 1,600 sessions kept would take about 70 MiB (6,000 took 250)
            alive = await http.post(served.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                    headers={**MCP_HEADERS, "Mcp-Session-Id": ids[-1]})
            assert alive.status_code == 200
            gone = await http.post(served.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                   headers={**MCP_HEADERS, "Mcp-Session-Id": ids[0]})
            assert gone.status_code == 404 and "PLEXOR_MAX_SESSIONS" in gone.text
        assert "still served" in await _echo_through_sdk(served.url, "legacy")


def test_a_caller_without_a_token_cannot_claim_other_addresses_with_forwarded_headers(tmp_path):
    # Callers without a token are told apart by address; uvicorn's default would take that address from
    # X-Forwarded-For on a loopback connection, so one local process could pass for any number of callers.
    with serve_http(tmp_path, "--transport", "sse", env={"PLEXOR_MAX_SSE_PER_CALLER": "1"}) as px, \
            httpx.Client(timeout=30) as http:
        with http.stream("GET", px.base + "/sse") as first:
            assert first.status_code == 200
            for forwarded in ("10.0.0.1", "10.0.0.2"):
                with http.stream("GET", px.base + "/sse", headers={"X-Forwarded-For": forwarded,
                                                                   "X-Real-IP": forwarded}) as spoofed:
                    assert spoofed.status_code == 429, (forwarded, spoofed.status_code)  # before reading a stream
                    spoofed.read()
                    assert "PLEXOR_MAX_SSE_PER_CALLER" in spoofed.json()["message"]


async def test_only_an_initialize_makes_room_and_a_burst_of_them_stays_under_the_cap(tmp_path):
    import asyncio

    keys = Keys()
    env = {"PLEXOR_MAX_SESSIONS_PER_CALLER": "2", "PLEXOR_MAX_SESSIONS": "16"}
    try:
        served, resource = _oauth(tmp_path, keys, env=env)
        with served as px:
            hog = {"Authorization": f"Bearer {keys.mint(resource, sub='hog')}"}
            held = [_session(px, hog), _session(px, hog)]  # at the cap
            ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
            for body in (ping, LEDGER, [ping], {"junk": True}):  # no session id, and no initialize: nobody is closed
                httpx.post(px.url, json=body, headers={**MCP_HEADERS, **hog}, timeout=30)
            for sent in held:  # before the fix the ping closed the older one
                answer = httpx.post(px.url, json=LEDGER, headers=sent, timeout=30)
                assert answer.status_code == 200, answer.text

            burst = {"Authorization": f"Bearer {keys.mint(resource, sub='burst')}"}
            async with httpx.AsyncClient(timeout=60) as http:
                opened = await asyncio.gather(*(http.post(px.url, json=INIT, headers={**MCP_HEADERS, **burst})
                                                for _ in range(8)))
                ids = [r.headers["mcp-session-id"] for r in opened if r.status_code == 200]
                assert all(r.status_code in (200, 429) for r in opened), [r.text for r in opened]
                alive = [s for s in ids if (await http.post(px.url, json={"jsonrpc": "2.0", "id": 6, "method": "ping"},
                                                            headers={**MCP_HEADERS, **burst, "Mcp-Session-Id": s})
                                            ).status_code == 200]
            assert 1 <= len(alive) <= 2, (len(ids), len(alive))  # all eight stayed open before the fix
    finally:
        keys.close()


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize(("variable", "raw", "kind"), [
    ("PLEXOR_MAX_SESSIONS", "0.5", "whole number"),  # int() would have made it 0: every session refused
    ("PLEXOR_MAX_SUBSCRIPTIONS", "inf", "whole number"),  # float('inf') passed, then int() raised
    ("PLEXOR_AUTH_FETCH_SECONDS", "soon", "positive number"),
    ("PLEXOR_MAX_NESTING", "500", "at most 200"),  # the SDK's parser refuses deeper anyway
])
def test_a_bad_limit_value_stops_serve_at_once_naming_the_variable(tmp_path, transport, variable, raw, kind):
    import subprocess
    import sys

    from conformance.serving import fixture_env

    env = fixture_env(tmp_path, **{variable: raw, "PLEXOR_PLUGINS": "example"})
    done = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", transport, "--port", "0"],
                          stdin=subprocess.PIPE, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{variable}={raw!r} is not a valid limit" in done.stderr and kind in done.stderr
    assert "Traceback" not in done.stderr


def test_every_limit_has_a_line_in_the_security_docs():
    from pathlib import Path

    from plexor.limits import LIMITS

    text = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    section = text[text.index("\n## Limits"):text.index("\n## ", text.index("\n## Limits") + 1)]
    missing = [limit.env for limit in LIMITS.values() if f"`{limit.env}`" not in section]
    assert not missing, f"docs/security.md#limits lacks {missing}"


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "60", True])
async def test_a_bad_declared_timeout_fails_its_plugin_naming_it(plexor, bad):
    import types

    from plexor import hookimpl

    def work() -> str:
        """Work."""
        return "done"

    plugin = types.SimpleNamespace(PLEXOR_NAMESPACE="slowish", plexor_register_tools=hookimpl(
        lambda register, settings: register(work, timeout=bad)))
    async with plexor.kernel([("slowish", plugin)]) as kernel:
        record = kernel.records["slowish"]
        assert record.state == "failed" and f"declares timeout={bad!r}" in (record.error or ""), record.error
