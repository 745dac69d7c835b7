"""The three resource forms, the resources/list lister (bounded), not-found errors with guidance, and
notifications/resources/updated for subscribed trees."""

from __future__ import annotations

import json
import warnings

import anyio
import mcp_types as types
import pytest
from arbor_testlib import Calls
from mcp.shared.exceptions import MCPError

from plexor_arbor.store import Store

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
        assert uris == [  # newest first
            f"arbor://tree/{second['id']}", f"arbor://tree/{second['id']}/head",
            f"arbor://tree/{first['id']}", f"arbor://tree/{first['id']}/head",
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


async def _complete(client, template: str, value: str, argument: str = "tree_id") -> list[str]:
    from mcp_types import ResourceTemplateReference

    result = await client.complete(ResourceTemplateReference(type="ref/resource", uri=template),
                                   {"name": argument, "value": value})
    return result.completion.values


async def test_tree_id_completes_from_active_trees_by_prefix(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        older = await call.ok("tree_create", metadata={"title": "older"})
        newer = await call.ok("tree_create", metadata={"title": "newer"})
        dropped = await call.ok("tree_create")
        await call.ok("tree_release", tree_id=dropped["id"], owner_id="system")

        # Nothing typed yet: the active trees, the most recently changed first; never the scheduled one.
        await call.ok("node_create_text", tree_id=older["id"], content="touched last")
        assert await _complete(client, "arbor://tree/{tree_id}", "") == [older["id"], newer["id"]]
        # A prefix narrows it down, in any case, on every arbor template.
        for template in ("arbor://tree/{tree_id}", "arbor://tree/{tree_id}/head",
                         "arbor://tree/{tree_id}/node/{node_id}"):
            assert await _complete(client, template, newer["id"][:8]) == [newer["id"]]
            assert await _complete(client, template, newer["id"][:8].upper()) == [newer["id"]]
        assert await _complete(client, "arbor://tree/{tree_id}", newer["id"]) == [newer["id"]]
        assert await _complete(client, "arbor://tree/{tree_id}", dropped["id"][:12]) == []
        # Input no tree id could start with matches nothing (and is no error).
        for bad in ("zz", "%", "_", newer["id"] + "0", "' OR 1=1 --"):
            assert await _complete(client, "arbor://tree/{tree_id}", bad) == []
        # Only tree_id completes; a node id would need the tree first.
        assert await _complete(client, "arbor://tree/{tree_id}/node/{node_id}", "", "node_id") == []
        # A claim brings the scheduled tree back into the completions.
        await call.ok("tree_claim", tree_id=dropped["id"], owner_id="system")
        assert await _complete(client, "arbor://tree/{tree_id}", dropped["id"][:12]) == [dropped["id"]]


async def test_tree_id_completion_is_bounded(plexor):
    async with plexor.client(installed=["arbor"], env={"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}) as client:
        store = client.kernel.plugin("arbor").handle.service(Store)
        made = [store.create_tree()["id"] for _ in range(130)]
        values = await _complete(client, "arbor://tree/{tree_id}", "")
        assert len(values) == 100 and set(values) <= set(made)
        assert store.complete_tree_ids("", limit=7) == values[:7]


def _listed(listed: types.ListResourcesResult) -> list[str]:
    return [r.uri.split("/")[3] for r in listed.resources if r.uri.startswith("arbor://") and not r.uri.endswith("/head")]


async def test_resources_list_is_bounded_to_pinned_then_newest_trees(plexor, backend):
    env = {**backend, "PLEXOR_ARBOR_LISTED_TREES": "3", "PLEXOR_PAGE_SIZE": "4"}
    async with plexor.client(installed=["arbor"], env=env) as client:
        call = Calls(client)
        ids = [(await call.ok("tree_create", metadata=json.dumps({"title": f"T{i}"})))["id"] for i in range(6)]
        await call.ok("tree_update_metadata", tree_id=ids[0], metadata='{"pinned": true}', merge=True)
        await call.ok("tree_update_metadata", tree_id=ids[1], metadata='{"note": "not \\"pinned\\": true"}')
        found, cursor = [], None  # paged: 3 trees are 6 resources, pages of 4
        while True:
            page = await client.list_resources(cursor=cursor)
            found += page.resources
            cursor = page.next_cursor
            if cursor is None:
                break
        assert _listed(types.ListResourcesResult(resources=found)) == [ids[0], ids[5], ids[4]]
        assert len(found) == 6
        # the others are still there, through the template
        assert (await call.resource(f"arbor://tree/{ids[2]}"))["metadata"] == {"title": "T2"}
        templates = await client.list_resource_templates()
        assert "arbor://tree/{tree_id}" in {t.uri_template for t in templates.resource_templates}


async def test_resources_list_of_zero_trees_and_a_bad_setting(plexor, backend):
    async with plexor.client(installed=["arbor"], env={**backend, "PLEXOR_ARBOR_LISTED_TREES": "0"}) as client:
        await Calls(client).ok("tree_create")
        assert _listed(await client.list_resources()) == []
    async with plexor.client(installed=["arbor"], env={**backend, "PLEXOR_ARBOR_LISTED_TREES": "-1"}) as client:
        plugins = await client.call_tool("plexor_plugins", {})
        arbor = next(p for p in plugins.structured_content["plugins"] if p["name"] == "arbor")
        assert arbor["state"] == "failed" and "listed_trees = -1" in arbor["error"]


class _Inbox:
    def __init__(self) -> None:
        self.updated: list[str] = []
        self.list_changed = 0

    async def __call__(self, message: object) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            self.updated.append(str(root.params.uri))
        elif isinstance(root, types.ResourceListChangedNotification):
            self.list_changed += 1

    async def settle(self, client: object) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ping is legacy-only, and this client is legacy
            await client.send_ping()  # type: ignore[attr-defined]
        await anyio.sleep(0.2)


async def test_a_subscribed_client_hears_when_a_tree_changes(plexor, backend):
    inbox = _Inbox()
    async with plexor.client(installed=["arbor"], env=backend, mode="legacy", message_handler=inbox) as client:
        call = Calls(client)
        await client.list_resources()  # a session is told of changes to the lists it fetched
        tree = await call.ok("tree_create")
        other = await call.ok("tree_create")
        t = tree["id"]
        await inbox.settle(client)
        assert inbox.list_changed == 1  # each new tree enters the listing: said once, until it lists again
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for uri in (f"arbor://tree/{t}", f"arbor://tree/{t}/head", f"arbor://tree/{t}/node/{tree['root']}"):
                await client.subscribe_resource(uri)
        await call.ok("node_create_text", tree_id=other["id"], content="elsewhere")  # not subscribed
        await inbox.settle(client)
        assert inbox.updated == []

        hello = await call.ok("node_create_text", tree_id=t, content="Hello")
        await inbox.settle(client)
        assert sorted(inbox.updated) == sorted([f"arbor://tree/{t}", f"arbor://tree/{t}/head",
                                                f"arbor://tree/{t}/node/{tree['root']}"])
        inbox.updated.clear()
        await call.ok("tree_set_head", tree_id=t, node_id=tree["root"])
        await call.ok("tree_update_metadata", tree_id=t, metadata='{"title": "Renamed"}')
        await inbox.settle(client)
        assert inbox.updated == [f"arbor://tree/{t}", f"arbor://tree/{t}/head", f"arbor://tree/{t}"]
        assert (await call.resource(f"arbor://tree/{t}"))["metadata"] == {"title": "Renamed"}
        inbox.updated.clear()
        await client.list_resources()
        before = inbox.list_changed
        await call.ok("tree_release", tree_id=t, owner_id="system")
        await call.ok("tree_purge", tree_id=t, confirm=True)
        await inbox.settle(client)
        assert inbox.updated == [f"arbor://tree/{t}", f"arbor://tree/{t}", f"arbor://tree/{t}/head"]
        assert inbox.list_changed == before + 1  # released: it left the listing (purging it changes nothing more)
        assert hello["tree_id"] == t


async def test_a_modern_client_hears_tree_changes_on_its_listen_stream(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        call = Calls(client)
        t = (await call.ok("tree_create"))["id"]
        async with client.listen(resource_subscriptions=[f"arbor://tree/{t}"]) as sub:
            await call.ok("node_create_text", tree_id=t, content="Hello")
            with anyio.fail_after(5):
                async for event in sub:
                    assert event.uri == f"arbor://tree/{t}"
                    break
