"""Rescan: folders that go away (an unmounted drive), come back or were missing at startup, on a schedule."""

from __future__ import annotations

import os
import shutil
import time

import anyio
import pytest
from conftest import call, wait_ready

INSTALLED = ["folder-search"]
pytestmark = pytest.mark.anyio


async def _until(client, test, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        info = await call(client, "folders_get_server_info")
        folder = info["folders"][0]
        if test(folder):
            return folder
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; the folder is {folder}")
        await anyio.sleep(0.05)


async def _paths(client, word):
    return sorted({r["path"] for r in (await call(client, "folders_search_content", exact_terms=[word]))["results"]})


def _drive(tmp_path):
    root = tmp_path / "drive"
    root.mkdir()
    (root / "keep.md").write_text("# Keep\n\nThe narwhal stays.\n")
    (root / "gone.md").write_text("# Gone\n\nThe narwhal leaves.\n")
    return root


async def test_an_unplugged_folder_keeps_its_index_and_its_changes_are_picked_up_when_back(
        plexor, plexor_config, tmp_path):
    root = _drive(tmp_path)
    away = tmp_path / "unplugged"
    plexor_config({"folder-search": {"folders": [str(root)], "rescan_interval": 0.2}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        assert await _paths(client, "narwhal") == ["gone.md", "keep.md"]
        os.rename(root, away)  # the drive is unmounted
        folder = await _until(client, lambda f: f["state"] == "unavailable")
        assert folder["reachable"] is False and folder["rescan"]["unreachable_since"]
        assert "unreachable" in folder["error"] and "index is kept" in folder["error"]
        assert folder["documents"] == 2
        # Still searchable from the index meanwhile, marked partial; nothing was deleted.
        r = await call(client, "folders_search_content", exact_terms=["narwhal"])
        assert r["partial"] is True and sorted({x["path"] for x in r["results"]}) == ["gone.md", "keep.md"]
        listed = (await call(client, "folders_list_folders"))["folders"][0]
        assert listed["state"] == "unavailable" and listed["reachable"] is False
        await anyio.sleep(0.6)  # several rescans while it is away change nothing
        assert (await call(client, "folders_get_server_info"))["folders"][0]["documents"] == 2
        # Changed elsewhere while unplugged, then plugged back in.
        (away / "gone.md").unlink()
        (away / "new.md").write_text("# New\n\nThe narwhal arrives.\n")
        os.rename(away, root)
        folder = await _until(client, lambda f: f["state"] == "ready")
        assert folder["reachable"] is True and "error" not in folder and folder["rescan"]["checks"] >= 2
        assert await _paths(client, "narwhal") == ["keep.md", "new.md"]
        # Watched again: a live change is followed.
        (root / "live.md").write_text("the walrus\n")
        deadline = time.monotonic() + 5
        while not await _paths(client, "walrus") and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert await _paths(client, "walrus") == ["live.md"]


async def test_a_removed_folder_is_not_emptied_and_a_recreated_one_is_rescanned(plexor, plexor_config, tmp_path):
    root = _drive(tmp_path)
    plexor_config({"folder-search": {"folders": [str(root)], "rescan_interval": 0.2}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        shutil.rmtree(root)
        await _until(client, lambda f: f["state"] == "unavailable")
        await anyio.sleep(0.8)  # the watcher's batch and several rescans
        assert await _paths(client, "narwhal") == ["gone.md", "keep.md"]
        root.mkdir()
        (root / "keep.md").write_text("# Keep\n\nThe narwhal stays.\n")
        await _until(client, lambda f: f["state"] == "ready")
        assert await _paths(client, "narwhal") == ["keep.md"]


async def test_a_folder_missing_at_startup_is_listed_and_indexed_when_it_appears(plexor, plexor_config, tmp_path):
    root = tmp_path / "later"
    plexor_config({"folder-search": {"folders": [{"path": str(root), "name": "later"}], "rescan_interval": 0.2}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        folder = info["folders"][0]
        assert folder["name"] == "later" and folder["state"] == "unavailable" and folder["reachable"] is False
        assert any("not reachable now" in w for w in info["warnings"])
        text = (await client.call_tool("folders_search_content", {"exact_terms": ["okapi"]}))
        assert not text.is_error and text.structured_content["partial"] is True
        root.mkdir()
        (root / "a.md").write_text("the okapi\n")
        await _until(client, lambda f: f["state"] == "ready")
        assert await _paths(client, "okapi") == ["a.md"]


async def test_rescan_off_leaves_an_unreachable_folder_alone(plexor, plexor_config, tmp_path):
    root = tmp_path / "never"
    plexor_config({"folder-search": {"folders": [str(root)], "rescan_interval": 0}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["folders"][0]["state"] == "unavailable" and info["settings"]["rescan_interval"] == 0
        root.mkdir()
        (root / "a.md").write_text("the okapi\n")
        await anyio.sleep(0.5)
        folder = (await call(client, "folders_get_server_info"))["folders"][0]
        assert folder["state"] == "unavailable" and folder["rescan"]["checks"] == 0


def test_status_shows_an_unreachable_folder_and_a_bad_interval_is_refused(plexor, plexor_config, tmp_path):
    root = _drive(tmp_path)
    plexor_config({"folder-search": {"folders": [str(root)]}})
    assert plexor.cli(["folder-search", "index"], installed=INSTALLED).exit_code == 0
    os.rename(root, tmp_path / "elsewhere")
    r = plexor.cli(["folder-search", "status"], installed=INSTALLED)
    assert r.exit_code == 0 and "unreachable" in r.output and "its index is kept" in r.output, r.output
    r = plexor.cli(["folder-search", "index"], installed=INSTALLED)
    assert r.exit_code == 1 and "unreachable" in r.output, r.output
    os.rename(tmp_path / "elsewhere", root)
    r = plexor.cli(["folder-search", "index"], installed=INSTALLED)
    assert r.exit_code == 0 and "0 indexed, 2 unchanged" in r.output, r.output  # nothing was dropped meanwhile
    plexor_config({"folder-search": {"folders": [str(root)], "rescan_interval": -1}})
    r = plexor.cli(["folder-search", "list"], installed=INSTALLED)
    assert r.exit_code == 2 and "rescan_interval = -1" in r.output, r.output


async def test_a_folder_whose_index_could_not_be_opened_is_retried(plexor, plexor_config, plexor_home, tmp_path):
    from plexor_folder_search.folders import FolderSpec

    root = _drive(tmp_path)
    index = plexor_home / "data" / "folder-search" / "indexes" / FolderSpec("drive", root.resolve(), "config").index_name
    index.mkdir(parents=True)  # a directory where the index file goes: SQLite cannot open it
    plexor_config({"folder-search": {"folders": [str(root)], "rescan_interval": 0.2}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["folders"][0]["state"] == "error" and "cannot open the index" in info["folders"][0]["error"]
        await anyio.sleep(0.5)
        assert (await call(client, "folders_get_server_info"))["folders"][0]["rescan"]["checks"] >= 1
        index.rmdir()
        folder = await _until(client, lambda f: f["state"] == "ready")
        assert folder["documents"] == 2 and "error" not in folder and folder["watched"] is True
        assert await _paths(client, "narwhal") == ["gone.md", "keep.md"]


async def test_a_server_started_without_folders_picks_up_one_added_later(plexor, plexor_config, tmp_path):
    root = _drive(tmp_path)
    plexor_config({"folder-search": {"rescan_interval": 0.2}})
    async with plexor.client(installed=INSTALLED) as client:
        listed = await call(client, "folders_list_folders")
        assert listed["folders"] == [] and "next rescan" in listed["notes"][0]
        assert plexor.cli(["folder-search", "add", str(root), "--name", "late"], installed=INSTALLED).exit_code == 0
        deadline = time.monotonic() + 10
        while [(f["name"], f["state"]) for f in (await call(client, "folders_list_folders"))["folders"]] \
                != [("late", "ready")]:
            assert time.monotonic() < deadline
            await anyio.sleep(0.1)
        assert await _paths(client, "narwhal") == ["gone.md", "keep.md"]
        folder = (await call(client, "folders_get_server_info"))["folders"][0]
        assert folder["name"] == "late" and folder["watched"] is True


async def test_an_empty_mount_point_is_not_taken_for_deleted_files(plexor, plexor_config, tmp_path):
    root = _drive(tmp_path)
    plexor_config({"folder-search": {"folders": [{"path": str(root), "watch": False}], "rescan_interval": 0.2}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        # The drive is unmounted: what is left is the empty directory it was mounted on.
        for child in root.iterdir():
            child.unlink()
        folder = await _until(client, lambda f: f["state"] == "unavailable")
        assert "empty" in folder["error"] and folder["documents"] == 2
        assert await _paths(client, "narwhal") == ["gone.md", "keep.md"]
        (root / "keep.md").write_text("# Keep\n\nThe narwhal stays.\n")  # mounted again (one file changed)
        folder = await _until(client, lambda f: f["state"] == "ready")
        assert await _paths(client, "narwhal") == ["keep.md"]
        # Really emptied: a forced re-index empties the index too.
        (root / "keep.md").unlink()
        await _until(client, lambda f: f["state"] == "unavailable")
        r = await client.call_tool("folders_reindex", {"force": True})
        assert not r.is_error
        folder = await _until(client, lambda f: f["state"] == "ready")
        assert folder["documents"] == 0
