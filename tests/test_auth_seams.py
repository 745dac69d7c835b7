"""The authorization boundary holds for every kind of request, in both eras: the ways around it, closed.

One real ``plexor serve --transport http`` as an OAuth resource server, real tokens (PyJWT, signed
with a key whose JWKS the test serves: ``auth.support.Issuer``) and the SDK's own client, over
Streamable HTTP. The ``ledger`` test plugin records every call it receives, so a refusal is also
checked where it matters: nothing reached the plugin.

1. a connection's tool profile binds a tool call asked for as a task, as it binds a plain call;
2. a prompt is one thing under every name the kernel accepts (full, dotted, bare);
3. every URI of a ``subscriptions/listen`` stream is authorized, as ``resources/subscribe`` is;
4. a task's owner is the caller's principal: no token without a subject, nor one whose subject
   reads like the static token's, shares tasks with anyone else;
5. the server card lists only what the caller may use;
6. a plugin's own protocol method (``plexor_protocol_methods``) is decided as a tool call is: its
   declared scopes (else its plugin's write scope), then the connection's profile.
"""

from __future__ import annotations

import contextlib
import subprocess
from typing import Any

import anyio
import httpx
import pytest
from auth.support import Issuer, client, free_port, raw, served_plexor
from conformance.serving import INIT, MCP_HEADERS

pytestmark = pytest.mark.anyio

