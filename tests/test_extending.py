"""The server-extension hooks (plexor.extending) and the features built on them, through real servers.

- the documented example of docs/authoring.md ("Extending the server") served over HTTP and stdio:
  its request layer sees every request that authorization lets through and none it refuses, its
  route sits behind the same token check as /mcp;
- a plugin of every HTTP hook (tests/extending/site/plexor_probe.py): its ASGI wrapper, principal,
  notifier backend and event store are the ones the server uses;
- protocol methods, capabilities and drain participants in a real kernel with the SDK's client;
- the built-in features are plugins: listed, disabled with PLEXOR_DISABLE (tasks: no capability,
  no method), and auth configured but disabled refuses to start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conformance.serving import INIT, MCP_HEADERS, fixture_env, serve_http
from test_readme_commands import blocks

from plexor import hookimpl

ROOT = Path(__file__).resolve().parents[1]
PROBE_SITE = ROOT / "tests" / "extending" / "site"
TOKEN = "extending-test-token"
TASKS = "io.modelcontextprotocol/tasks"
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _example_source() -> str:
    """The plugin of docs/authoring.md's "Extending the server", exactly as printed."""
    (block,) = [b for b in blocks(ROOT / "docs" / "authoring.md")
                if b.lang == "python" and "plexor_request_layers" in b.text and b.marker and b.marker[0] == "not-run"]
    return block.text


def _install(site: Path, dist: str, entry: str, module: str, source: str) -> None:
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[plexor]\n{entry} = {module}\n", encoding="utf-8")


