"""The authorization boundary holds through every other way in: batches, legacy SSE, odd forms of a name.

As ``test_auth_seams``: a real ``plexor serve`` as an OAuth resource server, real tokens (PyJWT, against a
JWKS the test serves) and the SDK's own client; the ``ledger`` test plugin records every call it
receives, so each refusal is also checked where it matters: nothing reached the plugin.

1. a JSON-RPC batch (no era of MCP serves one): every id answered once, each refused, nothing runs,
   and no ``allow`` audited for what never ran;
2. legacy SSE (``GET /sse`` + ``POST /messages/``): a tool outside the token's scopes, a dotted prompt,
   a plugin's own method, a task-augmented call, and the same under a profile (``Plexor-Profile``);
3. every form of a name the kernel resolves is refused as the canonical one is; every other form is
   unknown to the kernel too (case, whitespace, a doubled separator, look-alike characters).

``plexor serve --profile`` over stdio is ``test_auth_ways_in_stdio``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from auth.support import Issuer, client, free_port, raw, served_plexor
from conformance.serving import INIT, MCP_HEADERS

pytestmark = pytest.mark.anyio

PROFILES = {"health": {"tools": ["plexor_health"]}}
ERAS = ["2025-11-25", "2026-07-28"]
WEAK = "plexor:read"  # the ledger's tools, prompt, resource and methods all need more


@pytest.fixture
def anyio_backend():
    return "asyncio"


@contextlib.contextmanager
def _stack(tmp_path_factory: Any, name: str, *args: str) -> Any:
    port = free_port()
    issuer = Issuer(f"http://127.0.0.1:{port}/mcp")
    key = issuer.publish("k1")
    try:
        auth = {"issuer": issuer.url, "resource": issuer.resource, "leeway": 0}
        with served_plexor(tmp_path_factory.mktemp(name) / "home", port, auth=auth, profiles=PROFILES, args=args) as px:
            yield lambda scope, **claims: issuer.token(key, "k1", scope=scope, **({"sub": "alice", "client_id": "app"}
                                                                                   | claims)), px
    finally:
        issuer.stop()


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    with _stack(tmp_path_factory, "ways-http") as stack:
        yield stack


@pytest.fixture(scope="module")
def sse(tmp_path_factory):
    with _stack(tmp_path_factory, "ways-sse", "--transport", "sse") as stack:
        yield stack


def reached(px: Any, *calls: str) -> list[dict[str, Any]]:
    """What the ledger received of ``calls`` (every call when none are named)."""
    return [c for c in px.calls() if not calls or c["call"] in calls]


# -- 1. batches ---------------------------------------------------------------------------------------
BATCH = [{"jsonrpc": "2.0", "id": "health", "method": "tools/call", "params": {"name": "plexor_health", "arguments": {}}},
         {"jsonrpc": "2.0", "id": "post", "method": "tools/call", "params": {"name": "ledger_post", "arguments": {"amount": 1}}},
         {"jsonrpc": "2.0", "id": "task", "method": "tools/call",
          "params": {"name": "ledger.post", "arguments": {"amount": 2}, "task": {"ttl": 60_000}}},
         {"jsonrpc": "2.0", "id": "prompt", "method": "prompts/get", "params": {"name": "ledger.summary"}},
         {"jsonrpc": "2.0", "id": "export", "method": "ledger/export", "params": {"account": "m"}}]


def _headers(px: Any, bearer: str, era: str, path: str) -> dict[str, str]:
    """The headers of a request in ``era``; for 2025-11-25 a session is opened first (as a client would)."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {bearer}", "MCP-Protocol-Version": era}
    if era == "2025-11-25":
        opened = httpx.post(px.url + path, json=INIT, headers=headers, timeout=30)
        assert opened.status_code == 200, opened.text
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        done = httpx.post(px.url + path, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers,
                          timeout=30)
        assert done.status_code == 202, done.text
    return headers


