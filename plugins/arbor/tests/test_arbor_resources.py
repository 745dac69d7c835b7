"""The three resource forms, the resources/list lister, and not-found errors with guidance."""

from __future__ import annotations

import pytest
from arbor_testlib import Calls
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio


async def test_templates_are_registered(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        templates = await client.list_resource_templates()
        found = {t.uri_template: t.mime_type for t in templates.resource_templates}
        assert found == {
            "arbor://tree/{tree_id}": "application/json",
            "arbor://tree/{tree_id}/node/{node_id}": "application/json",
            "arbor://tree/{tree_id}/head": "application/json",
        }


async def test_reading_a_tree_a_node_and_the_head(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create", metadata={"title": "Docs"})
        t = tree["id"]
        hello = await call.ok("node_create_text", tree_id=t, content="Hello", metadata={"role": "user"})
        reply = await call.ok("node_create_text", tree_id=t, content="Hi", metadata={"role": "assistant"})

        read = await call.resource(f"arbor://tree/{t}")
        assert read["id"] == t and read["root"] == tree["root"] and read["head"] == reply["id"]
        assert read["metadata"] == {"title": "Docs"} and read["refs"]["owners"] == {"system": 1}
        node = await call.resource(f"arbor://tree/{t}/node/{hello['id']}")
        assert node["data"] == {"type": "text", "content": "Hello"} and node["children"] == [reply["id"]]
        assert node["metadata"] == {"role": "user"} and node["parent"] == tree["root"]
        head = await call.resource(f"arbor://tree/{t}/head")
        assert head["id"] == reply["id"] and head["data"]["content"] == "Hi" and head["children"] == []


async def test_resources_list_shows_each_active_tree_and_its_head(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        first = await call.ok("tree_create", metadata={"title": "First"})
        second = await call.ok("tree_create")
        dropped = await call.ok("tree_create")
        await call.ok("tree_release", tree_id=dropped["id"], owner_id="system")
        listed = await client.list_resources()
        uris = [r.uri for r in listed.resources if r.uri.startswith("arbor://")]
        assert uris == [
            f"arbor://tree/{first['id']}", f"arbor://tree/{first['id']}/head",
            f"arbor://tree/{second['id']}", f"arbor://tree/{second['id']}/head",
        ]
        names = {r.uri: r.name for r in listed.resources}
        assert "First" in names[f"arbor://tree/{first['id']}"]
        # Every listed URI is readable through a template.
        for uri in uris:
            read = await client.read_resource(uri)
            assert read.contents[0].text.startswith("{")


async def test_unknown_tree_or_node_is_not_found_with_guidance(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        missing = "11111111-1111-4111-8111-111111111111"
        with pytest.raises(MCPError) as exc:
            await client.read_resource(f"arbor://tree/{missing}")
        assert exc.value.code == -32002 and "no tree with id" in str(exc.value) and "arbor_tree_list" in str(exc.value)
        with pytest.raises(MCPError) as exc:
            await client.read_resource(f"arbor://tree/{tree['id']}/node/{missing}")
        assert exc.value.code == -32002 and "no node with id" in str(exc.value)
        with pytest.raises(MCPError) as exc:
            await client.read_resource(f"arbor://tree/{missing}/head")
        assert exc.value.code == -32002
        with pytest.raises(MCPError) as exc:
            await client.read_resource("arbor://tree/not-a-uuid")
        assert "is not a UUID" in str(exc.value)