PROFILES = {"reader": {"tools": ["ledger_balance", "plexor_*"]}, "health": {"tools": ["plexor_health"]}}
ERAS = ["2025-11-25", "2026-07-28"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seams")
    port = free_port()
    issuer = Issuer(f"http://127.0.0.1:{port}/mcp")
    key = issuer.publish("k1")
    try:
        auth = {"issuer": issuer.url, "resource": issuer.resource, "leeway": 0}
        with served_plexor(tmp / "home", port, auth=auth, profiles=PROFILES) as px:
            yield issuer, key, px
    finally:
        issuer.stop()


def token(stack: Any, scope: str, **claims: Any) -> str:
    issuer, key, _ = stack
    return issuer.token(key, "k1", scope=scope, **({"sub": "alice", "client_id": "app"} | claims))


def posts(px: Any) -> list[dict[str, Any]]:
    return [c for c in px.calls() if c["call"] == "post"]


# -- 1. a profile binds a task-augmented call -------------------------------------------------------
@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_outside_the_profile_cannot_run_as_a_task(stack, era):
    _, _, px = stack
    before = len(posts(px))
    async with client(px.url + "/reader", px.static, era) as c:
        plain = await c.call_tool("ledger_post", {"amount": 3})
        assert plain.is_error and "not in this connection's profile 'reader'" in plain.content[0].text
        task = {"task": {"ttl": 60_000}} if era == "2025-11-25" else {}
        answer = await raw(c, "tools/call", {"name": "ledger_post", "arguments": {"amount": 4}, **task}, era=era)
        assert "task" not in answer and answer.get("resultType") != "task", answer  # no task was made
        assert answer["isError"] is True and "not in this connection's profile" in answer["content"][0]["text"]
        dotted = await raw(c, "tools/call", {"name": "ledger.post", "arguments": {"amount": 5}, **task}, era=era)
        assert dotted["isError"] is True
    assert len(posts(px)) == before  # nothing reached the plugin
    denied = [a for a in px.audit() if a.get("reason") == "not_in_profile" and a.get("target") == "ledger_post"]
    assert len(denied) >= 3


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_in_the_profile_still_runs_as_a_task(stack, era):
    _, _, px = stack
    async with client(px.url, token(stack, "ledger:write"), era) as c:
        task = {"task": {"ttl": 60_000}} if era == "2025-11-25" else {}
        answer = await raw(c, "tools/call", {"name": "ledger_post", "arguments": {"amount": 6}, **task}, era=era)
        if era == "2025-11-25":
            answer = await raw(c, "tasks/result", {"taskId": answer["task"]["taskId"]}, era=era)
        assert answer["structuredContent"] == {"posted": 6}


# -- 2. one name resolution -------------------------------------------------------------------------
@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_is_refused_under_every_name_the_kernel_accepts(stack, era):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    weak = token(stack, "plexor:read")
    before = [c for c in px.calls() if c["call"] == "summary"]
    for name in ("ledger_summary", "ledger.summary", "summary"):
        r = httpx.post(px.url, json={"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": name}},
                       headers={"Authorization": f"Bearer {weak}", "Accept": "application/json, text/event-stream",
                                "MCP-Protocol-Version": era, "Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 403, (name, r.status_code, r.text)
        assert 'scope="ledger:read"' in r.headers["www-authenticate"] and "ledger_summary" in r.json()["error_description"]
        async with client(px.url, weak, era) as c:
            with pytest.raises(MCPError):  # the SDK client's answer to the 403
                await c.get_prompt(name)
    async with client(px.url, token(stack, "ledger:read"), era) as c:  # with the scope, every form works
        for name in ("ledger_summary", "ledger.summary", "summary"):
            assert "Summarise main" in str((await c.get_prompt(name)).messages[0].content)
    assert [c for c in px.calls() if c["call"] == "summary"][: len(before)] == before
    assert len([c for c in px.calls() if c["call"] == "summary"]) == len(before) + 3  # only the allowed ones


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_outside_the_profile_is_refused_in_every_form(stack, era):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    async with client(px.url + "/health", px.static, era) as c:
        for name in ("ledger_summary", "ledger.summary", "summary"):
            with pytest.raises(MCPError) as refused:
                await c.get_prompt(name)
            assert "not available to this connection" in refused.value.error.message
        with pytest.raises(MCPError):
            await raw(c, "completion/complete", {"ref": {"type": "ref/prompt", "name": "ledger.summary"},
                                                 "argument": {"name": "account", "value": "m"}}, era=era)


# -- 3. every URI of a listen stream ------------------------------------------------------------------
async def _listen_and_post(px: Any, c: Any) -> Any:
    """Listen on ledger://entries, post (as the operator), and return the first event heard (None: nothing)."""
    async with c.listen(resource_subscriptions=["ledger://entries"]) as sub:
        async with client(px.url, px.static, "2026-07-28") as operator:
            assert not (await operator.call_tool("ledger_post", {"amount": 1})).is_error
        with anyio.fail_after(10):
            return await sub.__anext__()


async def test_a_listen_stream_is_refused_a_resource_the_token_may_not_read(stack):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    async with client(px.url, token(stack, "ledger:read"), "2026-07-28") as c:  # the control: allowed, and heard
        event = await _listen_and_post(px, c)
        assert getattr(event, "uri", None) == "ledger://entries"
    async with client(px.url, token(stack, "plexor:read"), "2026-07-28") as c:
        with pytest.raises(MCPError):  # the SDK client's answer to the 403 (audited below)
            await _listen_and_post(px, c)
    async with client(px.url, token(stack, "plexor:read"), "2025-11-25") as c:  # the 2025-11-25 counterpart
        with pytest.raises(MCPError):
            await c.session.subscribe_resource("ledger://entries")
    refusals = {a.get("method") for a in px.audit() if a.get("reason") == "insufficient_scope"}
    assert {"subscriptions/listen", "resources/subscribe"} <= refusals


async def test_a_listen_stream_is_refused_a_resource_outside_the_profile(stack):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    async with client(px.url + "/health", px.static, "2026-07-28") as c:
        with pytest.raises(MCPError) as refused:
            await _listen_and_post(px, c)
        assert "not available to this connection" in refused.value.error.message
    async with client(px.url + "/health", px.static, "2025-11-25") as c:
        with pytest.raises(MCPError):
            await c.session.subscribe_resource("ledger://entries")


# -- 4. the owner of a task ---------------------------------------------------------------------------
@pytest.mark.parametrize("era", ERAS)
async def test_no_token_shares_tasks_with_the_static_token_or_with_another(stack, era):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    async with client(px.url, px.static, "2025-11-25") as operator:
        made = await raw(operator, "tools/call", {"name": "ledger_post", "arguments": {"amount": 7}, "task": {}},
                         era="2025-11-25")
        mine = made["task"]["taskId"]
        assert (await raw(operator, "tasks/get", {"taskId": mine}, era="2025-11-25"))["taskId"] == mine
    no_sub = token(stack, "ledger:write", drop=("sub",))
    other_no_sub = token(stack, "ledger:write", drop=("sub",), jti="another")
    posing = token(stack, "ledger:write", sub="static-token")
    for bearer in (no_sub, posing):
        async with client(px.url, bearer, era) as c:
            for method in ("tasks/get", "tasks/cancel") + (("tasks/result",) if era == "2025-11-25" else ()):
                with pytest.raises(MCPError) as hidden:
                    await raw(c, method, {"taskId": mine}, era=era)
                assert "Task not found" in hidden.value.error.message, (method, hidden.value.error.message)
            if era == "2025-11-25":
                assert mine not in [t["taskId"] for t in (await raw(c, "tasks/list", {}, era=era))["tasks"]]
    async with client(px.url, no_sub, "2025-11-25") as c:  # a token without a subject keeps its own tasks
        own = (await raw(c, "tools/call", {"name": "ledger_post", "arguments": {"amount": 8}, "task": {}},
                         era="2025-11-25"))["task"]["taskId"]
        assert (await raw(c, "tasks/get", {"taskId": own}, era="2025-11-25"))["taskId"] == own
    for bearer in (other_no_sub, posing, px.static):
        async with client(px.url, bearer, era) as c:
            with pytest.raises(MCPError) as hidden:
                await raw(c, "tasks/get", {"taskId": own}, era=era)
            assert "Task not found" in hidden.value.error.message


# -- 5. the server card -------------------------------------------------------------------------------
@pytest.mark.parametrize("era", ERAS)
async def test_the_server_card_lists_only_what_the_caller_may_use(stack, era):
    _, _, px = stack
    card_url = px.base + "/.well-known/mcp/server-card.json"
    for bearer, headers in ((token(stack, "plexor:read"), {}), (px.static, {"Plexor-Profile": "reader"}),
                            (token(stack, "ledger:read plexor:read", plexor_profile="health"), {})):
        async with client(px.url, bearer, era, **headers) as c:
            listed = sorted(t.name for t in (await c.list_tools()).tools)
        card = httpx.get(card_url, headers={"Authorization": f"Bearer {bearer}", **headers}, timeout=30).json()
        assert sorted(t["name"] for t in card["tools"]) == listed
        assert "ledger_post" not in listed
    full = httpx.get(card_url, headers={"Authorization": f"Bearer {px.static}"}, timeout=30).json()
    assert {"ledger_post", "ledger_purge", "plexor_health"} <= {t["name"] for t in full["tools"]}  # the operator's


# -- 6. a plugin's own protocol method --------------------------------------------------------------
def _post(px: Any, bearer: str, method: str, era: str, path: str = "") -> httpx.Response:
    return httpx.post(px.url + path, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"account": "m"}},
                      headers={**MCP_HEADERS, "Authorization": f"Bearer {bearer}", "MCP-Protocol-Version": era},
                      timeout=30)