@pytest.mark.parametrize("era", ERAS)
async def test_a_batch_mixing_allowed_and_refused_calls_runs_nothing_and_answers_every_id_once(http, era):
    token, px = http
    before, audited = px.calls(), len(px.audit())
    for bearer, path in ((token(WEAK), ""), (px.static, "/health"), (token("ledger:write plexor:read"), "")):
        r = httpx.post(px.url + path, json=BATCH, headers=_headers(px, bearer, era, path), timeout=30)
        answers = r.json()
        assert r.status_code == 400 and isinstance(answers, list), (path, r.status_code, r.text)
        assert [a["id"] for a in answers] == [m["id"] for m in BATCH]  # every id, once, in order
        assert all(a["error"]["code"] == -32600 and "batches" in a["error"]["message"] for a in answers)
    assert px.calls() == before  # nothing of any batch reached the plugin
    assert [a for a in px.audit()[audited:] if a.get("decision") == "allow"] == []  # no allow for what never ran
    async with client(px.url, token("ledger:write plexor:read"), era) as c:  # the same calls, one at a time: decided
        assert not (await c.call_tool("plexor_health", {})).is_error
    async with client(px.url, token(WEAK), era) as c:
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError):  # the SDK client's answer to the 403
            await c.call_tool("ledger_post", {"amount": 1})
    assert px.calls() == before


@pytest.mark.parametrize("era", ERAS)
async def test_a_notification_naming_a_call_runs_nothing_and_is_never_audited_as_allowed(http, era):
    token, px = http
    before, audited = px.calls(), len(px.audit())
    for bearer in (token(WEAK), token("ledger:write plexor:read")):  # refused or allowed as a request, alike here
        headers = _headers(px, bearer, era, "")
        for message in BATCH[1:]:  # each call of the batch, without its id: a notification
            note = {k: v for k, v in message.items() if k != "id"}
            r = httpx.post(px.url, json=note, headers=headers, timeout=30)
            assert r.status_code < 500, (note, r.status_code, r.text)
    assert px.calls() == before  # no notification reached the plugin
    assert [a for a in px.audit()[audited:] if a.get("decision") == "allow"] == []  # none audited as a call


# -- 2. legacy SSE ------------------------------------------------------------------------------------
class Sse:
    """A legacy SSE session by hand: the SDK's SSE client stops sending after a refused POST (its writer
    raises on the 403), so the refusal itself is read here; answers come from the event stream."""

    def __init__(self, lines: AsyncIterator[str], http: httpx.AsyncClient, base: str, headers: dict[str, str]) -> None:
        self.lines, self.http, self.base, self.headers = lines, http, base, headers
        self.endpoint = ""

    async def event(self) -> tuple[str, str]:
        kind, data = "message", []
        async for line in self.lines:
            if not line:
                if data:
                    return kind, "\n".join(data)
                continue
            field, _, value = line.partition(":")
            if field == "event":
                kind = value.strip()
            elif field == "data":
                data.append(value.removeprefix(" "))
        raise AssertionError("the event stream ended")

    async def post(self, message: dict[str, Any]) -> httpx.Response:
        return await self.http.post(self.base + self.endpoint, json=message, headers=self.headers)

    async def ask(self, method: str, params: dict[str, Any], rid: Any) -> list[dict[str, Any]]:
        """Post a request and read the stream until its answer: every message heard meanwhile, in order."""
        assert (await self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})).status_code == 202
        heard = []
        with anyio.fail_after(20):
            while not heard or heard[-1].get("id") != rid:
                kind, data = await self.event()
                if kind == "message":
                    heard.append(json.loads(data))
        return heard


