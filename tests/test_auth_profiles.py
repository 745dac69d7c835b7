"""Tool profiles (URL path, header, --profile, `plexor connect --profile`), the registrar's scopes, config errors.

Served over real HTTP with the static token (profiles work without OAuth) and the ``ledger``
test plugin, which records every call it receives.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import httpx
import pytest
from auth.support import SITE, free_port, served_plexor
from conformance.serving import fixture_env
from conftest import make_plugin

pytestmark = pytest.mark.anyio

PROFILES = {
    "reader": {"tools": ["ledger_balance", "plexor_*"]},
    "writer": {"tools": ["plugin:ledger"], "exclude": ["ledger_purge"]},
    "scoped": {"tools": ["scope:ledger:read"]},
    "health": {"tools": ["plexor_health"]},
    "finder": {"tools": ["plexor_health"], "search": True},
}
ALL = ["ledger_balance", "ledger_post", "ledger_purge", "plexor_health", "plexor_plugins"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("profiles")
    with served_plexor(tmp / "home", free_port(), profiles=PROFILES) as px:
        yield px


async def _view(url, token, **headers):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        refused = await client.call_tool("ledger_post", {"amount": 1}) if "ledger_post" not in tools else None
        return tools, resources, prompts, refused


async def test_profiles_by_path_and_header(served):
    px = served
    assert (await _view(px.url, px.static))[0] == ALL
    tools, resources, prompts, refused = await _view(px.url + "/reader", px.static)
    assert tools == ["ledger_balance", "plexor_health", "plexor_plugins"]
    assert resources == ["ledger://entries"] and prompts == ["ledger_summary"]  # a ledger tool is in the profile
    assert refused.is_error and "not in this connection's profile 'reader'" in refused.content[0].text
    assert (await _view(px.url, px.static, **{"Plexor-Profile": "writer"}))[0] == ["ledger_balance", "ledger_post"]
    assert (await _view(px.url, px.static, **{"Plexor-Profile": "scoped"}))[0] == ["ledger_balance"]
    tools, resources, prompts, _ = await _view(px.url + "/health", px.static)
    assert tools == ["plexor_health"] and resources == [] and prompts == []  # no ledger tool: no ledger resources
    assert "post" not in [c["call"] for c in px.calls()]  # the refused call never reached the plugin
    assert any(a.get("reason") == "not_in_profile" and a.get("profile") == "reader" for a in px.audit())


async def test_a_searchable_profile_finds_and_calls_tools_outside_it(served):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    px = served
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {px.static}"}, timeout=30) as http, \
            Client(streamable_http_client(px.url + "/finder", http_client=http)) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["plexor_find_tools", "plexor_health"]
        found = await client.call_tool("plexor_find_tools", {"query": "post an entry"})
        assert not found.is_error
        names = [t["name"] for t in found.structured_content["tools"]]
        assert names[0] == "ledger_post" and found.structured_content["tools"][0]["inProfile"] is False
        assert found.structured_content["tools"][0]["inputSchema"]["required"] == ["amount"]
        result = await client.call_tool("ledger_post", {"amount": 11})
        assert not result.is_error and result.structured_content == {"posted": 11}
        assert (await client.call_tool("plexor_find_tools", {"query": ""})).is_error
    assert px.calls()[-1] == {"call": "post", "amount": 11}


def test_an_unknown_profile_is_404_naming_the_known_ones(served):
    px = served
    for url, headers in ((px.url + "/nope", {}), (px.url, {"Plexor-Profile": "nope"})):
        r = httpx.post(url, headers={"Authorization": f"Bearer {px.static}", **headers}, content=b"{}")
        assert r.status_code == 404
        assert r.json()["error"] == "unknown_profile" and "finder, health, reader, scoped, writer" in r.json()["guidance"]


async def test_serve_profile_is_the_default_of_every_connection(tmp_path):
    with served_plexor(tmp_path / "home", free_port(), profiles=PROFILES, args=("--profile", "writer")) as px:
        assert (await _view(px.url, px.static))[0] == ["ledger_balance", "ledger_post"]
        assert (await _view(px.url, px.static, **{"Plexor-Profile": "reader"}))[0][0] == "ledger_balance"


async def test_connect_profile_shows_a_stdio_client_only_its_profile(tmp_path):
    from mcp import Client, StdioServerParameters

    from plexor.features.daemon.process import read_registry, registry_path, stop_daemon

    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    lines = [f"[plexor.profiles.{n}]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in b.items()) for n, b in PROFILES.items()]
    (home / "config" / "plexor.toml").write_text("\n".join(lines) + "\n")
    env = fixture_env(home, PLEXOR_PLUGINS="ledger",
                      PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]))
    try:
        reader = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect", "--profile", "reader"], env=env)
        plain = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=env)
        async with Client(reader) as a, Client(plain) as b:
            assert sorted(t.name for t in (await a.list_tools()).tools) == ["ledger_balance", "plexor_health", "plexor_plugins"]
            assert sorted(t.name for t in (await b.list_tools()).tools) == ALL  # the same daemon, no profile
            refused = await a.call_tool("ledger_post", {"amount": 1})
            assert refused.is_error and "profile 'reader'" in refused.content[0].text
    finally:
        info = read_registry(registry_path(env))
        if info is not None:
            with contextlib.suppress(OSError):
                stop_daemon(info, wait=10)


@pytest.mark.parametrize(("toml", "args", "said"), [
    ('[plexor.auth]\nisuer = "http://127.0.0.1:1"\n', (), "did you mean 'issuer'"),
    ('[plexor.auth]\nissuer = "http://127.0.0.1:1"\n', (), "sets an issuer but no resource"),
    ('[plexor.auth]\nissuer = "http://127.0.0.1:1"\nresource = "http://x/mcp"\nalgorithms = ["none"]\n', (), "Unsigned tokens"),
    ('[plexor.profiles.a]\nexclude = ["x"]\n', (), "has no tools"),
    ('[plexor.profiles.a]\ntools = ["x"]\n', ("--profile", "b"), "not a configured profile"),
    ("", ("--auth-issuer", "ftp://as"), "not an http(s) URL"),
])
def test_bad_auth_configuration_is_a_usage_error_saying_what_to_fix(tmp_path, toml, args, said):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "plexor.toml").write_text(toml)
    done = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0", *args],
                          env=fixture_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr


def test_a_non_loopback_bind_with_oauth_needs_no_static_token(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "plexor.toml").write_text('[plexor.auth]\nissuer = "http://127.0.0.1:1"\nresource = "https://mcp.example/mcp"\n')
    done = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--host", "192.0.2.1", "--port", "0"],
                          env=fixture_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert "exposes the server" not in done.stderr  # it got past the guard (and then could not bind 192.0.2.1)


@pytest.mark.parametrize("bad", ["ledger:write", ["has space"], ['quo"te'], [3]])
async def test_the_registrar_refuses_malformed_scopes(plexor, bad):
    def register_tools(register, settings):
        register(lambda: 1, name="thing", scopes=bad)

    async with plexor.kernel([("bad", make_plugin("bad", plexor_register_tools=register_tools))]) as kernel:
        record = kernel.records["bad"]
        assert record.state.value == "failed"
        assert "declares scopes=" in str(record.error) and "scope names" in str(record.error)


async def test_declared_scopes_reach_the_spec(plexor):
    def register_tools(register, settings):
        register(lambda: 1, name="one", scopes=["x:admin", "y:read"])
        register(lambda: 2, name="two", scopes=[])

    async with plexor.kernel([("good", make_plugin("good", plexor_register_tools=register_tools))]) as kernel:
        from plexor.features.auth.scopes import ScopePolicy

        policy = ScopePolicy(kernel, {"good_two": ("z:read",)})
        assert policy.tool(kernel.registry.tools["good_one"]) == ("x:admin", "y:read")
        assert policy.tool(kernel.registry.tools["good_two"]) == ("z:read",)  # the operator's mapping wins
        assert policy.tool(kernel.registry.tools["plexor_health"]) == ("plexor:read",)  # readOnlyHint: derived read
