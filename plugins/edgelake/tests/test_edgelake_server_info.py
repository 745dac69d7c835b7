"""edgelake_server_info(tool=...): the plugin's setup for one tool, answered without asking a node."""

from __future__ import annotations

from typing import Any

import pytest
from standin import StandIn

from plexor_edgelake.toolspec import validate_document

pytestmark = pytest.mark.anyio


async def test_server_info_describes_one_tool(edgelake: Any, node: StandIn) -> None:
    async with edgelake(network_timeout=90) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        props = listed["edgelake_server_info"].input_schema["properties"]
        assert set(props) == {"tool"} and props["tool"]["description"]  # no node= or dry_run: it asks no node
        everything = (await client.call_tool("edgelake_server_info", {})).structured_content
        assert len(everything["tools"]) == len([n for n in listed if n.startswith("edgelake_")])
        for given in ("query", "edgelake_query", "edgelake.query", " Query "):
            r = await client.call_tool("edgelake_server_info", {"tool": given})
            assert not r.is_error, r.content[0].text
            info = r.structured_content
            assert [t["name"] for t in info["tools"]] == ["edgelake_query"], given
            assert info["tools"][0]["timeout"] == 90.0 and info["tools"][0]["destination"] == "{destination}"
            assert info["nodes"] == everything["nodes"] and info["timeouts"] == everything["timeouts"]
        as_null = (await client.call_tool("edgelake_server_info", {"tool": None})).structured_content
        assert as_null["tools"] == everything["tools"]  # null: every tool, as a strict-mode model sends it
        miss = await client.call_tool("edgelake_server_info", {"tool": "edgelake_qeury"})
        assert miss.is_error
        text = miss.content[0].text
        assert "no EdgeLake tool named 'edgelake_qeury'" in text and "Did you mean 'edgelake_query'?" in text
        assert "edgelake_list_tables" in text
        wrong_type = await client.call_tool("edgelake_server_info", {"tool": ["query"]})
        assert wrong_type.is_error and "argument 'tool' must be string" in wrong_type.content[0].text
    assert node.requests == []


async def test_a_disabled_tool_is_not_described(edgelake: Any, node: StandIn, tmp_path: Any) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text("version: 1\ntools:\n  query: {enabled: false}\n", encoding="utf-8")
    async with edgelake(tools_file=str(path)) as client:
        r = await client.call_tool("edgelake_server_info", {"tool": "query"})
        assert r.is_error and "disabled in your [edgelake] tools_file" in r.content[0].text


def test_a_handler_tool_declares_parameters_under_the_same_rules() -> None:
    doc = {"version": 1, "tools": {
        "about": {"description": "my setup", "handler": "server_info", "params": {"tool": {"type": "string"}}},
        "clash": {"description": "x", "handler": "server_info", "params": {"node": {"type": "string"}}},
    }}
    tools, _, problems = validate_document(doc, "mine")
    assert set(tools["about"].params) == {"tool"} and tools["about"].handler == "server_info"
    assert problems == ["tools.clash.params.node: 'node' cannot be a parameter name "
                        "(plain names only; 'node' and 'ctx' are reserved)"]
