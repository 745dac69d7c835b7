"""Conversations through a real MCP client: appending without ids, branching, paths, rendering, errors.

Each test runs on SQLite and on PostgreSQL (the ``backend`` fixture).
"""

from __future__ import annotations

import pytest
from arbor_testlib import Calls

pytestmark = pytest.mark.anyio


async def _conversation(call: Calls) -> dict[str, str]:
    tree = await call.ok("tree_create", metadata={"title": "Greeting"})
    ids = {"tree": tree["id"], "root": tree["root"]}
    for key, role, content in [
        ("system", "system", "You are a helpful assistant."),
        ("user", "user", "Hello!"),
        ("answer1", "assistant", "Hi, how can I help?"),
        ("followup", "user", "Tell me a joke."),
    ]:
        node = await call.ok("node_create_text", tree_id=ids["tree"], content=content, metadata={"role": role})
        ids[key] = node["id"]
    return ids


async def test_a_linear_conversation_needs_no_ids_and_moves_the_head(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        assert tree["state"] == "active" and tree["head"] == tree["root"]
        assert tree["refs"] == {"ref_count": 1, "owners": {"system": 1}}
        ids = await _conversation(call)
        # Each node continued from the one before: parent links form one chain.
        path = await call.ok("node_get_path", tree_id=ids["tree"], node_id=ids["followup"])
        assert path["path"] == [ids["root"], ids["system"], ids["user"], ids["answer1"], ids["followup"]]
        assert path["depth"] == 4
        head = await call.ok("tree_get_head", tree_id=ids["tree"])
        assert head["id"] == ids["followup"] and head["data"] == {"type": "text", "content": "Tell me a joke."}
        got = await call.ok("tree_get", tree_id=ids["tree"])
        assert got["head"] == ids["followup"] and got["node_count"] == 5 and got["metadata"] == {"title": "Greeting"}


async def test_branching_from_an_earlier_node_keeps_children_in_creation_order(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        t = ids["tree"]
        second = await call.ok("node_create_text", tree_id=t, content="Hello! What do you need?",
                               parent=ids["user"], metadata={"role": "assistant"})
        third = await call.ok("node_create_text", tree_id=t, content="Third take", parent=ids["user"],
                              metadata={"role": "assistant"})
        assert (second["position"], third["position"]) == (1, 2)
        kids = await call.ok("node_get_children", tree_id=t, node_id=ids["user"])
        assert [c["id"] for c in kids["children"]] == [ids["answer1"], second["id"], third["id"]]
        assert [c["position"] for c in kids["children"]] == [0, 1, 2]
        # The head followed the newest node; continuing without a parent extends that branch.
        reply = await call.ok("node_create_text", tree_id=t, content="More?", metadata={"role": "user"})
        assert reply["parent"] == third["id"]
        node = await call.ok("node_get", tree_id=t, node_id=ids["user"])
        assert node["children"] == [ids["answer1"], second["id"], third["id"]]
        assert node["metadata"] == {"role": "user"} and node["parent"] == ids["system"]
        parent = await call.ok("node_get_parent", tree_id=t, node_id=second["id"])
        assert parent["parent"]["id"] == ids["user"]
        root_parent = await call.ok("node_get_parent", tree_id=t, node_id=ids["root"])
        assert root_parent["parent"] is None
        leaves = await call.ok("context_list_leaves", tree_id=t)
        assert [leaf["id"] for leaf in leaves["leaves"]] == [ids["followup"], second["id"], reply["id"]]
        skeleton = await call.ok("tree_get_skeleton", tree_id=t)
        by_id = {n["id"]: n for n in skeleton["nodes"]}
        assert by_id[ids["user"]]["children"] == [ids["answer1"], second["id"], third["id"]]
        assert by_id[second["id"]] == {"id": second["id"], "parent": ids["user"], "children": [], "kind": "text",
                                      "role": "assistant"}
        assert "content" not in str(skeleton["nodes"])


async def test_set_head_starts_a_branch_without_passing_parent(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        moved = await call.ok("tree_set_head", tree_id=ids["tree"], node_id=ids["answer1"])
        assert moved["id"] == ids["answer1"] and moved["children"] == [ids["followup"]]
        branch = await call.ok("node_create_text", tree_id=ids["tree"], content="Another question",
                               metadata={"role": "user"})
        assert branch["parent"] == ids["answer1"] and branch["position"] == 1
        assert (await call.ok("tree_get", tree_id=ids["tree"]))["head"] == branch["id"]


async def test_context_path_returns_full_nodes_root_first(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        path = await call.ok("context_get_path", tree_id=ids["tree"], node_id=ids["answer1"])
        assert [n["id"] for n in path["nodes"]] == [ids["root"], ids["system"], ids["user"], ids["answer1"]]
        assert [n["data"]["content"] for n in path["nodes"][1:]] == [
            "You are a helpful assistant.", "Hello!", "Hi, how can I help?"]
        assert [n["metadata"].get("role") for n in path["nodes"]] == [None, "system", "user", "assistant"]
        assert [n["parent"] for n in path["nodes"]] == [None, ids["root"], ids["system"], ids["user"]]
        # Without node_id: the head's context.
        at_head = await call.ok("context_get_path", tree_id=ids["tree"])
        assert at_head["node_id"] == ids["followup"] and at_head["depth"] == 4


async def test_external_nodes_and_their_handles_on_the_path(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        t = ids["tree"]
        doc = await call.ok("node_create_external", tree_id=t,
                            handle={"source": "files", "identifier": "report.pdf#page=3", "source_version": "2",
                                    "metadata": {"bytes": 1200}}, metadata={"role": "tool"})
        assert doc["data"] == {"type": "external", "handle": {"source": "files", "source_version": "2",
                                                              "identifier": "report.pdf#page=3",
                                                              "metadata": {"bytes": 1200}}}
        await call.ok("node_create_text", tree_id=t, content="Summarised.", metadata={"role": "assistant"})
        img = await call.ok("node_create_external", tree_id=t, handle={"source": "img", "identifier": "cat.png"})
        handles = await call.ok("context_get_handles", tree_id=t)
        assert [h["node_id"] for h in handles["handles"]] == [doc["id"], img["id"]]
        assert handles["handles"][1]["handle"] == {"source": "img", "source_version": None, "identifier": "cat.png",
                                                   "metadata": {}}
        # A branch without externals has none.
        assert (await call.ok("context_get_handles", tree_id=t, node_id=ids["answer1"]))["handles"] == []
        text = await call.text("tree_render", tree_id=t)
        assert "Tool: [files:report.pdf#page=3]" in text and "[img:cat.png]" in text


async def test_render_shows_both_branches_with_roles_and_box_drawing(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        t = ids["tree"]
        await call.ok("node_create_text", tree_id=t, content="Line one\nline two", parent=ids["user"],
                      metadata={"role": "assistant"})
        await call.ok("node_create_text", tree_id=t, content="Plain, no role", parent=ids["root"])
        result = await client.call_tool("arbor_tree_render", {"tree_id": t})
        assert result.content[0].text == "\n".join([
            "(root)",
            "├── System: You are a helpful assistant.",
            "│   └── User: Hello!",
            "│       ├── Assistant: Hi, how can I help?",
            "│       │   └── User: Tell me a joke.",
            "│       └── Assistant: Line one↵line two",
            "└── Plain, no role",
        ])
        data = result.structured_content
        assert data["nodes_drawn"] == 7 and data["tree_id"] == t and data["rendering"] == result.content[0].text


async def test_render_cuts_multibyte_text_by_characters(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        t = tree["id"]
        emoji = "🎉" * 61
        cjk = "漢字テスト" * 13  # 65 characters, 195 UTF-8 bytes
        family = "👨‍👩‍👧" * 61  # each a single character built from 5 code points
        exact = "é" * 60
        for content in (emoji, cjk, family, exact):
            await call.ok("node_create_text", tree_id=t, content=content, parent=tree["root"],
                          metadata={"role": "user"})
        lines = (await call.text("tree_render", tree_id=t)).splitlines()
        assert lines[1] == "├── User: " + "🎉" * 57 + "..."
        assert lines[2] == "├── User: " + cjk[:57] + "..."
        assert lines[3] == "├── User: " + "👨‍👩‍👧" * 57 + "..."
        assert lines[4] == "└── User: " + exact  # exactly 60 characters: not cut
        # The stored text is untouched.
        kids = await call.ok("node_get_children", tree_id=t, node_id=tree["root"])
        assert [k["data"]["content"] for k in kids["children"]] == [emoji, cjk, family, exact]


async def test_render_depth_limit_and_subtree(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        t = ids["tree"]
        await call.ok("node_create_text", tree_id=t, content="Alt", parent=ids["user"], metadata={"role": "assistant"})
        limited = await call.text("tree_render", tree_id=t, max_depth=2)
        assert limited.splitlines() == [
            "(root)",
            "└── System: You are a helpful assistant.",
            "    └── User: Hello!",
            "        └── … 2 more children below max_depth",
        ]
        sub = await call.text("tree_render", tree_id=t, node_id=ids["user"])
        assert sub.splitlines() == [
            "User: Hello!",
            "├── Assistant: Hi, how can I help?",
            "│   └── User: Tell me a joke.",
            "└── Assistant: Alt",
        ]
        only = await call.text("tree_render", tree_id=t, node_id=ids["answer1"], max_depth=0)
        assert only.splitlines() == ["Assistant: Hi, how can I help?", "└── … 1 more child below max_depth"]
        text, _ = await call.error("tree_render", tree_id=t, max_depth=-1)
        assert "max_depth must be 0 or more" in text


async def test_tree_metadata_update_replaces_or_merges(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create", metadata={"title": "a", "lang": "en"})
        replaced = await call.ok("tree_update_metadata", tree_id=tree["id"], metadata={"title": "b"})
        assert replaced["metadata"] == {"title": "b"}
        merged = await call.ok("tree_update_metadata", tree_id=tree["id"], metadata={"lang": "fr", "title": None},
                               merge=True)
        assert merged["metadata"] == {"lang": "fr"}
        assert merged["updated_at"] >= tree["updated_at"]


async def test_errors_name_the_problem_and_the_next_step(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        ids = await _conversation(call)
        other = await call.ok("tree_create")
        missing = "00000000-0000-4000-8000-000000000000"

        text, err = await call.error("node_create_text", tree_id=missing, content="hi")
        assert err["type"] == "not_found" and f"no tree with id '{missing}'" in text and "arbor_tree_list" in text
        text, err = await call.error("tree_get", tree_id="not-a-uuid")
        assert err["type"] == "invalid_argument" and "'not-a-uuid' is not a UUID" in text
        text, err = await call.error("node_create_text", tree_id=ids["tree"], content="hi", parent=missing)
        assert err["type"] == "not_found" and f"no node with id '{missing}'" in text and "skeleton" in text
        text, err = await call.error("node_create_text", tree_id=other["id"], content="hi", parent=ids["user"])
        assert f"belongs to tree '{ids['tree']}'" in text
        text, err = await call.error("node_get_children", tree_id=ids["tree"], node_id=missing)
        assert err["type"] == "not_found"
        text, err = await call.error("node_create_external", tree_id=ids["tree"], handle={"source": "files"})
        assert "identifier" in text  # the schema or the store names the missing key
        text, err = await call.error("node_create_external", tree_id=ids["tree"],
                                     handle={"source": " ", "identifier": "x"})
        assert "handle.source must be a non-empty string" in text
        text, err = await call.error("node_create_text", tree_id=ids["tree"], content="x", metadata={"role": 3})
        assert "metadata.role must be a string" in text
        text, err = await call.error("tree_claim", tree_id=ids["tree"], owner_id="a", count=0)
        assert "count must be a positive whole number" in text
        text, err = await call.error("tree_list", state="deleted")
        assert "state" in text and "active" in text
        text, err = await call.error("tree_set_head", tree_id=ids["tree"], node_id=other["root"])
        assert "belongs to tree" in text
        # Nothing above changed the tree.
        assert (await call.ok("tree_get", tree_id=ids["tree"]))["node_count"] == 5
