"""Storage: migrations, one recursive query per path or subtree, bulk appends, light imports."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest
from arbor_testlib import Calls

from plexor_arbor.store import Store

pytestmark = pytest.mark.anyio


async def test_migration_is_recorded_and_data_survives_a_restart(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create", metadata={"keep": True})
        await call.ok("node_create_text", tree_id=tree["id"], content="persisted")
        db = client.kernel.plugin("arbor").database
        row = db.execute_sql(f"SELECT version FROM plexor_schema WHERE plugin = {db.param}", ("arbor",)).fetchone()
        assert row[0] == 1
        assert {"arbor_tree", "arbor_node", "arbor_owner"} <= set(db.get_tables())
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        path = await call.ok("context_get_path", tree_id=tree["id"])
        assert path["nodes"][-1]["data"]["content"] == "persisted"


async def test_bulk_append_builds_a_deep_chain_whose_path_comes_back_in_order(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        store = client.kernel.plugin("arbor").handle.service(Store)
        tree = await call.ok("tree_create")
        t = tree["id"]
        first = await call.ok("node_create_text", tree_id=t, content="first", parent=tree["root"])
        items = [(f"m{i}", {"role": "user" if i % 2 else "assistant"}) for i in range(3000)]
        done = await anyio.to_thread.run_sync(lambda: store.append_chain(t, items, parent=tree["root"]))
        assert done["count"] == 3000
        got = await call.ok("tree_get", tree_id=t)
        assert got["head"] == done["last"] and got["node_count"] == 3002
        kids = await call.ok("node_get_children", tree_id=t, node_id=tree["root"])
        assert [k["id"] for k in kids["children"]] == [first["id"], done["first"]]
        path = await call.ok("context_get_path", tree_id=t)
        contents = [n["data"]["content"] for n in path["nodes"]]
        assert contents == [""] + [f"m{i}" for i in range(3000)]
        assert path["nodes"][2]["metadata"] == {"role": "user"}
        # Appending once more continues from the new head, one level deeper.
        more = await call.ok("node_create_text", tree_id=t, content="after")
        assert more["parent"] == done["last"]
        assert (await call.ok("node_get_path", tree_id=t, node_id=more["id"]))["depth"] == 3001


async def test_path_and_subtree_are_one_recursive_query_each(plexor):
    async with plexor.client(installed=["arbor"], env={"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}) as client:
        store = client.kernel.plugin("arbor").handle.service(Store)
        tree = store.create_tree()
        store.append_chain(tree["id"], [(f"n{i}", None) for i in range(500)])
        head = store.get_tree(tree["id"])["head"]
        statements: list[str] = []
        conn = store.db.connection()
        conn.set_trace_callback(statements.append)
        try:
            path = store.path(tree["id"], head)
            path_sql = list(statements)
            statements.clear()
            _, rows = store.subtree(tree["id"])
            subtree_sql = list(statements)
        finally:
            conn.set_trace_callback(None)
        assert len(path) == 501 and len(rows) == 501
        for sql in (path_sql, subtree_sql):
            assert sum("WITH RECURSIVE" in s for s in sql) == 1
            assert len(sql) <= 3, sql  # the tree row, the node id, the recursive query


async def test_failed_creation_changes_nothing(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        other = await call.ok("tree_create")
        before = await call.ok("tree_get", tree_id=tree["id"])
        await call.error("node_create_text", tree_id=tree["id"], content="x", parent=other["root"])
        after = await call.ok("tree_get", tree_id=tree["id"])
        assert after["head"] == before["head"] and after["node_count"] == before["node_count"] == 1


async def test_two_kernels_in_one_process_use_their_own_databases(plexor, tmp_path):
    # The store queries the database object it was given, never the models' global binding.
    env = {"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}
    async with plexor.kernel(installed=["arbor"], env=env) as one:
        async with plexor.kernel(installed=["arbor"], env={**env, "PLEXOR_HOME": str(tmp_path / "two")}) as two:
            a = await one.call_tool("arbor_tree_create", {"metadata": {"k": 1}})
            b = await two.call_tool("arbor_tree_create", {"metadata": {"k": 2}})
            ids_one = [t["id"] for t in (await one.call_tool("arbor_tree_list", {})).data["trees"]]
            ids_two = [t["id"] for t in (await two.call_tool("arbor_tree_list", {})).data["trees"]]
            assert ids_one == [a.data["id"]] and ids_two == [b.data["id"]]


def test_the_entry_point_module_imports_nothing_heavy():
    code = ("import sys, plexor_arbor.plugin; "
            "print(sorted(m for m in ('peewee', 'regex', 'click', 'psycopg2', 'mcp', 'pydantic', "
            "'plexor_arbor.store', 'plexor_arbor.tools') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_database_errors_get_arbor_guidance():
    import peewee

    from plexor_arbor.plugin import plexor_error_guidance

    locked = plexor_error_guidance(peewee.OperationalError("database is locked"), {"plugin": "arbor"})
    assert "Another process is writing" in locked and "Retry" in locked
    integrity = plexor_error_guidance(peewee.IntegrityError("UNIQUE constraint failed"), {"plugin": "arbor"})
    assert "arbor_tree_get" in integrity
    down = plexor_error_guidance(peewee.OperationalError("could not connect to server"), {"plugin": "arbor"})
    assert "database_url" in down
    assert plexor_error_guidance(ValueError("something else"), {"plugin": "arbor"}) is None


def test_bulk_ids_are_valid_random_uuids():
    import uuid

    from plexor_arbor.store import uuid4_batch

    ids = uuid4_batch(2000)
    assert len(set(ids)) == 2000
    for value in ids[:200]:
        parsed = uuid.UUID(value)
        assert str(parsed) == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122


async def test_context_path_carries_every_field_of_every_node(plexor, backend):
    # The path is read as one row of per-column strings; every kind of node must come back intact:
    # branches (position > 0), external nodes, nested and non-ASCII metadata, empty and multi-line
    # text, and text holding the separators themselves (",", the unit separator), which sends the
    # read down the row-by-row fallback.
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create", metadata={"title": "Fields"})
        t = tree["id"]
        made = [await call.ok("node_create_text", tree_id=t, content="Hello, world", metadata={"role": "user"})]
        made.append(await call.ok("node_create_text", tree_id=t, content="first answer", metadata={"role": "assistant"}))
        # A branch: the second child of the first message.
        made.append(await call.ok("node_create_text", tree_id=t, content="", parent=made[0]["id"],
                                  metadata={"role": "assistant", "tags": ["b", 2], "nested": {"x": None}}))
        made.append(await call.ok("node_create_external", tree_id=t, metadata={"role": "tool"},
                                  handle={"source": "files", "identifier": "a,b.pdf", "source_version": "3",
                                          "metadata": {"pages": [1, 2]}}))
        made.append(await call.ok("node_create_text", tree_id=t, content="日本語 🎉👨‍👩‍👧\nline two, 3:4"))
        made.append(await call.ok("node_create_text", tree_id=t, content="same role", metadata={"role": "user"}))
        path = await call.ok("context_get_path", tree_id=t)
        expected = [await call.ok("node_get", tree_id=t, node_id=n) for n in [tree["root"]] + [m["id"] for m in made]
                    if n not in (made[1]["id"],)]
        for node in expected:
            node.pop("children")
        assert path["nodes"] == expected
        assert [n["position"] for n in path["nodes"]] == [0, 0, 1, 0, 0, 0]
        assert path["nodes"][3]["data"]["handle"]["identifier"] == "a,b.pdf"
        assert path["depth"] == 5 and path["node_id"] == made[-1]["id"]

        # Equal metadata is parsed once but every node gets a dict of its own.
        store = client.kernel.plugin("arbor").handle.service(Store)
        statements: list[str] = []
        if store.is_sqlite:
            store.db.connection().set_trace_callback(statements.append)
        try:
            nodes = store.path(t, made[-1]["id"])
        finally:
            if store.is_sqlite:
                store.db.connection().set_trace_callback(None)
        assert nodes == path["nodes"]
        if store.is_sqlite:  # the one-row read, no row-by-row fallback
            assert sum("WITH RECURSIVE" in s for s in statements) == 1
        nodes[1]["metadata"]["changed"] = True
        assert nodes[-1]["metadata"] == {"role": "user"}

        # The separators inside a text take the row-by-row read, with the same result.
        odd = await call.ok("node_create_text", tree_id=t, content="unit\x1fseparator\x1e, and a comma")
        again = await call.ok("context_get_path", tree_id=t)
        assert again["nodes"][:-1] == path["nodes"]
        assert again["nodes"][-1]["data"]["content"] == "unit\x1fseparator\x1e, and a comma"
        assert again["nodes"][-1]["parent"] == made[-1]["id"] and again["nodes"][-1]["id"] == odd["id"]
        assert store.path(t, odd["id"]) == store._path_by_rows(t, store._node_ref(t, odd["id"])[0])
        # The root alone is a path too.
        root_only = await call.ok("context_get_path", tree_id=t, node_id=tree["root"])
        assert [n["id"] for n in root_only["nodes"]] == [tree["root"]] and root_only["nodes"][0]["parent"] is None


async def test_context_path_through_many_branches(plexor, backend):
    # A path that turns into a later branch at every level (position 1, 2, ...), with external nodes between.
    async with plexor.client(installed=["arbor"], env=backend) as client:
        store = client.kernel.plugin("arbor").handle.service(Store)
        tree = store.create_tree()
        t = tree["id"]
        parent = tree["root"]
        for level in range(15):
            for sibling in range(level % 3 + 1):
                node = store.create_node(t, content=f"level {level} take {sibling}", parent=parent,
                                         metadata={"role": "user", "level": level})
            if level % 4 == 3:
                node = store.create_node(t, handle={"source": "s", "identifier": f"doc{level}"}, parent=node["id"])
            parent = node["id"]
        path = store.path(t, parent)
        assert path == store._path_by_rows(t, store._node_ref(t, parent)[0])
        assert [n["position"] for n in path[1:5]] == [0, 1, 2, 0]
        assert sum(n["data"]["type"] == "external" for n in path) == 3
        assert [n["parent"] for n in path[1:]] == [n["id"] for n in path[:-1]]
        assert store.path_ids(t, parent) == [n["id"] for n in path]


async def test_paths_through_runs_and_interleaved_writes(plexor, backend):
    # Nodes written in one go have consecutive keys (long runs, read a block at a time); nodes of two
    # trees written turn about do not (every node a run of its own). Both read back exactly, in one query.
    async with plexor.client(installed=["arbor"], env=backend) as client:
        store = client.kernel.plugin("arbor").handle.service(Store)
        one, two = store.create_tree()["id"], store.create_tree()["id"]
        for i in range(40):
            store.create_node(one, content=f"one {i}", metadata={"role": "user"})
            store.create_node(two, content=f"two {i}")
        chain = store.append_chain(one, [(f"bulk {i}", {"role": "assistant"}) for i in range(1300)])
        for i in range(5):
            store.create_node(two, content=f"two again {i}")
            last = store.create_node(one, content=f"one again {i}")
        branch = store.create_node(one, content="from the middle", parent=chain["first"])
        for tree, head in ((one, last["id"]), (two, store.head_id(two)), (one, chain["last"]), (one, branch["id"])):
            statements: list[str] = []
            if store.is_sqlite:
                store.db.connection().set_trace_callback(statements.append)
            try:
                path = store.path(tree, head)
                ids = store.path_ids(tree, head)
            finally:
                if store.is_sqlite:
                    store.db.connection().set_trace_callback(None)
            assert path == store._path_by_rows(tree, store._node_ref(tree, head)[0])
            assert ids == [n["id"] for n in path] and path[-1]["id"] == head and path[0]["parent"] is None
            if store.is_sqlite:  # no row-by-row fallback
                assert sum("WITH RECURSIVE" in s for s in statements) == 2, statements
        assert len(store.path(one, last["id"])) == 1 + 40 + 1300 + 5
        assert [n["data"]["content"] for n in store.path(one, branch["id"])][-3:] == ["one 39", "bulk 0", "from the middle"]


async def test_paths_do_not_depend_on_unspecified_row_order(plexor):
    # SQLite can be told to return unordered rows backwards; paths must come back the same anyway.
    async with plexor.client(installed=["arbor"], env={"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}) as client:
        store = client.kernel.plugin("arbor").handle.service(Store)
        tree = store.create_tree()["id"]
        chain = store.append_chain(tree, [(f"m{i}", {"role": "user"}) for i in range(1200)])
        branch = store.create_node(tree, content="branch", parent=chain["first"])
        expected = {node: store.path(tree, node) for node in (chain["last"], branch["id"])}
        conn = store.db.connection()
        conn.execute("PRAGMA reverse_unordered_selects = 1")
        try:
            for node, path in expected.items():
                assert store.path(tree, node) == path
                assert store.path_ids(tree, node) == [n["id"] for n in path]
        finally:
            conn.execute("PRAGMA reverse_unordered_selects = 0")
        assert len(expected[chain["last"]]) == 1201 and expected[branch["id"]][-1]["data"]["content"] == "branch"