def _get(url: str, token: str | None = None, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={**headers, **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _post(url: str, body: dict[str, Any], token: str | None = TOKEN, **headers: str) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={
        **MCP_HEADERS, **headers, **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            raw = response.read().decode()
            status, hdrs = response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()
    if raw.startswith("event:") or raw.startswith("data:") or "\ndata:" in raw:
        raw = next(line[5:] for line in raw.splitlines() if line.startswith("data:") and line[5:].strip())
    return status, hdrs, json.loads(raw) if raw.strip() else None


@pytest.fixture
def example_site(tmp_path):
    site = tmp_path / "site"
    _install(site, "plexor-visits", "visits", "plexor_visits", _example_source())
    return site


# -- the documented example: a request layer and a route ---------------------------------------
async def test_hook_plexor_request_layers(tmp_path, example_site):
    """The example's layer, over HTTP: it counts what it lets through; its tool reads the count."""
    from mcp import Client

    env = {"PLEXOR_PLUGINS": "visits", "PYTHONPATH": os.pathsep.join([str(example_site), os.environ.get("PYTHONPATH", "")])}
    with serve_http(tmp_path / "home", "--token", TOKEN, env=env, token=TOKEN) as served:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http, \
                Client(streamable_http_client(served.url, http_client=http), mode="legacy") as c:
            await c.list_tools()
            first = (await c.call_tool("visits_count", {})).structured_content
            second = (await c.call_tool("visits_count", {})).structured_content
        assert first["tools/list"] == 1 and first["tools/call"] == 1, first  # the layer ran before the handler
        assert second["tools/call"] == 2, second


async def test_hook_plexor_routes(tmp_path, example_site):
    """The example's route is served beside /mcp, behind the same token check."""
    env = {"PLEXOR_PLUGINS": "visits", "PYTHONPATH": os.pathsep.join([str(example_site), os.environ.get("PYTHONPATH", "")])}
    with serve_http(tmp_path / "home", "--token", TOKEN, env=env, token=TOKEN) as served:
        assert _post(served.url, INIT)[0] == 200
        status, _, body = _get(served.base + "/visits", TOKEN)
        assert status == 200 and json.loads(body).get("initialize") == 1, body
        assert _get(served.base + "/visits")[0] == 401  # no token: the route is no way around the guard
        assert _get(served.base + "/visits", "wrong-token")[0] == 401
        assert _get(served.base + "/visits", TOKEN, Host="evil.example:80")[0] in (403, 421)  # the Host guard too


async def test_a_plugin_layer_never_sees_a_request_authorization_refused(tmp_path, example_site):
    """Over stdio with a profile: the layer at `observe` sits after `authorization`, so a call outside
    the profile is refused before it; the example's layers were added once the plugins loaded."""
    from mcp import Client, StdioServerParameters

    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "plexor.toml").write_text('[plexor.profiles.counting]\ntools = ["visits_count"]\n')
    env = fixture_env(home, PLEXOR_PLUGINS="visits",
                      PYTHONPATH=os.pathsep.join([str(example_site), os.environ.get("PYTHONPATH", "")]))
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve", "--profile", "counting"], env=env)
    async with Client(params, mode="legacy") as c:
        refused = await c.call_tool("plexor_health", {})
        assert refused.is_error and "is not in this connection's profile" in refused.content[0].text
        counts = (await c.call_tool("visits_count", {})).structured_content
    assert counts.get("tools/call") == 1, counts  # only this call; the refused one never reached the layer


# -- every HTTP hook of one plugin, through a real serve ---------------------------------------
@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    home = tmp_path_factory.mktemp("probe") / "home"
    env = {"PLEXOR_PLUGINS": "probe", "PLEXOR_MAX_SESSIONS_PER_CALLER": "1",
           "PYTHONPATH": os.pathsep.join([str(PROBE_SITE), os.environ.get("PYTHONPATH", "")])}
    with serve_http(home, "--token", TOKEN, env=env, token=TOKEN) as served:
        yield served, home / "probe.jsonl"


def _notes(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_hook_plexor_asgi_wrapper(probed):
    served, _ = probed
    status, headers, _ = _get(served.base + "/healthz", TOKEN)
    assert status == 200 and headers.get("x-probe") == "wrapped"
    status, headers, _ = _post(served.url, INIT)
    assert status == 200 and headers.get("x-probe") == "wrapped"
    # inside the Host/Origin guard: a forged Host is refused before the wrapper runs
    status, headers, _ = _get(served.base + "/healthz", TOKEN, Host="evil.example:80")
    assert status in (403, 421) and "x-probe" not in {k.lower() for k in headers}


def test_hook_plexor_endpoint_wrapper(probed):
    served, notes = probed
    assert {"what": "endpoint", "clock": "Deadlines"} in _notes(notes)  # given the request time limit's clock
    status, headers, _ = _post(served.url, INIT)
    assert status == 200 and headers.get("x-probe-endpoint") == "reached"
    status, headers, _ = _get(served.base + "/healthz", TOKEN)  # the endpoint's wrapper, not every route's
    assert status == 200 and "x-probe-endpoint" not in headers
    # innermost: a request the token check refuses never reaches it
    status, headers, _ = _post(served.url, INIT, token="wrong")
    assert status == 401 and "x-probe-endpoint" not in {k.lower() for k in headers}


def _session(served: Any, team: str) -> str:
    status, headers, _ = _post(served.url, INIT, **{"X-Team": team})
    assert status == 200
    return {k.lower(): v for k, v in headers.items()}["mcp-session-id"]


def _alive(served: Any, session: str, team: str) -> bool:
    status, _, _ = _post(served.url, {"jsonrpc": "2.0", "id": 9, "method": "ping"},
                         **{"X-Team": team, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    return status == 200


def test_hook_plexor_principal(probed):
    """Per-caller limits key on the plugin's principal: one session per caller (PLEXOR_MAX_SESSIONS_PER_CALLER=1)."""
    served, _ = probed
    a1 = _session(served, "red")
    b1 = _session(served, "blue")  # another caller: red's session stays
    assert _alive(served, a1, "red") and _alive(served, b1, "blue")
    a2 = _session(served, "red")  # red's second session: its oldest idle one goes
    assert _alive(served, a2, "red")
    assert not _alive(served, a1, "red")
    assert _alive(served, b1, "blue")


def test_hook_plexor_event_store(probed):
    """Stateful Streamable HTTP stores its stream events in the plugin's store."""
    served, notes = probed
    before = sum(1 for n in _notes(notes) if n["what"] == "event_stored")
    session = _session(served, "green")
    status, _, answer = _post(served.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                              **{"X-Team": "green", "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 200 and [t["name"] for t in answer["result"]["tools"]]
    assert sum(1 for n in _notes(notes) if n["what"] == "event_stored") > before


def test_hook_plexor_notifier_backend(probed):
    """Change notifications go out through the plugin's backend, started with the server."""
    served, notes = probed
    assert any(n["what"] == "backend_started" for n in _notes(notes))
    session = _session(served, "gold")
    status, _, answer = _post(served.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                           "params": {"name": "probe_touch", "arguments": {"uri": "probe://x"}}},
                              **{"X-Team": "gold", "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    assert status == 200 and not answer["result"].get("isError"), answer
    assert any(n["what"] == "published" and "probe://x" in n["event"] for n in _notes(notes))


# -- protocol methods, capabilities, drain: a real kernel and the SDK's client ------------------
def _extension_plugin(drained: list[str]) -> Any:
    import types

    from mcp_types import RequestParams

    class EchoParams(RequestParams):
        text: str

    async def echo(ctx: Any, params: EchoParams) -> dict[str, Any]:
        return {"echo": params.text}

    module = types.ModuleType("plexor_test_acme")

    @hookimpl
    def plexor_protocol_methods(setup: Any) -> list[Any]:
        from plexor.extending import ProtocolMethod

        return [ProtocolMethod("acme/echo", EchoParams, echo)]

    @hookimpl
    def plexor_capabilities(capabilities: Any, protocol_version: str | None, setup: Any) -> None:
        capabilities.extensions = {**(capabilities.extensions or {}), "com.example/acme": {"era": protocol_version or "handshake"}}

    @hookimpl
    async def plexor_drain(kernel: Any) -> None:
        drained.append(kernel.state.value)

    for hook in (plexor_protocol_methods, plexor_capabilities, plexor_drain):
        setattr(module, hook.__name__, hook)
    return module


async def test_hook_plexor_protocol_methods(plexor):
    from mcp.shared.exceptions import MCPError

    async with plexor.client([("acme", _extension_plugin([]))]) as client:
        answer = await client.session._dispatcher.send_raw_request("acme/echo", {"text": "hi"}, {})
        assert answer == {"echo": "hi"}
        with pytest.raises(MCPError) as bad:  # its params are validated like MCP's own
            await client.session._dispatcher.send_raw_request("acme/echo", {"text": 5}, {})
        assert "text" in bad.value.error.message


async def test_hook_plexor_capabilities(plexor):
    """What the server advertises (initialize, server/discover) passes through the hook, with the era asked for."""
    from plexor.serving.server import build_server

    async with plexor.kernel([("acme", _extension_plugin([]))]) as kernel:
        server = build_server(kernel)
        modern = server.get_capabilities(protocol_version="2026-07-28")
        assert modern.extensions["com.example/acme"] == {"era": "2026-07-28"}
        assert "io.modelcontextprotocol/tasks" in modern.extensions  # the tasks feature's, beside it
        assert server.get_capabilities().extensions["com.example/acme"] == {"era": "handshake"}
        assert server.get_capabilities().tasks is not None  # the handshake era's tasks capability


async def test_hook_plexor_drain(plexor):
    drained: list[str] = []
    async with plexor.kernel([("acme", _extension_plugin(drained))]) as kernel:
        assert drained == []
    assert drained == ["draining"]  # after in-flight calls, before shutdown hooks
    assert kernel.state.value == "stopped"


async def test_the_kernel_replaces_no_method_on_an_instance(plexor):
    from plexor.serving.server import build_server

    async with plexor.kernel() as kernel:
        server = build_server(kernel)
        assert "drain" not in vars(kernel) and "get_capabilities" not in vars(server)
        assert server.path.names()[-1] == "tasks"


# -- the built-in features are plugins -----------------------------------------------------------
def _cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "plexor", *args], env=fixture_env(home, **env), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_the_features_are_listed_as_built_in_plugins_and_disabled_like_any(tmp_path):
    listed = {p["name"]: p for p in json.loads(_cli(tmp_path / "home", "plugins", "--json").stdout)}
    for name in ("tasks", "auth", "telemetry", "bus", "install", "daemon", "card", "direct"):
        assert listed[name]["distribution"] == "plexor" and listed[name]["state"] == "ready", listed[name]
    # PLEXOR_PLUGINS picks content plugins; it never drops a feature by omission
    only = {p["name"]: p for p in json.loads(_cli(tmp_path / "home", "plugins", "--json",
                                                  PLEXOR_PLUGINS="").stdout)}
    assert only["auth"]["state"] == "ready" and only["conformance"]["state"] == "disabled"
    off = {p["name"]: p for p in json.loads(_cli(tmp_path / "home", "plugins", "--json",
                                                 PLEXOR_DISABLE="tasks,telemetry").stdout)}
    assert off["tasks"]["state"] == "disabled" and off["telemetry"]["state"] == "disabled"


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_disabling_tasks_removes_the_capability_and_the_methods(tmp_path, era):
    import httpx2
    from auth.support import SITE as LEDGER_SITE
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    env = {"PLEXOR_PLUGINS": "ledger", "PLEXOR_DISABLE": "tasks",
           "PYTHONPATH": os.pathsep.join([str(LEDGER_SITE), os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "home" / "config").mkdir(parents=True)
    (tmp_path / "home" / "config" / "plexor.toml").write_text(f"[ledger]\nrecord = {json.dumps(str(tmp_path / 'r.jsonl'))}\n")
    with serve_http(tmp_path / "home", "--token", TOKEN, env=env, token=TOKEN) as served:
        mode = "legacy" if era == "2025-11-25" else era
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http, \
                Client(streamable_http_client(served.url, http_client=http), mode=mode) as c:
            caps = c.server_capabilities
            assert caps.tasks is None and "io.modelcontextprotocol/tasks" not in (caps.extensions or {})
            tools = (await c.list_tools()).tools
            assert all(t.execution is None for t in tools)  # no tool is offered as a task
            for method in ("tasks/get", "tasks/list"):
                params = {"taskId": "x"} if method == "tasks/get" else {}
                with pytest.raises(MCPError) as missing:
                    if era == "2025-11-25":
                        await c.session._dispatcher.send_raw_request(method, params, {})
                    else:  # as a tasks-aware 2026-07-28 client sends it, the extension declared in _meta
                        from plexor.features.tasks.client import task_request

                        meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
                        await task_request(c.session, method, {**params, "_meta": meta})
                assert missing.value.error.code == -32601, (method, missing.value.error)
            if era == "2025-11-25":  # a task parameter is ignored, as by a server without tasks (the spec's rule)
                answer = await c.session._dispatcher.send_raw_request(
                    "tools/call", {"name": "ledger_post", "arguments": {"amount": 3}, "task": {"ttl": 60_000}}, {})
                assert "task" not in answer and answer["isError"] is False, answer


def test_auth_configured_but_disabled_refuses_to_start(tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "plexor.toml").write_text('[plexor.profiles.small]\ntools = ["plexor_health"]\n')
    for args in (("serve", "--transport", "http", "--port", "0"), ("serve", "--profile", "small"),
                 ("serve", "--transport", "http", "--port", "0", "--profile", "small")):
        done = _cli(home, *args, PLEXOR_DISABLE="auth")
        assert done.returncode == 2, (args, done.stderr)
        assert "auth plugin is disabled" in done.stderr and "PLEXOR_DISABLE" in done.stderr, done.stderr
        assert "[plexor.profiles]" in done.stderr or "--profile small" in done.stderr
    bare = tmp_path / "bare"
    done = _cli(bare, "serve", "--transport", "http", "--port", "0", "--auth-issuer", "https://issuer.example",
                PLEXOR_DISABLE="auth")
    assert done.returncode == 2 and "--auth-issuer https://issuer.example" in done.stderr, done.stderr


def test_the_static_token_is_checked_without_the_auth_plugin(tmp_path):
    """The static --token is the kernel's own check: disabling auth (nothing configured) keeps it."""
    with serve_http(tmp_path / "home", "--token", TOKEN, env={"PLEXOR_DISABLE": "auth"}, token=TOKEN) as served:
        assert _post(served.url, INIT, token=None)[0] == 401
        assert _post(served.url, INIT, token="wrong")[0] == 401
        assert _post(served.url, INIT)[0] == 200
        assert _get(served.base + "/mcp/small", TOKEN)[0] == 404  # a profile asked for, none served: never every tool


def test_disabling_telemetry_keeps_it_off_even_when_asked_for(tmp_path):
    """PLEXOR_OTEL=1 serves /metrics through the telemetry plugin's route; PLEXOR_DISABLE=telemetry wins over it."""
    with serve_http(tmp_path / "on", "--token", TOKEN, env={"PLEXOR_OTEL": "1"}, token=TOKEN) as served:
        status, _, body = _get(served.base + "/metrics", TOKEN)
        assert status == 200 and b"plexor" in body
    with serve_http(tmp_path / "off", "--token", TOKEN, env={"PLEXOR_OTEL": "1", "PLEXOR_DISABLE": "telemetry"},
                    token=TOKEN) as served:
        assert _get(served.base + "/metrics", TOKEN)[0] == 404
        health = json.loads(_get(served.base + "/healthz", TOKEN)[2])
        assert {p["name"]: p["state"] for p in health["plugins"]}["telemetry"] == "disabled"


def _observer_plugin(seen: list[tuple[str, str]]) -> Any:
    """A tool that may run as a task, and a layer at `observe` that records what crosses it and refuses
    any call whose arguments say ``{"label": "forbidden"}``."""
    import types

    from mcp.shared.exceptions import MCPError

    module = types.ModuleType("plexor_test_watch")
    module.PLEXOR_NAMESPACE = "watch"

    def work(label: str = "a") -> dict[str, str]:
        """Do some work."""
        return {"done": label}

    @hookimpl
    def plexor_register_tools(register: Any, settings: Any) -> None:
        register(work, task="optional")

    @hookimpl
    def plexor_request_layers(setup: Any) -> list[Any]:
        from plexor.extending import RequestLayer

        async def watch(ctx: Any, call_next: Any) -> Any:
            seen.append((ctx.method, str(ctx.request_id)))
            if ctx.method == "tools/call" and (ctx.params.get("arguments") or {}).get("label") == "forbidden":
                raise MCPError(-32600, "the watch layer refuses this call")
            return await call_next(ctx)

        return [RequestLayer("observe", watch, name="watch")]

    for hook in (plexor_register_tools, plexor_request_layers):
        setattr(module, hook.__name__, hook)
    return module


async def test_a_tasks_run_crosses_the_layers_after_tasks_as_a_plain_call_does(plexor):
    seen: list[tuple[str, str]] = []
    async with plexor.client([("watch", _observer_plugin(seen))]) as client:
        send = client.session._dispatcher.send_raw_request
        created = await send("tools/call", {"name": "watch_work", "arguments": {"label": "b"}, "task": {"ttl": 60_000}}, {})
        task_id = created["task"]["taskId"]
        result = await send("tasks/result", {"taskId": task_id}, {})
        assert result["structuredContent"] == {"done": "b"}
        assert ("tools/call", f"task:{task_id}") in seen, seen  # the task's own run crossed the layer
        refused = await send("tools/call", {"name": "watch_work", "arguments": {"label": "forbidden"},
                                            "task": {"ttl": 60_000}}, {})
        other = refused["task"]["taskId"]
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError) as failed:  # the layer's refusal is the task's error, as it is a plain call's
            await send("tasks/result", {"taskId": other}, {})
        assert "the watch layer refuses this call" in failed.value.error.message
        assert (await send("tasks/get", {"taskId": other}, {}))["status"] == "failed"
