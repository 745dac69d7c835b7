"""Purging one tree now: the arbor_tree_purge tool and `plexor arbor purge`, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os

import anyio
import pytest
from arbor_testlib import Calls
from click.testing import CliRunner

pytestmark = pytest.mark.anyio


def run_cli(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    from plexor.testing import plugin_cli

    full_env = dict(os.environ)
    full_env.update(env)
    result = CliRunner().invoke(plugin_cli(full_env), ["arbor", *args], env=full_env, input=stdin)
    return result.exit_code, result.stdout, result.stderr


async def cli(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    return await anyio.to_thread.run_sync(run_cli, args, env, stdin)


async def _tree(call: Calls, title: str) -> str:
    tree = await call.ok("tree_create", metadata={"title": title})
    await call.ok("node_create_text", tree_id=tree["id"], content="hello", metadata={"role": "user"})
    await call.ok("node_create_text", tree_id=tree["id"], content="hi", metadata={"role": "assistant"})
    return str(tree["id"])


async def test_tool_purges_scheduled_trees_and_refuses_active_ones_without_force(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["arbor_tree_purge"].annotations.destructive_hint is True
        call = Calls(client)
        keep = await _tree(call, "keep")
        t = await _tree(call, "drop")

        text, err = await call.error("tree_purge", tree_id=t)
        assert "is active" in text and "system (1)" in text and "force" in text and "arbor_tree_release" in text
        assert err["details"]["state"] == "active"
        assert (await call.ok("tree_get", tree_id=t))["node_count"] == 3  # untouched

        await call.ok("tree_release", tree_id=t, owner_id="system")
        done = await call.ok("tree_purge", tree_id=t, confirm=True)  # this client cannot be asked: confirm=true
        assert done == {"purged": t, "previous_state": "scheduled_delete", "nodes_deleted": 3}
        text, err = await call.error("tree_get", tree_id=t)
        assert "no tree with id" in text
        assert (await call.ok("tree_list_scheduled"))["trees"] == []
        assert (await call.ok("tree_get", tree_id=keep))["node_count"] == 3  # only that tree went

        forced = await call.ok("tree_purge", tree_id=keep, force=True, confirm=True)
        assert forced["previous_state"] == "active" and forced["nodes_deleted"] == 3
        text, _ = await call.error("tree_purge", tree_id=keep)
        assert "no tree with id" in text


async def test_tool_without_elicitation_needs_confirm_true(plexor, backend):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        t = await _tree(call, "drop")
        await call.ok("tree_release", tree_id=t, owner_id="system")
        text, err = await call.error("tree_purge", tree_id=t)
        assert f"purging tree '{t}' (3 nodes) cannot be undone" in text and "cannot ask the user" in text
        assert "call arbor_tree_purge again with confirm=true" in text
        assert err["details"]["node_count"] == 3
        assert (await call.ok("tree_get", tree_id=t))["node_count"] == 3  # untouched
        text, _ = await call.error("tree_purge", tree_id=t, confirm=False)
        assert "confirm=true" in text
        done = await call.ok("tree_purge", tree_id=t, confirm=True)
        assert done == {"purged": t, "previous_state": "scheduled_delete", "nodes_deleted": 3}


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 rounds, and a mid-call request
async def test_tool_asks_the_user_when_the_client_can_be_asked(plexor, mode):
    from mcp import types

    asked: list[tuple[str, dict]] = []
    answers: list[types.ElicitResult] = []

    async def answer(context, params):
        asked.append((params.message, params.requested_schema))
        return answers.pop(0)

    async with plexor.client(installed=["arbor"], mode=mode, elicitation_callback=answer,
                             env={"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}) as client:
        call = Calls(client)
        t = await _tree(call, "drop")
        active = await _tree(call, "held")

        # An active tree without force is refused before any question.
        text, _ = await call.error("tree_purge", tree_id=active)
        assert "is active" in text and asked == []

        await call.ok("tree_release", tree_id=t, owner_id="system")
        for reply, said in ((types.ElicitResult(action="decline"), "answered 'decline'"),
                            (types.ElicitResult(action="cancel"), "answered 'cancel'"),
                            (types.ElicitResult(action="accept", content={"confirm": False}), "did not confirm it")):
            answers.append(reply)
            text, err = await call.error("tree_purge", tree_id=t, confirm=True)  # confirm=true skips no question
            assert f"tree '{t}' was not purged: the user {said}; nothing was deleted" in text
            assert (await call.ok("tree_get", tree_id=t))["node_count"] == 3
        assert len(asked) == 3
        message, schema = asked[0]
        assert message == f"Purge tree {t} (3 nodes)? This cannot be undone."
        assert schema["properties"]["confirm"]["type"] == "boolean" and schema["required"] == ["confirm"]

        answers.append(types.ElicitResult(action="accept", content={"confirm": True}))
        done = await call.ok("tree_purge", tree_id=t)
        assert done == {"purged": t, "previous_state": "scheduled_delete", "nodes_deleted": 3}
        text, _ = await call.error("tree_get", tree_id=t)
        assert "no tree with id" in text

        answers.append(types.ElicitResult(action="accept", content={"confirm": True}))
        forced = await call.ok("tree_purge", tree_id=active, force=True)  # force keeps its meaning, and asks too
        assert forced["previous_state"] == "active" and asked[-1][0] == f"Purge tree {active} (3 nodes)? This cannot be undone."
        assert len(asked) == 5 and answers == []


async def test_cli_purge_asks_first_and_frees_the_id_for_an_import(plexor, backend, tmp_path):
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        t = await _tree(call, "exported")
        env = plexor.environ(None, backend)
        out = tmp_path / "tree.json"
        code, _, stderr = await cli(["export", t, "-o", str(out)], env)
        assert code == 0, stderr

        # The import error names the real command that frees the id; the command line must change (--new-ids,
        # or purge first): exit 2 by the exit-code rule.
        code, _, stderr = await cli(["import", str(out)], env)
        assert code == 2 and f"plexor arbor purge {t}" in stderr

        # An active tree: refused before any question, with the way out (--force: the command must change, exit 2).
        code, _, stderr = await cli(["purge", t], env, stdin="y\n")
        assert code == 2 and "is active" in stderr and "--force" in stderr and "Purge tree" not in stderr
        await call.ok("tree_release", tree_id=t, owner_id="system")

        # Answering no keeps the tree.
        code, stdout, stderr = await cli(["purge", t], env, stdin="n\n")
        assert code == 1 and f"Purge tree {t} (scheduled_delete, 3 nodes) for good?" in stderr and "Aborted" in stderr
        assert (await call.ok("tree_get", tree_id=t))["state"] == "scheduled_delete"

        code, stdout, stderr = await cli(["purge", t], env, stdin="y\n")
        assert code == 0, stderr
        assert stdout.strip() == f"purged tree {t} (scheduled_delete, 3 nodes)"
        text, _ = await call.error("tree_get", tree_id=t)
        assert "no tree with id" in text

        # The id is free again: the same document imports with its own ids.
        code, stdout, stderr = await cli(["import", str(out)], env)
        assert code == 0 and stdout.startswith(f"imported tree {t} "), stderr
        assert json.loads(out.read_text(encoding="utf-8"))["tree"]["id"] == t

        code, stdout, stderr = await cli(["purge", t, "--force", "--yes"], env)
        assert code == 0 and stdout.startswith(f"purged tree {t} (active, 3 nodes)"), stderr
        code, _, stderr = await cli(["purge", t, "--yes"], env)
        assert code == 1 and "no tree with id" in stderr
