"""Server extensions that are wrong fail their plugin, never the server (plexor.serving.extensions).

Each plugin of the site built here gets one server-extension hook wrong: it raises, answers something
the server cannot use, or claims what is already served (``tools/call``, the tasks feature's
``tasks/get``, ``/mcp``, ``/healthz``, SSE's ``/messages/``). Served together through a real
``plexor serve`` (HTTP, legacy SSE, stdio), every one of them is failed with a message naming the hook
and the fix, nothing of theirs stays on the request path, the server's own answers are untouched, and
the good plugins are served. A plugin that fails later (at start-up) keeps its protocol methods and
routes from running; a principal hook that raises refuses the request rather than serve it as nobody.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conformance.serving import SITE, fixture_env, serve_http, stdio_answers

pytestmark = pytest.mark.anyio
TASKS = "io.modelcontextprotocol/tasks"

# way -> (the body of the plugin's hooks, what its failure says)
WAYS: dict[str, tuple[str, str]] = {
    "layer_position": ("def plexor_request_layers(setup):\n    return [RequestLayer('nowhere', _never)]",
                       "plexor_request_layers hook put a layer at 'nowhere'"),
    "layer_raises": ("def plexor_request_layers(setup):\n    raise RuntimeError('layers broke')",
                     "plexor_request_layers hook raised RuntimeError: layers broke"),
    "layer_junk": ("def plexor_request_layers(setup):\n    return [42]",
                   "plexor_request_layers hook answered a int in its list"),
    "method_spec": ("def plexor_protocol_methods(setup):\n"
                    "    return [ProtocolMethod('tools/call', types.CallToolRequestParams, _hijack)]",
                    "declared 'tools/call', which the server itself already answers"),
    "method_tasks": ("def plexor_protocol_methods(setup):\n"
                     "    return [ProtocolMethod('tasks/get', types.RequestParams, _hijack)]",
                     "declared 'tasks/get', which tasks already answers"),
    "method_name": ("def plexor_protocol_methods(setup):\n"
                    "    return [ProtocolMethod('export everything', types.RequestParams, _hijack)]",
                    "declared the method name 'export everything'"),
    "method_twice": ("def plexor_protocol_methods(setup):\n    m = ProtocolMethod('twice/x', types.RequestParams, _hijack)\n"
                     "    return [m, m]", "declared 'twice/x' twice"),
    "method_raises": ("def plexor_protocol_methods(setup):\n    raise RuntimeError('methods broke')",
                      "plexor_protocol_methods hook raised RuntimeError: methods broke"),
    "asgi_raises": ("def plexor_asgi_wrapper(app, setup):\n    raise RuntimeError('wrapper broke')",
                    "plexor_asgi_wrapper hook raised RuntimeError: wrapper broke"),
    "asgi_junk": ("def plexor_asgi_wrapper(app, setup):\n    return 42", "plexor_asgi_wrapper hook answered a int"),
    "endpoint_raises": ("def plexor_endpoint_wrapper(app, setup):\n    raise RuntimeError('endpoint broke')",
                        "plexor_endpoint_wrapper hook raised RuntimeError: endpoint broke"),
    "endpoint_junk": ("def plexor_endpoint_wrapper(app, setup):\n    return 'not an app'",
                      "plexor_endpoint_wrapper hook answered a str"),
    "route_mcp": ("def plexor_routes(setup):\n    return [Route('/mcp', _hijack_page, methods=['GET', 'POST'])]",
                  "routes '/mcp', over '/mcp' that is already served"),
    "route_healthz": ("def plexor_routes(setup):\n    return [Route('/healthz', _hijack_page)]",
                      "routes '/healthz', over '/healthz' that is already served"),
    "route_messages": ("def plexor_routes(setup):\n    return [Route('/messages/hijack', _hijack_page, methods=['POST'])]",
                       "routes '/messages/hijack', over '/messages' that is already served"),
    "route_root": ("def plexor_routes(setup):\n    return [Mount('/', app=_hijack_page)]",
                   "routes '/', over '/mcp' that is already served"),
    "layer_config": ("def plexor_request_layers(setup):\n"
                     "    raise ConfigError('the layer needs layer_key', 'Set layer_key in [plexor.layer_config].')",
                     "plexor_request_layers hook refused: the layer needs layer_key\nSet layer_key in"),
    "route_raises": ("def plexor_routes(setup):\n    raise RuntimeError('routes broke')",
                     "plexor_routes hook raised RuntimeError: routes broke"),
    # a good layer first, then a hook that fails: the layer must leave the path again
    "layer_then_route": ("def plexor_request_layers(setup):\n    return [RequestLayer('session', _never)]\n\n"
                         "def plexor_routes(setup):\n    raise RuntimeError('routes broke after the layer')",
                         "plexor_routes hook raised RuntimeError: routes broke after the layer"),
    "layer_then_asgi": ("def plexor_request_layers(setup):\n    return [RequestLayer('limits', _never)]\n\n"
                        "def plexor_asgi_wrapper(app, setup):\n    raise RuntimeError('wrapper broke after the layer')",
                        "plexor_asgi_wrapper hook raised RuntimeError: wrapper broke after the layer"),
}

COMMON = '''"""A plugin whose server extension is wrong ({way}); its tool shows whether it was served."""
import mcp_types as types
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from plexor import hookimpl
from plexor.errors import ConfigError
from plexor.extending import ProtocolMethod, RequestLayer

PLEXOR_NAMESPACE = "{ns}"


def here() -> dict:
    """Answers when the plugin is served."""
    return {{"served": "{ns}"}}


@hookimpl
def plexor_register_tools(register, settings):
    register(here)


async def _never(ctx, call_next):
    raise RuntimeError("a layer of a failed plugin ran")


async def _hijack(ctx, params):
    return {{"hijacked": True}}


async def _hijack_page(*args):
    if len(args) == 1:
        return PlainTextResponse("hijacked")
    scope, receive, send = args
    await PlainTextResponse("hijacked")(scope, receive, send)


'''


def _write_plugin(site: Path, name: str, body: str) -> None:
    ns = name.replace("_", "")
    hooks = "\n\n".join("@hookimpl\n" + chunk for chunk in body.split("\n\n"))
    (site / f"plexor_{name}.py").write_text(COMMON.format(way=name, ns=ns) + hooks + "\n", encoding="utf-8")
    info = site / f"plexor_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: plexor-{name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[plexor]\n{name} = plexor_{name}\n", encoding="utf-8")


def _site(tmp_path: Path, ways: dict[str, str]) -> dict[str, str]:
    """Install one plugin per way (plus a good one, ``fine``); the environment that serves them all."""
    site = tmp_path / "site"
    site.mkdir()
    for name, body in ways.items():
        _write_plugin(site, name, body)
    _write_plugin(site, "fine", "def plexor_routes(setup):\n    return [Route('/fine/page', _hijack_page)]")
    return {"PLEXOR_PLUGINS": ",".join(["conformance", "fine", *ways]),
            "PYTHONPATH": os.pathsep.join([str(site), str(SITE), os.environ.get("PYTHONPATH", "")])}


def _rpc(url: str, method: str, params: dict[str, Any], **headers: str) -> tuple[int, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, **headers})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 - loopback
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read().decode()
    if not raw.lstrip().startswith("{"):
        raw = next(line[5:] for line in raw.splitlines() if line.startswith("data:") and line[5:].strip())
    return status, json.loads(raw)


def _meta() -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}}


def _call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    status, reply = _rpc(url, "tools/call", {"name": tool, "arguments": arguments, "_meta": _meta()}, **{"Mcp-Name": tool})
    assert status == 200, reply
    return reply


def _page(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:  # noqa: S310 - loopback
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _plugins(url: str) -> dict[str, dict[str, Any]]:
    health = _call(url, "plexor_health", {})["result"]["structuredContent"]
    return {p["name"]: p for p in health["plugins"]}


def test_every_wrong_extension_fails_its_plugin_and_the_server_serves_the_rest(tmp_path):
    env = _site(tmp_path, {name: body for name, (body, _) in WAYS.items()})
    with serve_http(tmp_path / "home", "--stateless", env=env) as served:
        plugins = _plugins(served.url)
        for name, (_, says) in WAYS.items():
            assert plugins[name]["state"] == "failed", (name, plugins[name])
            assert says in plugins[name]["error"] and "server extension" in plugins[name]["error"], plugins[name]
            assert "PLEXOR_DISABLE" in plugins[name]["error"]  # and how to get rid of it
        assert plugins["fine"]["state"] == "ready" and plugins["tasks"]["state"] == "ready"
        # the server's own answers are untouched; no layer of a failed plugin runs (each would raise)
        echoed = _call(served.url, "test_echo", {"text": "still mine"})
        assert echoed["result"]["structuredContent"] == {"text": "still mine"}
        assert _call(served.url, "fine_here", {})["result"]["structuredContent"] == {"served": "fine"}
        status, listed = _rpc(served.url, "tools/list", {"_meta": _meta()})
        assert {t["name"] for t in listed["result"]["tools"]} & {f"{n.replace('_', '')}_here" for n in WAYS} == set()
        failed = _call(served.url, "layerposition_here", {})["result"]
        assert failed["isError"] and "(it failed)" in failed["content"][0]["text"]  # its tool names why
        asks_tasks = {**_meta(), "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
        status, reply = _rpc(served.url, "tasks/get", {"taskId": "nope", "_meta": asks_tasks})
        assert "hijacked" not in json.dumps(reply), reply
        assert "nope" in reply["error"]["message"], reply  # the tasks feature's own answer
        status, reply = _rpc(served.url, "twice/x", {"_meta": _meta()})
        assert reply["error"]["code"] == -32601  # never registered
        assert _page(served.base + "/healthz")[0] == 200 and "hijacked" not in _page(served.base + "/healthz")[1]
        assert _page(served.base + "/fine/page") == (200, "hijacked")  # a good plugin's route is served
        assert _page(served.base + "/.well-known/mcp/server-card.json")[0] == 200
        stderr = served.stderr()
    assert "Traceback" in stderr and "RuntimeError: layers broke" in stderr  # the raising ones' tracebacks, logged


def test_a_wrong_route_under_legacy_sse_is_refused_and_sse_serves(tmp_path):
    env = _site(tmp_path, {"route_messages": WAYS["route_messages"][0]})
    with serve_http(tmp_path / "home", "--transport", "sse", env=env) as served:
        assert _page(served.base + "/messages/hijack")[1] != "hijacked"
        assert _page(served.base + "/healthz")[0] == 200
        plugins = json.loads(_page(served.base + "/healthz")[1])["plugins"]
    bad = next(p for p in plugins if p["name"] == "route_messages")  # /healthz shows it too
    assert bad["state"] == "failed" and "over '/messages'" in bad["error"], bad


def test_a_capabilities_hook_that_raises_is_reported_and_initialize_still_answers(tmp_path):
    env = _site(tmp_path, {"caps": "def plexor_capabilities(capabilities, protocol_version, setup):\n"
                                   "    raise RuntimeError('caps broke')"})
    with serve_http(tmp_path / "home", env=env) as served:
        status, reply = _rpc(served.url, "server/discover", {"_meta": _meta()})
        assert status == 200 and TASKS in reply["result"]["capabilities"]["extensions"]
        warnings = _plugins(served.url)["caps"]["warnings"]
    assert any("plexor_capabilities hook raised RuntimeError: caps broke" in w for w in warnings), warnings


def test_a_principal_hook_that_raises_refuses_the_request_naming_the_plugin(tmp_path):
    env = _site(tmp_path, {"who": "def plexor_principal(scope, kernel):\n    if scope['path'] == '/mcp':  # not /healthz\n"
                                  "        raise RuntimeError('who broke')"})
    with serve_http(tmp_path / "home", env=env, wait=30) as served:
        status, reply = _rpc(served.url, "tools/call", {"name": "test_echo", "arguments": {"text": "x"},
                                                        "_meta": _meta()}, **{"Mcp-Name": "test_echo"})
        assert served.proc.poll() is None  # still serving
        stderr = served.stderr()
    assert status == 500 and reply["error"] == "principal_failed"
    assert "'who'" in reply["message"] and "who broke" in reply["message"] and "not served" in reply["message"]
    assert "principal_failed" in stderr and "RuntimeError: who broke" in stderr


LATE = '''
def plexor_protocol_methods(setup):
    return [ProtocolMethod('late/ping', types.RequestParams, _hijack, scopes=())]

def plexor_routes(setup):
    return [Route('/late/page', _hijack_page)]

def plexor_startup(plugin):
    raise RuntimeError('start-up broke')
'''.strip()


def test_a_plugin_that_fails_at_start_up_keeps_its_methods_and_routes_from_running(tmp_path):
    env = _site(tmp_path, {"late": LATE})
    with serve_http(tmp_path / "home", "--stateless", env=env) as served:
        assert _plugins(served.url)["late"]["state"] == "failed"
        status, reply = _rpc(served.url, "late/ping", {"_meta": _meta()})
        assert "hijacked" not in json.dumps(reply)
        assert "'late' failed" in reply["error"]["message"] and "start-up broke" in reply["error"]["message"]
        status, text = _page(served.base + "/late/page")
    assert status == 503 and "'late' failed" in text and "hijacked" not in text


def test_stdio_serves_with_a_wrong_extension_failing_its_plugin(tmp_path):
    env = fixture_env(tmp_path / "home", **_site(tmp_path, {"layer_raises": WAYS["layer_raises"][0]}))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "plexor_health", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "test_echo", "arguments": {"text": "x"}}}]
    replies = stdio_answers(env, "".join(json.dumps(m) + "\n" for m in lines), {2, 3})
    health = replies[2]["result"]["structuredContent"]
    bad = next(p for p in health["plugins"] if p["name"] == "layer_raises")
    assert bad["state"] == "failed" and "RuntimeError: layers broke" in bad["error"], bad
    assert replies[3]["result"]["structuredContent"] == {"text": "x"}


async def test_a_drain_participant_that_raises_stops_no_other(plexor):
    """One plugin's plexor_drain raising as it is called (not while awaited) no longer skips the others."""
    import types

    from plexor import hookimpl

    drained: list[str] = []
    broken, kept = types.ModuleType("plexor_test_broken_drain"), types.ModuleType("plexor_test_kept_drain")

    @hookimpl
    def plexor_drain(kernel: Any) -> None:
        raise RuntimeError("drain broke")

    @hookimpl
    async def plexor_drain_kept(kernel: Any) -> None:
        drained.append(kernel.state.value)

    broken.plexor_drain = plexor_drain  # type: ignore[attr-defined]
    kept.plexor_drain = plexor_drain_kept  # type: ignore[attr-defined]
    async with plexor.kernel([("kept", kept), ("broken", broken)]):
        assert drained == []
    assert drained == ["draining"]


def test_an_event_store_or_notifier_backend_that_raises_leaves_the_kernels_own(tmp_path):
    """Stateful Streamable HTTP with a plugin whose event store and notifier backend hooks raise: the server
    starts with its own (in memory), the plugin is failed or warned about, and sessions work."""
    env = _site(tmp_path, {"store": "def plexor_event_store(setup):\n    raise RuntimeError('store broke')\n\n"
                                    "def plexor_notifier_backend(setup):\n    raise RuntimeError('backend broke')"})
    with serve_http(tmp_path / "home", env=env) as served:
        status, reply = _rpc(served.url, "tools/call", {"name": "test_echo", "arguments": {"text": "kept"},
                                                        "_meta": _meta()}, **{"Mcp-Name": "test_echo"})
        store = _plugins(served.url)["store"]
    assert status == 200 and reply["result"]["structuredContent"] == {"text": "kept"}
    assert store["state"] == "failed" and "plexor_event_store hook raised RuntimeError: store broke" in store["error"]
