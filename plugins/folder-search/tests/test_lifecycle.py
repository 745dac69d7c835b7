"""Watching, incremental restarts, warm-up with partial results, explicit re-index, CLI, offline model."""

from __future__ import annotations

import os
import time

import anyio
import pytest
from click.testing import CliRunner
from conftest import call, run_offline, wait_ready

INSTALLED = ["folder-search"]


async def _find(client, word, timeout=2.0):
    start = time.monotonic()
    while time.monotonic() - start < timeout + 1.0:
        r = await call(client, "folders_search_content", exact_terms=[word])
        if r["results"]:
            return time.monotonic() - start, r["results"]
        await anyio.sleep(0.02)
    return None, []


@pytest.mark.anyio
async def test_saved_moved_and_deleted_files_are_followed_live(plexor, plexor_config, tmp_path):
    folder = tmp_path / "live"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nnothing special\n")
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        (folder / "fresh.md").write_text("# Fresh\n\nThe narwhal surfaced at dawn.\n")
        took, hits = await _find(client, "narwhal")
        assert took is not None and took < 2.0, took
        assert hits[0]["path"] == "fresh.md"
        # An editor's atomic save: write a temporary file, rename it over the original.
        tmp = folder / ".a.md.swp~"
        tmp.write_text("# A\n\nnow about the axolotl\n")
        os.replace(tmp, folder / "a.md")
        took, hits = await _find(client, "axolotl")
        assert took is not None and took < 2.0 and [h["path"] for h in hits] == ["a.md"]
        assert (await call(client, "folders_search_content", exact_terms=["nothing special"]))["results"] == []
        # A move keeps the content, under the new path.
        (folder / "sub").mkdir()
        os.rename(folder / "fresh.md", folder / "sub" / "moved.md")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            hits = (await call(client, "folders_search_content", exact_terms=["narwhal"]))["results"]
            if [h["path"] for h in hits] == ["sub/moved.md"]:
                break
            await anyio.sleep(0.05)
        assert [h["path"] for h in hits] == ["sub/moved.md"]
        # A burst of writes is one batch, and all of it lands.
        for i in range(200):
            (folder / f"burst{i}.txt").write_text(f"burst file {i} mentions the pangolin\n")
        deadline = time.monotonic() + 10
        total = 0
        while time.monotonic() < deadline:
            total = (await call(client, "folders_search_content", exact_terms=["pangolin"], limit=5))["total"]
            if total == 200:
                break
            await anyio.sleep(0.1)
        assert total == 200
        os.remove(folder / "a.md")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and (await call(client, "folders_search_content", exact_terms=["axolotl"]))["results"]:
            await anyio.sleep(0.05)
        assert (await call(client, "folders_search_content", exact_terms=["axolotl"]))["results"] == []