@pytest.mark.parametrize("era", ERAS)
async def test_a_plugins_own_method_needs_its_scopes_as_a_tool_does(stack, era):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    before = [c for c in px.calls() if c["call"] in ("export", "peek")]
    reader = token(stack, "ledger:read plexor:read")
    for bearer, method, needed in ((token(stack, "plexor:read"), "ledger/peek", "ledger:read"),
                                   (reader, "ledger/export", "ledger:write")):  # undeclared: the plugin's write scope
        r = _post(px, bearer, method, era)
        assert r.status_code == 403, (method, r.status_code, r.text)
        assert f'scope="{needed}"' in r.headers["www-authenticate"], r.headers["www-authenticate"]
        async with client(px.url, bearer, era) as c:
            with pytest.raises(MCPError):  # the SDK client's answer to the 403
                await raw(c, method, {"account": "m"}, era=era)
    assert [c for c in px.calls() if c["call"] in ("export", "peek")] == before  # nothing reached the plugin
    async with client(px.url, reader, era) as c:  # with the scope, answered
        answer = await raw(c, "ledger/peek", {"account": "m"}, era=era)
        assert (answer["account"], answer["balance"]) == ("m", 42)
    async with client(px.url, token(stack, "ledger:write"), era) as c:
        assert (await raw(c, "ledger/export", {"account": "m"}, era=era))["account"] == "m"
    assert {"ledger/peek", "ledger/export"} <= {a.get("method") for a in px.audit() if a.get("reason") == "insufficient_scope"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_plugins_own_method_is_refused_outside_the_profile(stack, era):
    from mcp.shared.exceptions import MCPError

    _, _, px = stack
    before = [c for c in px.calls() if c["call"] in ("export", "peek")]
    async with client(px.url + "/health", px.static, era) as c:  # a profile with none of the ledger's tools
        for method in ("ledger/peek", "ledger/export"):
            with pytest.raises(MCPError) as refused:
                await raw(c, method, {"account": "m"}, era=era)
            assert "not available to this connection" in refused.value.error.message, refused.value.error.message
    assert [c for c in px.calls() if c["call"] in ("export", "peek")] == before
    async with client(px.url + "/reader", px.static, era) as c:  # a profile that admits one of its tools
        assert (await raw(c, "ledger/peek", {"account": "m"}, era=era))["balance"] == 42


# -- a profile claim that is not a plain string -----------------------------------------------------
async def test_a_profile_claim_in_a_list_binds_and_any_other_shape_is_refused(stack):
    _, _, px = stack
    one = token(stack, "ledger:read plexor:read", plexor_profile=["health"])  # arrays are common for custom claims
    for url, headers in ((px.url, {}), (px.url + "/reader", {}), (px.url, {"Plexor-Profile": "reader"})):
        async with client(url, one, "2026-07-28", **headers) as c:
            assert [t.name for t in (await c.list_tools()).tools] == ["plexor_health"]
            refused = await c.call_tool("ledger_balance", {})
            assert refused.is_error and "not in this connection's profile 'health'" in refused.content[0].text
    for claim in (["health", "reader"], [], {"name": "health"}, 7, None, ""):
        bad = token(stack, "ledger:read plexor:read", plexor_profile=claim)
        r = httpx.post(px.url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {bad}"}, timeout=30)
        assert r.status_code == 403 and r.json()["error"] == "invalid_profile_claim", (claim, r.status_code, r.text)
        assert "'plexor_profile' claim" in r.json()["message"]


# -- the relay of `plexor connect` --------------------------------------------------------------------
async def test_connect_relays_every_request_to_the_same_decision(tmp_path):
    from auth.support import ledger_stdio
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from plexor.features.daemon.process import read_registry, registry_path, stop_daemon
    from plexor.features.tasks.client import TasksClient

    home = tmp_path / "home"
    params, record = ledger_stdio(home, "connect", "--profile", "health")
    try:
        for era in ERAS:  # one daemon behind both
            mode = "legacy" if era == "2025-11-25" else era
            async with Client(params, mode=mode, extensions=[] if era == "2025-11-25" else [TasksClient()]) as c:
                task = {"task": {"ttl": 60_000}} if era == "2025-11-25" else {}
                answer = await raw(c, "tools/call", {"name": "ledger_post", "arguments": {"amount": 9}, **task}, era=era)
                assert "task" not in answer and answer["isError"] is True, answer
                for name in ("ledger_summary", "ledger.summary", "summary"):
                    with pytest.raises(MCPError) as refused:
                        await c.get_prompt(name)
                    assert "not available to this connection" in refused.value.error.message
                assert not (await c.call_tool("plexor_health", {})).is_error  # the relay works for what is allowed
    finally:
        info = read_registry(registry_path(params.env))  # daemon-<hash>.json: PLEXOR_PLUGINS is set
        if info is not None:
            with contextlib.suppress(OSError):
                stop_daemon(info, wait=10)
    assert not record.exists() or record.read_text() == ""  # nothing reached the plugin


async def test_connect_with_a_profile_to_a_daemon_without_profiles_is_refused(tmp_path):
    import json
    import os
    import sys

    from auth.support import SITE
    from conformance.serving import fixture_env
    from mcp import Client, StdioServerParameters

    from plexor.features.daemon.process import read_registry, registry_path, stop_daemon

    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    record = home / "calls.jsonl"
    (home / "config" / "plexor.toml").write_text(f"[ledger]\nrecord = {json.dumps(str(record))}\n")  # no profiles
    env = fixture_env(home, PLEXOR_PLUGINS="ledger", PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "plexor", "connect", "--profile", "health"], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "--profile health is not a configured profile" in done.stderr, done
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=env)
    try:
        async with Client(params, mode="2026-07-28") as c:  # starts the daemon, with no profiles
            assert not (await c.call_tool("plexor_health", {})).is_error
            info = read_registry(registry_path(env))
            assert info is not None
            auth = {**MCP_HEADERS, "Authorization": f"Bearer {info['token']}"}
            for url, headers in ((info["url"], {"Plexor-Profile": "health"}), (info["url"] + "/health", {})):
                named = httpx.post(url, json=INIT, headers={**auth, **headers}, timeout=30)  # what the relay sends
                assert named.status_code == 404 and named.json()["error"] == "unknown_profile", (url, named.text)
                assert "no profile named 'health'" in named.json()["message"]
            assert httpx.post(info["url"], json=INIT, headers=auth, timeout=30).status_code == 200
    finally:
        info = read_registry(registry_path(env))
        if info is not None:
            with contextlib.suppress(OSError):
                stop_daemon(info, wait=10)
    assert not record.exists() or record.read_text() == ""  # nothing reached the plugin


# -- stdio: `plexor serve --profile` -----------------------------------------------------------------
async def test_a_stdio_server_with_a_profile_makes_the_same_decision(tmp_path):
    import json
    import os
    import sys

    from auth.support import SITE
    from conformance.serving import fixture_env
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    from plexor.features.tasks.client import TasksClient

    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    record = home / "calls.jsonl"
    (home / "config" / "plexor.toml").write_text(
        f"[ledger]\nrecord = {json.dumps(str(record))}\n[plexor.profiles.health]\ntools = [\"plexor_health\"]\n")
    env = fixture_env(home, PLEXOR_PLUGINS="ledger", PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]))
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve", "--profile", "health"], env=env)
    for era in ERAS:
        mode = "legacy" if era == "2025-11-25" else era
        async with Client(params, mode=mode, extensions=[] if era == "2025-11-25" else [TasksClient()]) as c:
            assert [t.name for t in (await c.list_tools()).tools] == ["plexor_health"]
            assert (await c.list_prompts()).prompts == [] and (await c.list_resources()).resources == []
            task = {"task": {"ttl": 60_000}} if era == "2025-11-25" else {}
            answer = await raw(c, "tools/call", {"name": "ledger_post", "arguments": {"amount": 9}, **task}, era=era)
            assert "task" not in answer and answer["isError"] is True, answer
            with pytest.raises(MCPError) as refused:
                await c.get_prompt("ledger.summary")
            assert "not available to this connection" in refused.value.error.message
    assert not record.exists() or record.read_text() == ""  # nothing reached the plugin
    done = subprocess.run([sys.executable, "-m", "plexor", "serve", "--profile", "nope"], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "not a configured profile" in done.stderr and "health" in done.stderr


async def test_a_stdio_profile_by_scope_uses_the_operators_scope_overrides_as_http_does(tmp_path):
    import json
    import os
    import sys

    from auth.support import SITE
    from conformance.serving import fixture_env
    from mcp import Client, StdioServerParameters

    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    record = home / "calls.jsonl"
    (home / "config" / "plexor.toml").write_text(  # ledger_balance declares ledger:read; the operator says admin
        f"[ledger]\nrecord = {json.dumps(str(record))}\n[plexor.auth.scopes]\n\"ledger_balance\" = [\"ledger:admin\"]\n"
        "[plexor.profiles.admin]\ntools = [\"scope:ledger:admin\"]\n")
    env = fixture_env(home, PLEXOR_PLUGINS="ledger", PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]))
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve", "--profile", "admin"], env=env)
    async with Client(params, mode="2026-07-28") as c:
        over_stdio = sorted(t.name for t in (await c.list_tools()).tools)
        balance = await c.call_tool("ledger_balance", {})
        assert not balance.is_error, balance  # refused as outside the profile before the fix
    port = free_port()
    with served_plexor(tmp_path / "http", port, auth={"scopes": {"ledger_balance": ["ledger:admin"]}},
                       profiles={"admin": {"tools": ["scope:ledger:admin"]}}) as px:
        async with client(px.url + "/admin", px.static, "2026-07-28") as c:
            over_http = sorted(t.name for t in (await c.list_tools()).tools)
    assert over_stdio == over_http == ["ledger_balance", "ledger_purge"]


# -- the request path ---------------------------------------------------------------------------------
async def test_the_request_layers_sit_in_their_declared_order_whatever_order_they_are_added(plexor):
    from plexor.serving.layers import ORDER
    from plexor.serving.server import build_server

    async with plexor.kernel() as kernel:
        server = build_server(kernel)  # session, limits, request-state and tasks are added here
        before = list(server.middleware)

        async def authorization(ctx, call_next):
            return await call_next(ctx)

        server.path.add("authorization", authorization)  # added last, as plexor.features.auth does
        assert server.path.names() == ["sdk", "session", "limits", "request-state", "authorization", "tasks"]
        assert server.middleware == [*before[:-1], authorization, before[-1]]  # the SDK's list, in place
        from plexor.features.tasks.protocol import TaskProtocol

        assert isinstance(getattr(server.middleware[-1], "__self__", None), TaskProtocol)  # the tasks layer, still last
        assert list(ORDER).index("authorization") < list(ORDER).index("tasks")
        with pytest.raises(ValueError, match="unknown request layer 'audit'"):
            server.path.add("audit", authorization)
