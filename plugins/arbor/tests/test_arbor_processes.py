"""Two server processes sharing one database (SQLite file with WAL, or PostgreSQL) both work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from arbor_testlib import Calls

pytestmark = pytest.mark.anyio

WRITER = Path(__file__).with_name("arbor_writer.py")


async def test_two_processes_append_to_one_tree(plexor, backend, tmp_path):
    count = 120
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        t, root = tree["id"], tree["root"]
        env = plexor.environ(["arbor"], backend)
        procs = [
            subprocess.Popen([sys.executable, str(WRITER), t, root, str(count), label, str(tmp_path)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for label in ("alpha", "beta")
        ]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err[-2000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        for res in results:
            assert res["errors"] == [] and len(res["created"]) == count

        got = await call.ok("tree_get", tree_id=t)
        assert got["node_count"] == 1 + 2 * count
        # Sibling positions under the shared parent are unique and gap-free.
        kids = (await call.ok("node_get_children", tree_id=t, node_id=root))["children"]
        assert [k["position"] for k in kids] == list(range(len(kids)))
        # Each process's own siblings keep their creation order.
        for label in ("alpha", "beta"):
            mine = [int(k["data"]["content"].split("-")[1]) for k in kids if k["metadata"]["role"] == label]
            assert mine == sorted(mine)
        # Every node is reachable from the root: the skeleton accounts for all of them.
        skeleton = await call.ok("tree_get_skeleton", tree_id=t)
        assert len(skeleton["nodes"]) == 1 + 2 * count
        # The head is one of the nodes the writers created last.
        assert got["head"] in {res["created"][-1] for res in results} | {res["created"][-2] for res in results}