@pytest.mark.anyio
async def test_restart_reindexes_only_what_changed(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        first = (await wait_ready(client))["folders"][0]["last_scan"]
    assert first["indexed"] == 10
    async with plexor.client(installed=INSTALLED) as client:
        scan = (await wait_ready(client))["folders"][0]["last_scan"]
    assert scan["indexed"] == 0 and scan["unchanged"] == 10 and scan["moved"] == 0 and scan["deleted"] == 0
    # While the server was down: one edit, one move, one deletion, one touch without a change.
    (corpus / "notes.txt").write_text("Shopping list: capybara treats.\n")
    os.rename(corpus / "docs" / "garden.rst", corpus / "garden-moved.rst")
    os.remove(corpus / "docs" / "page.html")
    os.utime(corpus / "src" / "pool.py", ns=(1, 1))
    async with plexor.client(installed=INSTALLED) as client:
        scan = (await wait_ready(client))["folders"][0]["last_scan"]
        assert scan["indexed"] == 1 and scan["moved"] == 1 and scan["deleted"] == 1 and scan["unchanged"] == 7
        hits = (await call(client, "folders_search_content", exact_terms=["suckers"]))["results"]
        assert [h["path"] for h in hits] == ["garden-moved.rst"]
        assert (await call(client, "folders_search_content", exact_terms=["capybara"]))["results"]


@pytest.mark.anyio
async def test_tools_answer_during_warm_up_with_partial_flags(plexor, plexor_config, tmp_path):
    folder = tmp_path / "bulk"
    folder.mkdir()
    para = "Archive entry about harbour logistics and the tide tables of the northern coast. " * 12
    for i in range(1500):
        (folder / f"f{i:04d}.md").write_text(f"# Entry {i}\n\n{para}\n\nkeyword{i}\n")
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        r = await call(client, "folders_search_content", semantic_concepts="harbour tides")
        assert r["partial"] is True and r["indexing"]["state"] in ("pending", "indexing")
        health = await call(client, "plexor_health")
        me = next(p for p in health["plugins"] if p["name"] == "folder-search")
        assert me["state"] == "starting" and me["progress"] is not None
        await wait_ready(client, timeout=120)
        r = await call(client, "folders_search_content", semantic_concepts="harbour tides", limit=3)
        assert r["partial"] is False and "indexing" not in r and r["total"] > 0
        health = await call(client, "plexor_health")
        assert next(p for p in health["plugins"] if p["name"] == "folder-search")["state"] == "ready"


@pytest.mark.anyio
async def test_explicit_reindex_sends_progress(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        seen: list = []

        async def on_progress(p, total, message):
            seen.append((p, total, message))

        r = await client.call_tool("folders_reindex", {"force": True}, progress_callback=on_progress)
        assert not r.is_error, r.content[0].text
        report = r.structured_content["folders"]["corpus"]
        assert report["indexed"] == 10
        assert seen and seen[-1][0] == seen[-1][1] >= 10 and "corpus" in seen[-1][2]
        r = await client.call_tool("folders_reindex", {})
        assert r.structured_content["folders"]["corpus"]["indexed"] == 0


def test_cli_add_index_status_search_remove(plexor_home, tmp_path, corpus):
    from plexor.testing import plugin_cli

    root = plugin_cli()
    runner = CliRunner()
    r = runner.invoke(root, ["folder-search", "add", str(corpus), "--name", "mine"])
    assert r.exit_code == 0, r.output
    assert (plexor_home / "data" / "folder-search" / "folders.json").exists()
    before = (plexor_home / "data" / "folder-search" / "folders.json").read_text()
    r = runner.invoke(root, ["folder-search", "add", str(corpus)])  # again: idempotent, a success
    assert r.exit_code == 0 and "is already added, as 'mine'" in r.output, r.output
    r = runner.invoke(root, ["folder-search", "add", str(corpus), "--name", "mine"])  # the same settings: fine too
    assert r.exit_code == 0 and "is already added" in r.output, r.output
    r = runner.invoke(root, ["folder-search", "add", str(corpus), "--max-file-size", "123", "--no-watch"])
    assert r.exit_code == 2, r.output  # other settings: a usage error pointing at `set`
    assert "with other settings (max_file_size=null, watch=null)" in r.output
    assert "use `plexor folder-search set mine` with the options" in r.output
    r = runner.invoke(root, ["folder-search", "add", str(corpus), "--name", "other"])
    assert r.exit_code == 2 and "named 'mine'" in r.output and "cannot be renamed" in r.output, r.output
    assert (plexor_home / "data" / "folder-search" / "folders.json").read_text() == before  # nothing was written
    r = runner.invoke(root, ["folder-search", "index", "mine"])
    assert r.exit_code == 0, r.output
    assert "mine: 10 indexed" in r.output
    r = runner.invoke(root, ["folder-search", "index"])
    assert "0 indexed, 10 unchanged" in r.output
    r = runner.invoke(root, ["folder-search", "status"])
    assert r.exit_code == 0 and "10 documents" in r.output and "ignored by .gitignore" in r.output
    r = runner.invoke(root, ["folder-search", "search", "retry backoff"])
    assert r.exit_code == 0 and "docs/retry.md" in r.output
    r = runner.invoke(root, ["folder-search", "search", "--exact", "zeppelin", "--json"])
    assert '"report.docx"' in r.output
    r = runner.invoke(root, ["folder-search", "list"])
    assert "mine" in r.output
    r = runner.invoke(root, ["folder-search", "search"])
    assert r.exit_code == 2
    r = runner.invoke(root, ["folder-search", "remove", "mine"])
    assert r.exit_code == 0
    r = runner.invoke(root, ["folder-search", "list"])
    assert "No folders" in r.output
    assert not list((plexor_home / "data" / "folder-search" / "indexes").glob("mine-*.sqlite3"))


@pytest.mark.anyio
async def test_cli_added_folder_is_served(plexor, plexor_home, plexor_config, corpus):
    from plexor.testing import plugin_cli

    plexor_config({"folder-search": {}})
    root = plugin_cli()
    assert CliRunner().invoke(root, ["folder-search", "add", str(corpus), "--name", "cli"]).exit_code == 0
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        folders = await call(client, "folders_list_folders")
        assert [(f["name"], f["source"]) for f in folders["folders"]] == [("cli", "cli")]


def test_model_loads_offline_without_touching_the_network(tmp_path):
    run_offline(r"""
from plexor_folder_search.embed import load_embedder
e = load_embedder("wordllama")
v = e.embed(["offline embeddings", "a second text"])
assert v.shape == (2, 256), v.shape
assert abs(float((v[0] ** 2).sum()) - 1.0) < 1e-4
""", tmp_path, timeout=120)


@pytest.mark.anyio
async def test_two_thousand_files_written_at_once_are_one_batch(plexor, plexor_config, tmp_path):
    folder = tmp_path / "burst"
    folder.mkdir()
    (folder / "start.md").write_text("# Start\n\nthe folder before the burst\n")
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        before = (await wait_ready(client))["folders"][0]
        assert before["documents"] == 1 and before["live_updates"]["batches"] == 0
        started = time.monotonic()
        for i in range(2000):
            (folder / f"f{i:04d}.txt").write_text(f"burst note {i}: the quokka count is marker{i:04d}\n")
        written = time.monotonic() - started
        deadline = time.monotonic() + 60
        while True:
            info = (await call(client, "folders_get_server_info"))["folders"][0]
            if info["documents"] == 2001 and info["vectors"] == info["chunks"]:
                break
            assert time.monotonic() < deadline, info
            await anyio.sleep(0.2)
        live = info["live_updates"]
        # Coalesced: every path arrived, in one batch (a second one only if writing outlasted the longest wait).
        assert live["paths"] >= 2000
        assert live["batches"] == 1 or (written > 1.0 and live["batches"] <= 3), (live, written)
        if live["batches"] == 1:
            assert live["last_batch"]["indexed"] == 2000 and live["last_batch"]["paths"] == 2000
        for i in (0, 1234, 1999):
            r = await call(client, "folders_search_content", exact_terms=[f"marker{i:04d}"])
            assert [x["path"] for x in r["results"]] == [f"f{i:04d}.txt"]
        r = await call(client, "folders_search_content", semantic_concepts="quokka count", limit=100)
        assert r["total"] == 1000 and r["has_more"]  # ranked results stop at 1,000, as documented
