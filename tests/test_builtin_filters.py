"""plexor_health(plugin=...) and plexor_plugins(plugin=..., state=...), through a real MCP client."""

from __future__ import annotations

import typing

import pytest
from conftest import make_plugin, tools_plugin

from plexor.builtin import PluginState
from plexor.core.records import State
from plexor.extending import FEATURES

pytestmark = pytest.mark.anyio


def _boom(plugin):
    raise OSError("port in use")


PLUGINS = [("good", tools_plugin("good", "goodies", ping=lambda: {"pong": True})),
           ("bad", make_plugin("bad", plexor_startup=_boom))]


def test_the_state_filter_offers_every_plugin_state():
    assert set(typing.get_args(PluginState)) == {s.value for s in State}


async def test_health_reports_one_plugin_by_name_or_namespace(plexor):
    async with plexor.client(PLUGINS) as client:
        everything = (await client.call_tool("plexor_health", {})).structured_content
        assert {p["name"] for p in everything["plugins"]} == {"plexor", "good", "bad", *FEATURES}
        for given in ("good", "GOODIES", " good "):
            one = await client.call_tool("plexor_health", {"plugin": given})
            assert not one.is_error, one.content[0].text
            report = one.structured_content
            assert [p["name"] for p in report["plugins"]] == ["good"], given
            assert report["pid"] == everything["pid"] and report["schema_hash"] == everything["schema_hash"]
        failed = (await client.call_tool("plexor_health", {"plugin": "bad"})).structured_content["plugins"]
        assert failed[0]["state"] == "failed" and "port in use" in failed[0]["error"]
        as_null = (await client.call_tool("plexor_health", {"plugin": None})).structured_content  # null: every plugin
        assert as_null["plugins"] == everything["plugins"]
        miss = await client.call_tool("plexor_health", {"plugin": "godo"})
        assert miss.is_error
        text = miss.content[0].text
        assert "no plugin named 'godo'" in text and "Did you mean 'good'?" in text and "bad, bus, card, daemon, direct, good, install, plexor" in text


async def test_plugins_filters_by_plugin_and_by_state(plexor):
    async with plexor.client(PLUGINS) as client:
        listed = (await client.call_tool("plexor_plugins", {})).structured_content["plugins"]
        assert [p["name"] for p in listed] == ["auth", "bad", "bus", "card", "daemon", "direct", "good", "install", "plexor", "tasks",
                                                "telemetry"]
        failed = (await client.call_tool("plexor_plugins", {"state": "failed"})).structured_content["plugins"]
        assert [(p["name"], p["state"]) for p in failed] == [("bad", "failed")]
        ready = (await client.call_tool("plexor_plugins", {"state": "ready"})).structured_content["plugins"]
        assert [p["name"] for p in ready] == ["auth", "bus", "card", "daemon", "direct", "good", "install", "plexor", "tasks",
                                               "telemetry"]
        assert (await client.call_tool("plexor_plugins", {"state": "disabled"})).structured_content == {"plugins": []}
        one = (await client.call_tool("plexor_plugins", {"plugin": "goodies"})).structured_content["plugins"]
        assert [p["name"] for p in one] == ["good"] and one[0]["tools"] == ["goodies_ping"]
        both = await client.call_tool("plexor_plugins", {"plugin": "good", "state": "failed"})
        assert both.structured_content == {"plugins": []}
        bad_state = await client.call_tool("plexor_plugins", {"state": "broken"})
        assert bad_state.is_error and "argument 'state'" in bad_state.content[0].text
        assert "failed" in bad_state.content[0].text  # the valid values are listed
        unknown = await client.call_tool("plexor_plugins", {"plugin": "nope"})
        assert unknown.is_error and "no plugin named 'nope'" in unknown.content[0].text


async def test_both_tools_advertise_their_filters(plexor):
    async with plexor.client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        health = tools["plexor_health"].input_schema
        assert health["properties"]["plugin"]["type"] == "string" and "required" not in health
        assert health["properties"]["plugin"]["nullable"] is True
        plugins = tools["plexor_plugins"].input_schema["properties"]
        assert set(plugins) == {"plugin", "state"}
        assert "failed" in str(plugins["state"]) and plugins["state"].get("description")
