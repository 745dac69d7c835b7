"""Every plugin installed together, behind one server, through real MCP clients (stdio and in memory).

Runs in `tox -e all`, where every plugin is installed; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import json

import pytest
from interop.support import missing, wait_indexed, write_notes

PLUGINS = ("arbor", "keyboard", "folder-search", "edgelake")
absent = missing(*PLUGINS)
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(absent), reason=f"needs every plugin installed (tox -e all); missing: {absent}"),
]


@pytest.fixture
def corpus(tmp_path):
    return write_notes(tmp_path / "notes")


async def test_every_plugin_answers_over_stdio(plexor, corpus):
    env = {"PLEXOR_FOLDER_SEARCH_FOLDERS": str(corpus)}
    async with plexor.stdio_client(env=env) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        for prefix in ("plexor_", "arbor_", "keyboard_", "folders_", "edgelake_"):
            assert any(n.startswith(prefix) for n in names), prefix

        health = (await client.call_tool("plexor_health", {})).structured_content
        states = {p["name"]: p["state"] for p in health["plugins"]}
        for name in PLUGINS:
            assert states[name] in ("ready", "starting"), (name, states[name])

        key = await client.call_tool("keyboard_lookup_keycode", {"key_name": "escape"})
        assert key.structured_content["found"] is True and key.structured_content["key"]["code"] == 53

        tree = (await client.call_tool("arbor_tree_create", {"metadata": {"title": "integration"}})).structured_content
        tree_id = tree.get("tree_id") or tree.get("id") or tree["tree"]["id"]
        await client.call_tool("arbor_node_create_text", {"tree_id": tree_id, "content": "Hello", "metadata": {"role": "user"}})
        render = await client.call_tool("arbor_tree_render", {"tree_id": tree_id})
        assert not render.is_error and "User: Hello" in render.content[0].text

        info = await client.call_tool("edgelake_server_info", {})
        assert not info.is_error
        down = await client.call_tool("edgelake_list_databases", {})
        assert down.is_error and "start the node" in down.content[0].text.lower()

        info = await wait_indexed(client)
        assert info["totals"]["documents"] == 2
        found = await client.call_tool("folders_search_content", {"exact_terms": ["kettle"]})
        assert not found.is_error
        assert "kettle.md" in json.dumps(found.structured_content)

        resources = {r.uri for r in (await client.list_resources()).resources}
        assert "keycode://all" in resources
        assert any(uri.startswith(f"arbor://tree/{tree_id}") for uri in resources)
        tree_res = await client.read_resource(f"arbor://tree/{tree_id}")
        assert tree_id in tree_res.contents[0].text
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"arbor://tree/{tree_id}", "keycode://category/{category}",
                "edgelake://database/{database}"} <= templates


async def test_unknown_tool_guidance_names_every_namespace(plexor):
    async with plexor.client(installed=list(PLUGINS)) as client:
        r = await client.call_tool("nope_tool", {})
        assert r.is_error
        for ns in ("arbor", "edgelake", "folders", "keyboard", "plexor"):
            assert ns in r.content[0].text
        near = await client.call_tool("keyboard_lookup_keycod", {"key_name": "a"})
        assert "keyboard_lookup_keycode" in near.content[0].text


async def test_disabling_one_plugin_leaves_the_rest(plexor):
    async with plexor.client(installed=list(PLUGINS), env={"PLEXOR_DISABLE": "arbor"}) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not any(n.startswith("arbor_") for n in names)
        r = await client.call_tool("arbor_tree_create", {})
        assert r.is_error and "belongs to the plugin 'arbor', which is disabled" in r.content[0].text
        ok = await client.call_tool("keyboard_lookup_keycode", {"key_name": "a"})
        assert ok.structured_content["key"]["code"] == 0