@contextlib.asynccontextmanager
async def sse_session(px: Any, bearer: str, **headers: str) -> AsyncIterator[Sse]:
    headers = {"Authorization": f"Bearer {bearer}", **headers}
    async with httpx.AsyncClient(timeout=30) as http, http.stream("GET", px.base + "/sse", headers=headers) as stream:
        assert stream.status_code == 200
        session = Sse(stream.aiter_lines(), http, px.base, headers)
        kind, session.endpoint = await session.event()
        assert kind == "endpoint" and session.endpoint.startswith("/messages/?session_id=")
        assert (await session.ask("initialize", INIT["params"], 0))[-1]["result"]["protocolVersion"] == "2025-11-25"
        assert (await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status_code == 202
        yield session


SSE_REFUSED = [("tools/call", {"name": "ledger_post", "arguments": {"amount": 1}}, "ledger:write"),
               ("tools/call", {"name": "ledger.post", "arguments": {"amount": 2}, "task": {"ttl": 60_000}}, "ledger:write"),
               ("prompts/get", {"name": "ledger.summary"}, "ledger:read"),
               ("prompts/get", {"name": "summary"}, "ledger:read"),
               ("ledger/export", {"account": "m"}, "ledger:write")]


async def test_legacy_sse_refuses_what_the_token_lacks_scopes_for(sse):
    token, px = sse
    before = px.calls()
    async with sse_session(px, token(WEAK)) as s:
        for rid, (method, params, needed) in enumerate(SSE_REFUSED, start=1):
            r = await s.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            assert r.status_code == 403 and f'scope="{needed}"' in r.headers["www-authenticate"], (method, params, r.text)
        heard = await s.ask("tools/call", {"name": "plexor_health", "arguments": {}}, "after")  # the session still works
        assert [m.get("id") for m in heard] == ["after"] and not heard[-1]["result"]["isError"]  # no refused one ran
    assert px.calls() == before
    refused = [a for a in px.audit() if a.get("reason") == "insufficient_scope" and a.get("subject") == "alice"]
    assert {"tools/call", "prompts/get", "ledger/export"} <= {a["method"] for a in refused}
    async with sse_session(px, token("ledger:write")) as s:  # the control: with the scope, the same call runs
        assert (await s.ask("tools/call", {"name": "ledger_post", "arguments": {"amount": 3}}, 1))[-1]["result"][
            "structuredContent"] == {"posted": 3}
    assert reached(px, "post")[len(reached(px, "post")) - 1:] == [{"call": "post", "amount": 3}]


async def test_legacy_sse_refuses_what_the_profile_leaves_out(sse):
    from mcp import Client
    from mcp.client.sse import sse_client
    from mcp.shared.exceptions import MCPError

    token, px = sse
    before = px.calls()
    for bearer, header in ((px.static, {"Plexor-Profile": "health"}), (token("ledger:write plexor:read", plexor_profile="health"), {})):
        async with Client(sse_client(px.base + "/sse", headers={"Authorization": f"Bearer {bearer}", **header}),
                          mode="legacy") as c:
            assert [t.name for t in (await c.list_tools()).tools] == ["plexor_health"]
            plain = await c.call_tool("ledger_post", {"amount": 4})
            assert plain.is_error and "not in this connection's profile 'health'" in plain.content[0].text
            task = await raw(c, "tools/call", {"name": "ledger.post", "arguments": {"amount": 5}, "task": {"ttl": 60_000}},
                             era="2025-11-25")
            assert "task" not in task and task["isError"] is True, task  # no task was made
            for name in ("ledger.summary", "summary"):
                with pytest.raises(MCPError, match="not available to this connection"):
                    await c.get_prompt(name)
            with pytest.raises(MCPError, match="not available to this connection"):
                await raw(c, "ledger/export", {"account": "m"}, era="2025-11-25")
            with pytest.raises(MCPError, match="not available to this connection"):
                await c.read_resource("ledger://entries")
    assert px.calls() == before
    for path in ("/sse/health", "/sse/nope"):  # no profile in the path of a legacy SSE stream: never served at all
        r = httpx.get(px.base + path, headers={"Authorization": f"Bearer {px.static}"}, timeout=30)
        assert r.status_code == 404, (path, r.status_code)


# -- 3. forms of a name -------------------------------------------------------------------------------
def forms(full: str, dotted: str, bare: str) -> list[str]:
    """The canonical forms, then case, whitespace, doubled separators and look-alike characters."""
    odd = [full.upper(), full.title(), bare.upper(), f" {full}", f"{full} ", f"{full}\n", f"\t{bare}", f"{full}\u0000",
           full.replace("_", "__", 1), dotted.replace(".", "..", 1), dotted.replace(".", "._", 1), f"{dotted}.",
           full.replace("_", "\u200b_", 1), full.replace("e", "\u0435", 1), "\uff4c" + full[1:],
           full.replace("_", "\uff3f", 1), dotted.replace(".", "\u2024", 1), dotted.replace(".", "\uff0e", 1),
           full.replace("_", "-", 1), full.replace("_", "/", 1), full.replace("_", " ", 1)]
    return list(dict.fromkeys([full, dotted, bare, *odd]))


async def _outcome(c: Any, kind: str, name: str) -> str:
    """``refused`` (the decision: the guard's 403, or the layer's answer), ``unknown`` (the kernel resolves no
    such name: its own guidance) or ``ran``."""
    from mcp.shared.exceptions import MCPError

    try:
        if kind == "tool":
            result = await c.call_tool(name, {"amount": 1})
            text = result.content[0].text if result.content else ""
            if result.is_error:
                return "unknown" if text.startswith("unknown tool") else (
                    "refused" if "not in this connection's profile" in text else text)
        elif kind == "prompt":
            await c.get_prompt(name)
        else:
            await c.read_resource(name)
    except MCPError as exc:
        message = exc.error.message
        if message.startswith(("unknown prompt", "no resource matches")):
            return "unknown"
        return "refused" if message == "Server returned an error response" or "not available to this connection" \
            in message else message
    return "ran"


URIS = ["ledger://entries", "LEDGER://entries", "Ledger://entries", "ledger://ENTRIES", " ledger://entries",
        "ledger://entries ", "ledger://entries\n", "ledger://entries/", "ledger://entries?all=1", "ledger://entries#top",
        "ledger:entries", "ledger:///entries", "ledger://%65ntries", "ledger://entrie\u0455", "\uff4cedger://entries"]
NAMES = {"tool": ("post", forms("ledger_post", "ledger.post", "post")),
         "prompt": ("summary", forms("ledger_summary", "ledger.summary", "summary")), "resource": ("entries", URIS)}


@pytest.mark.parametrize("kind", NAMES)
async def test_no_form_of_a_name_reaches_the_plugin_past_a_refusal(http, kind):
    token, px = http
    call, names = NAMES[kind]
    before = reached(px, call)
    outcomes: dict[str, dict[str, str]] = {}
    for who, url, bearer in (("scopes", px.url, token(WEAK)), ("profile", px.url + "/health", px.static),
                             ("operator", px.url, px.static)):
        async with client(url, bearer, "2026-07-28") as c:
            outcomes[who] = {name: await _outcome(c, kind, name) for name in names}
        if who != "operator":
            assert reached(px, call) == before, (who, outcomes[who])  # no form reached the plugin while refused
    resolved = {n for n, o in outcomes["operator"].items() if o == "ran"}
    assert set(names[:1 if kind == "resource" else 3]) <= resolved, outcomes["operator"]  # the canonical forms
    for who in ("scopes", "profile"):  # a form the kernel resolves is refused; any other is unknown to the kernel too
        refused = {n for n, o in outcomes[who].items() if o == "refused"}
        assert set(outcomes[who].values()) <= {"refused", "unknown"}, outcomes[who]
        if kind == "resource":  # any URI of the ledger's scheme is the ledger's to refuse, found or not
            assert resolved <= refused, (who, outcomes[who], resolved)
        else:
            assert refused == resolved, (who, outcomes[who], resolved)
    assert len(reached(px, call)) == len(before) + len(resolved), outcomes["operator"]  # only the operator's ran


async def test_a_profile_named_in_an_odd_form_is_that_profile_or_refused_never_every_tool(http):
    _, px = http
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {px.static}"}
    served = []
    for path, header in (("/mcp/Health", None), ("/mcp/%20health", None), ("/mcp/health/", None), ("/mcp//health", None),
                         ("/mcp/health%2F", None), ("/mcp/%68ealth", None), ("/mcp", "Health"), ("/mcp", "health, nope"),
                         ("/mcp", "health,health"), ("/mcp", "\u0127ealth".encode())):
        headers = auth if header is None else {**auth, "Plexor-Profile": header}
        r = httpx.post(px.base + path, json=INIT, headers=headers, timeout=30, follow_redirects=False)
        assert r.status_code in (200, 404), (path, header, r.status_code, r.text)
        if r.status_code == 200:
            served.append((path, header))
    assert served == [("/mcp/%68ealth", None)]  # percent-encoding is decoded before routing: it names "health"
    before = px.calls()
    async with client(px.base + "/mcp/%68ealth", px.static, "2026-07-28") as c:  # and it is served as that profile
        assert [t.name for t in (await c.list_tools()).tools] == ["plexor_health"]
        assert (await c.call_tool("ledger_post", {"amount": 1})).is_error
    assert px.calls() == before
