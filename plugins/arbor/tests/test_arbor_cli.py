"""`plexor arbor export` / `import` round-trip a tree as JSON, through the real `plexor` command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from arbor_testlib import Calls

pytestmark = pytest.mark.anyio


def plexor_cmd(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "plexor", *args], env=env, capture_output=True, text=True, timeout=120)


async def _build(call: Calls) -> str:
    tree = await call.ok("tree_create", metadata={"title": "Round trip", "tags": ["a", "b"]})
    t = tree["id"]
    await call.ok("node_create_text", tree_id=t, content="Be brief.", metadata={"role": "system"})
    q = await call.ok("node_create_text", tree_id=t, content="Was ist 2+2? 🤔", metadata={"role": "user"})
    await call.ok("node_create_text", tree_id=t, content="4", metadata={"role": "assistant"})
    await call.ok("node_create_external", tree_id=t, parent=q["id"],
                  handle={"source": "calc", "identifier": "2+2", "source_version": "1"}, metadata={"role": "tool"})
    await call.ok("node_create_text", tree_id=t, content="Vier.", metadata={"role": "assistant"})
    await call.ok("tree_set_head", tree_id=t, node_id=q["id"])
    await call.ok("tree_claim", tree_id=t, owner_id="alice", count=2)
    return t


async def test_export_then_import_elsewhere_gives_the_same_document(plexor, backend, tmp_path):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        t = await _build(call)
        rendering = await call.text("tree_render", tree_id=t)
        env = plexor.environ(None, backend)
        out = tmp_path / "tree.json"
        done = plexor_cmd(["arbor", "export", t, "-o", str(out)], env)
        assert done.returncode == 0, done.stderr
        first = json.loads(out.read_text(encoding="utf-8"))
        assert first["format"] == "plexor-arbor/1" and len(first["nodes"]) == 6
        assert first["tree"]["refs"] == {"ref_count": 3, "owners": {"alice": 2, "system": 1}}

        # The same database refuses a second copy with the same ids, and says what to do.
        again = plexor_cmd(["arbor", "import", str(out)], env)
        assert again.returncode == 2 and "already exists" in again.stderr and "--new-ids" in again.stderr
        copy = plexor_cmd(["arbor", "import", str(out), "--new-ids"], env)
        assert copy.returncode == 0, copy.stderr
        new_id = copy.stdout.split()[2]
        assert new_id != t
        assert (await call.text("tree_render", tree_id=new_id)) == rendering
        copied = await call.ok("tree_get", tree_id=new_id)
        assert copied["refs"] == first["tree"]["refs"] and copied["metadata"] == first["tree"]["metadata"]

    # Into a fresh home with its own SQLite database: the export of the import is the same document.
    other = tmp_path / "other-home"
    other_env = dict(plexor.environ(None, {"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}), PLEXOR_HOME=str(other))
    other_env.pop("PLEXOR_ARBOR_DATABASE_URL", None)
    done = plexor_cmd(["arbor", "import", str(out)], other_env)
    assert done.returncode == 0, done.stderr
    assert f"imported tree {t} (6 nodes, state active)" in done.stdout
    back = plexor_cmd(["arbor", "export", t], other_env)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout) == first


async def test_cli_errors_are_clear(plexor, backend, tmp_path):
    env = plexor.environ(None, backend)
    missing = plexor_cmd(["arbor", "export", "22222222-2222-4222-8222-222222222222"], env)
    assert missing.returncode == 1 and "no tree with id" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    broken = plexor_cmd(["arbor", "import", str(bad)], env)
    assert broken.returncode == 2 and "is not JSON" in broken.stderr
    bad.write_text('{"format": "something-else"}', encoding="utf-8")
    wrong = plexor_cmd(["arbor", "import", str(bad)], env)
    assert wrong.returncode == 2 and "not an Arbor export" in wrong.stderr
    usage = plexor_cmd(["arbor", "export"], env)
    assert usage.returncode == 2
    nofile = plexor_cmd(["arbor", "import", str(tmp_path / "nope.json")], env)
    assert nofile.returncode == 2 and "cannot read" in nofile.stderr
