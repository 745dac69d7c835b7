"""The tool catalogue as a client sees it, and one conversation over a real stdio server process."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio

EXPECTED = {
    "tree_create", "tree_get", "tree_get_skeleton", "tree_list", "tree_update_metadata", "tree_claim",
    "tree_release", "tree_list_scheduled", "tree_list_archived", "node_create_text", "node_create_external",
    "node_get", "node_get_children", "node_get_parent", "node_get_path", "context_list_leaves",
    "context_get_path", "context_get_handles", "tree_render", "tree_get_head", "tree_set_head", "tree_get_archived",
    "tree_purge",
}


async def test_every_tool_is_listed_with_a_description_schema_and_hints(plexor):
    async with plexor.client(installed=["arbor"], env={"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools if t.name.startswith("arbor_")}
        assert set(tools) == {f"arbor_{name}" for name in EXPECTED}
        for tool in tools.values():
            assert len(tool.description) > 40, tool.name
            for name, prop in tool.input_schema.get("properties", {}).items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"
        assert tools["arbor_tree_render"].annotations.read_only_hint is True
        assert tools["arbor_tree_release"].annotations.destructive_hint is True
        assert tools["arbor_node_create_text"].annotations.read_only_hint is False
        create = tools["arbor_node_create_text"].input_schema
        assert set(create["required"]) == {"tree_id", "content"}
        handle = tools["arbor_node_create_external"].input_schema
        assert "handle" in handle["required"]
        # The dotted form resolves to the same tool.
        made = await client.call_tool("arbor.tree_create", {})
        assert not made.is_error


async def test_a_conversation_over_stdio(plexor):
    async with plexor.stdio_client(installed=["arbor"], env={"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}) as client:
        tree = (await client.call_tool("arbor_tree_create", {"metadata": {"title": "stdio"}})).structured_content
        for role, text in (("user", "Hi"), ("assistant", "Hello! ✨")):
            result = await client.call_tool("arbor_node_create_text",
                                            {"tree_id": tree["id"], "content": text, "metadata": {"role": role}})
            assert not result.is_error, result.content[0].text
        rendered = await client.call_tool("arbor_tree_render", {"tree_id": tree["id"]})
        assert rendered.content[0].text == "(root)\n└── User: Hi\n    └── Assistant: Hello! ✨"
        listed = await client.list_resources()
        assert f"arbor://tree/{tree['id']}/head" in [r.uri for r in listed.resources]
