"""Reference counting and the sweeper: active → scheduled_delete → archived → (claim) active, and purge."""

from __future__ import annotations

import datetime
import json
import os

import anyio
import pytest
from arbor_testlib import Calls
from click.testing import CliRunner

from plexor_arbor.plugin import Sweeper
from plexor_arbor.store import Store

pytestmark = pytest.mark.anyio


def run_cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``plexor arbor ...`` in-process (from a worker thread: the command runs its own event loop)."""
    from plexor.testing import plugin_cli

    full_env = dict(os.environ)
    full_env.update(env)
    result = CliRunner().invoke(plugin_cli(full_env), ["arbor", *args], env=full_env, catch_exceptions=False)
    return result.exit_code, result.stdout


async def cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    return await anyio.to_thread.run_sync(run_cli, args, env)


async def test_claim_and_release_count_per_owner(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create", owner_id="session-1")
        t = tree["id"]
        claimed = await call.ok("tree_claim", tree_id=t, owner_id="alice", count=2)
        assert claimed["refs"] == {"ref_count": 3, "owners": {"alice": 2, "session-1": 1}}
        assert claimed["previous_state"] == "active"
        text, err = await call.error("tree_release", tree_id=t, owner_id="alice", count=3)
        assert "owner 'alice' holds 2 references" in text and "cannot release 3" in text
        assert err["details"]["held"] == 2
        text, _ = await call.error("tree_release", tree_id=t, owner_id="bob")
        assert "owner 'bob' holds 0 references" in text and '"alice": 2' in text
        released = await call.ok("tree_release", tree_id=t, owner_id="alice")
        assert released["refs"] == {"ref_count": 2, "owners": {"alice": 1, "session-1": 1}}
        assert released["state"] == "active"
        released = await call.ok("tree_release", tree_id=t, owner_id="alice")
        assert released["refs"]["owners"] == {"session-1": 1}


async def test_lifecycle_through_scheduled_and_archived_and_back(plexor, plexor_config, backend):
    plexor_config({"arbor": {"scheduled_window": 0, "archive_window": 3600}})
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        keep = await call.ok("tree_create", metadata={"title": "keep"})
        tree = await call.ok("tree_create", metadata={"title": "drop"})
        t = tree["id"]
        await call.ok("node_create_text", tree_id=t, content="hello", metadata={"role": "user"})

        gone = await call.ok("tree_release", tree_id=t, owner_id="system")
        assert gone["state"] == "scheduled_delete" and gone["refs"] == {"ref_count": 0, "owners": {}}
        assert gone["scheduled_deletion_at"] is not None and gone["archived_at"] is None
        assert [x["id"] for x in (await call.ok("tree_list"))["trees"]] == [keep["id"]]
        assert [x["id"] for x in (await call.ok("tree_list_scheduled"))["trees"]] == [t]
        assert (await call.ok("tree_list_archived"))["trees"] == []
        # Still readable, but it cannot change.
        assert (await call.ok("tree_get", tree_id=t))["state"] == "scheduled_delete"
        text, err = await call.error("node_create_text", tree_id=t, content="more")
        assert err["type"] == "tree_inactive" and "scheduled for deletion" in text and "arbor_tree_claim" in text

        code, out = await cli(["sweep"], backend)
        assert code == 0, out
        assert f"archived {t}" in out and "archived 1 tree(s), purged 0 tree(s)" in out

        archived = await call.ok("tree_list_archived")
        assert [x["id"] for x in archived["trees"]] == [t]
        assert archived["trees"][0]["state"] == "archived" and archived["trees"][0]["archived_at"]
        assert (await call.ok("tree_list_scheduled"))["trees"] == []
        text, err = await call.error("tree_get", tree_id=t)
        assert err["type"] == "tree_inactive" and "arbor_tree_get_archived" in text
        read = await call.ok("tree_get_archived", tree_id=t)
        assert read["tree"]["state"] == "archived"
        assert [n["data"].get("content") for n in read["nodes"]] == ["", "hello"]

        back = await call.ok("tree_claim", tree_id=t, owner_id="alice")
        assert back["previous_state"] == "archived" and back["state"] == "active"
        assert back["archived_at"] is None and back["scheduled_deletion_at"] is None
        node = await call.ok("node_create_text", tree_id=t, content="welcome back")
        assert node["parent"] == read["nodes"][1]["id"]
        assert sorted(x["id"] for x in (await call.ok("tree_list"))["trees"]) == sorted([keep["id"], t])


async def test_a_claim_rescues_a_scheduled_tree(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        await call.ok("tree_release", tree_id=tree["id"], owner_id="system")
        back = await call.ok("tree_claim", tree_id=tree["id"], owner_id="system", count=2)
        assert back["previous_state"] == "scheduled_delete" and back["state"] == "active"
        assert back["refs"] == {"ref_count": 2, "owners": {"system": 2}}


async def test_sweeper_windows_archive_then_purge(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        store = client.kernel.plugin("arbor").handle.service(Store)
        tree = await call.ok("tree_create")
        t = tree["id"]
        await call.ok("tree_release", tree_id=t, owner_id="system")
        scheduled_at = datetime.datetime.fromisoformat(
            (await call.ok("tree_get", tree_id=t))["scheduled_deletion_at"].replace("Z", "+00:00"))
        week, month = 7 * 86400.0, 30 * 86400.0

        def sweep(days: float) -> dict:
            return store.sweep(week, month, now=scheduled_at + datetime.timedelta(days=days))

        assert (await anyio.to_thread.run_sync(sweep, 6.9))["archived"] == []
        assert (await anyio.to_thread.run_sync(sweep, 7.1))["archived"] == [t]
        assert (await call.ok("tree_list_archived"))["trees"][0]["id"] == t
        # archived_at is the sweep's time (7.1 days after scheduling): purged 30 days after that.
        assert (await anyio.to_thread.run_sync(sweep, 37.0))["purged"] == []
        assert (await anyio.to_thread.run_sync(sweep, 37.2))["purged"] == [t]
        text, err = await call.error("tree_get_archived", tree_id=t)
        assert err["type"] == "not_found"


async def test_sweep_cli_purges_with_zero_windows(plexor, plexor_config, backend):
    plexor_config({"arbor": {"scheduled_window": 0, "archive_window": 0}})
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        await call.ok("tree_release", tree_id=tree["id"], owner_id="system")
        code, out = await cli(["sweep", "--json"], backend)
        assert code == 0 and json.loads(out)["archived"] == [tree["id"]]
        code, out = await cli(["sweep", "--json"], backend)
        assert code == 0 and json.loads(out)["purged"] == [tree["id"]]
        text, err = await call.error("tree_get", tree_id=tree["id"])
        assert err["type"] == "not_found"


async def test_background_sweeper_runs_at_the_interval(plexor, plexor_config, backend):
    plexor_config({"arbor": {"scheduled_window": 0, "archive_window": 3600}})
    env = {**backend, "PLEXOR_ARBOR_SWEEP_INTERVAL": "0.1"}
    async with plexor.client(installed=["arbor"], env=env) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        await call.ok("tree_release", tree_id=tree["id"], owner_id="system")
        with anyio.fail_after(10):
            while not (await call.ok("tree_list_archived"))["trees"]:
                await anyio.sleep(0.05)
        sweeper = client.kernel.plugin("arbor").handle.service(Sweeper)
        assert sweeper.runs >= 1
    assert not sweeper._thread.is_alive()  # stopped with the kernel


async def test_bad_settings_fail_the_plugin_naming_the_key(plexor, plexor_config):
    plexor_config({"arbor": {"scheduled_window": -5}})
    async with plexor.client(installed=["arbor"]) as client:
        health = (await client.call_tool("plexor_health", {})).structured_content
        arbor = next(p for p in health["plugins"] if p["name"] == "arbor")
        assert arbor["state"] == "failed" and "scheduled_window" in arbor["error"]
        result = await client.call_tool("arbor_tree_list", {})
        assert result.is_error
