"""Every plugin behind `plexor serve --transport http`, through the MCP SDK's own clients over Streamable
HTTP, stateful and --stateless: a tool of each plugin, resources, progress notifications.

The stdio version is test_all_plugins.py; tests/test_inspector.py drives the MCP Inspector. Runs in
`tox -e all`, where every plugin is installed; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import json
import os

import pytest
from interop.support import (
    STATUS_REPLY,
    edgelake_node,
    http_server,
    missing,
    server_env,
    wait_indexed,
    write_notes,
)

import plexor

PLUGINS = ("arbor", "keyboard", "folder-search", "edgelake")
absent = missing(*PLUGINS, "example")
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(absent), reason=f"needs every plugin installed (tox -e all); missing: {absent}"),
]


@pytest.fixture(params=["stateful", "stateless"])
def served(request, tmp_path):
    """A server with every plugin: a folder of notes to index and a stand-in EdgeLake node."""
    notes = write_notes(tmp_path / "notes")
    args = ["--stateless"] if request.param == "stateless" else []
    with edgelake_node() as node:
        env = server_env(tmp_path / "home", PLEXOR_FOLDER_SEARCH_FOLDERS=str(notes),
                         PLEXOR_EDGELAKE_NODES=node.address)
        with http_server(env, *args, log=tmp_path / "server.log") as server:
            server.node = node
            yield server



@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_plugin_answers_the_sdk_client_over_http(served, mode):
    from mcp import Client

    async with Client(served.url, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        for tool in ("plexor_health", "arbor_tree_create", "keyboard_lookup_keycode", "folders_search_content",
                     "edgelake_node_status"):
            assert tool in names, tool

        health = (await client.call_tool("plexor_health", {})).structured_content
        assert health["pid"] == served.proc.pid and health["version"] == plexor.__version__
        states = {p["name"]: p["state"] for p in health["plugins"]}
        for name in PLUGINS:
            assert states[name] in ("ready", "starting"), (name, states[name])

        key = await client.call_tool("keyboard_lookup_keycode", {"key_name": "escape"})
        assert key.structured_content["found"] is True and key.structured_content["key"]["code"] == 53

        tree = (await client.call_tool("arbor_tree_create", {"metadata": {"title": f"http {mode}"}})).structured_content
        tree_id = tree["id"]
        await client.call_tool("arbor_node_create_text",
                               {"tree_id": tree_id, "content": "Hello", "metadata": {"role": "user"}})
        render = await client.call_tool("arbor_tree_render", {"tree_id": tree_id})
        assert not render.is_error and "User: Hello" in render.content[0].text

        status = await client.call_tool("edgelake_node_status", {})
        assert not status.is_error and status.structured_content["status"] == STATUS_REPLY
        assert "get status where format = json" in served.node.commands
        refused = await client.call_tool("edgelake_list_databases", {})
        assert refused.is_error  # the stand-in answers every other command with the node's error 2
        assert "Error Command Structure" in refused.content[0].text

        await wait_indexed(client)
        found = await client.call_tool("folders_search_content", {"exact_terms": ["kettle"]})
        assert not found.is_error
        assert [r["path"] for r in found.structured_content["results"]] == ["kettle.md"]

        resources = {r.uri for r in (await client.list_resources()).resources}
        assert {"keycode://all", "example://about"} <= resources
        keys = await client.read_resource("keycode://all")
        assert json.loads(keys.contents[0].text)["count"] == 120
        tree_res = await client.read_resource(f"arbor://tree/{tree_id}")
        assert tree_id in tree_res.contents[0].text and f"http {mode}" in tree_res.contents[0].text
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"arbor://tree/{tree_id}", "keycode://category/{category}",
                "edgelake://database/{database}"} <= templates


async def test_progress_notifications_arrive_over_http(served):
    from mcp import Client

    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(served.url, mode="legacy") as client:
        await wait_indexed(client)
        r = await client.call_tool("folders_reindex", {"force": True}, progress_callback=on_progress)
        assert not r.is_error, r.content[0].text
    assert seen, "folders_reindex sent no progress notification the client received"
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)


async def test_client_session_over_streamable_http(served):
    """The SDK's lower-level ClientSession on the streamable HTTP transport, as many clients embed it."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(served.url) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name
        assert init.capabilities.tools is not None and init.capabilities.resources is not None
        health = await session.call_tool("plexor_health", {})
        assert health.structured_content["pid"] == served.proc.pid != os.getpid()
        combo = await session.call_tool("keyboard_get_key_combinations", {"shortcut": "cmd+shift+4"})
        assert not combo.is_error, combo.content[0].text
        assert combo.structured_content["canonical"] == "⇧⌘4"
        about = await session.read_resource("example://about")
        assert json.loads(about.contents[0].text) == {"plugin": "example", "greeting": "Hello"}
