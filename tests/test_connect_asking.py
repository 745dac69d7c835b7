"""`plexor connect` relays URL-mode elicitation and sampling with tools: real `plexor connect` processes, a real
daemon with the conformance fixture and a plugin that asks both, driven by the SDK's client and a raw stdio client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conformance.serving import fixture_env
from conftest import install_fake_dist
from test_asking import Traveller

from plexor.features.daemon.process import read_registry, registry_path, stop_daemon

pytestmark = pytest.mark.anyio

VOYAGE = """
from plexor import Context, hookimpl

WEATHER = {"name": "weather", "description": "The weather in a city.",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@hookimpl
def plexor_register_tools(register, settings):
    async def signin(ctx: Context) -> dict:
        '''Send the user to a sign-in page.'''
        got = await ctx.elicit_url("Sign in to Example to continue.", "https://example.org/login?x=1")
        return {"action": got["action"]}

    async def forecast(ctx: Context) -> dict:
        '''Let the client's model call a weather tool.'''
        first = await ctx.sample("Should I take an umbrella in Lyon?", tools=[WEATHER], tool_choice="auto",
                                 max_tokens=50, key="first")
        use = first["content"][0]
        return {"asked": use["name"], "input": use["input"], "stop": first["stopReason"]}

    def can(ctx: Context) -> dict:
        '''What the client can be asked, as this server sees it.'''
        return {what: ctx.can_ask(what) for what in ("elicitation", "elicitation.url", "sampling", "sampling.tools")}

    register(signin)
    register(forecast)
    register(can)
"""


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    install_fake_dist(site, "plexor-fakevoyage", "fakevoyage", "plexor_fakevoyage", VOYAGE)
    yield home, site
    info = read_registry(registry_path(_env(home, site)))
    if info is not None:
        stop_daemon(info, wait=10)


def _env(home, site):
    env = fixture_env(home, PLEXOR_PLUGINS="conformance,fakevoyage")
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    return env


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_url_elicitation_and_sampling_with_tools_go_through_connect(home, mode):
    from mcp import Client, StdioServerParameters

    traveller = Traveller()
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=_env(*home))
    async with Client(params, mode=mode, **traveller.callbacks()) as client:
        seen = await client.call_tool("fakevoyage_can", {})
        assert seen.structured_content == {"elicitation": True, "elicitation.url": True, "sampling": True,
                                           "sampling.tools": True}
        signin = await client.call_tool("fakevoyage_signin", {})
        assert not signin.is_error, signin.content
        assert signin.structured_content == {"action": "accept"}
        forecast = await client.call_tool("fakevoyage_forecast", {})
        assert not forecast.is_error, forecast.content
        assert forecast.structured_content == {"asked": "weather", "input": {"city": "Lyon"}, "stop": "toolUse"}
    assert [page[:2] for page in traveller.pages] == [("url", "https://example.org/login?x=1")]
    assert traveller.samples == [["weather"]]


async def test_connect_tells_a_client_without_sampling_tools(home):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=_env(*home))
    async with Client(params, mode="legacy", **Traveller().callbacks(tools=False)) as client:
        seen = await client.call_tool("fakevoyage_can", {})
        assert seen.structured_content["sampling"] is True and seen.structured_content["sampling.tools"] is False
        r = await client.call_tool("fakevoyage_forecast", {})
    assert r.is_error and "did not declare the sampling with tools capability" in r.content[0].text


def _raw_can(home, site, elicitation: dict) -> dict:
    """`fakevoyage_can` through `plexor connect`, from a raw 2025-11-25 client declaring ``elicitation``."""
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "connect"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_env(home, site))
    try:
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"elicitation": elicitation},
                "clientInfo": {"name": "raw", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fakevoyage_can", "arguments": {}}},
        ]
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in lines).encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "plexor connect closed stdout"
            reply = json.loads(line)
            if reply.get("id") == 2:
                return reply["result"]["structuredContent"]
        raise AssertionError("no answer to tools/call")
    finally:
        proc.kill()
        proc.wait()


def test_the_daemon_sees_which_elicitation_modes_the_end_client_declared(home):
    form_only = _raw_can(*home, {"form": {}})
    assert form_only["elicitation"] is True and form_only["elicitation.url"] is False
    url_only = _raw_can(*home, {"url": {}})
    assert url_only["elicitation"] is False and url_only["elicitation.url"] is True
