"""Hostile folders: files swapped for links or FIFOs mid-index, link loops, undecodable names.

The swaps happen at the worst moment on purpose: right after the indexer has listed the folder and
before it reads the files (the real walk runs, then the "attacker" acts, then the real indexing goes on).
Zip bombs and documents that take too long are in test_document_limits.py.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import call, error_text, wait_ready

from plexor_folder_search.indexer import Indexer

INSTALLED = ["folder-search"]
SECRET = "the launch code is zebra-4471\n"


def after_walk(monkeypatch: pytest.MonkeyPatch, attack: Any) -> None:
    """Run ``attack()`` once, between the next walk of a folder and the reading of its files."""
    real = Indexer.walk
    done: list[bool] = []

    def walk(self: Indexer) -> Any:
        result = real(self)
        if not done:
            done.append(True)
            attack()
        return result

    monkeypatch.setattr(Indexer, "walk", walk)


async def server_info(client: Any) -> dict[str, Any]:
    return (await call(client, "folders_get_server_info"))["folders"][0]


@pytest.mark.anyio
async def test_a_file_swapped_for_an_outside_link_is_never_read(plexor, plexor_config, tmp_path, monkeypatch):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("the original note about otters\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    held = tmp_path / "held.txt"
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        (folder / "a.txt").write_text("an edited note about beavers\n")

        def swap() -> None:
            os.rename(folder / "a.txt", held)
            (folder / "a.txt").symlink_to(secret)

        after_walk(monkeypatch, swap)
        r = await client.call_tool("folders_reindex", {})
        assert not r.is_error, r.content[0].text
        assert (await call(client, "folders_search_content", exact_terms=["zebra-4471"]))["results"] == []
        text = await error_text(client, "folders_get_document_text", path="a.txt")
        assert "zebra" not in text and "outside the folder" in text
        # The original comes back with the same size and time: it is read again, and it is what is served.
        os.remove(folder / "a.txt")
        os.rename(held, folder / "a.txt")
        r = await client.call_tool("folders_reindex", {})
        assert not r.is_error, r.content[0].text
        doc = await call(client, "folders_get_document_text", path="a.txt")
        assert doc["text"] == "an edited note about beavers\n"
        assert (await server_info(client))["skipped"] == {}


@pytest.mark.anyio
async def test_the_watcher_never_reads_a_swapped_file_nor_keeps_its_text(plexor, plexor_config, tmp_path, monkeypatch):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("the original note about otters\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    held = tmp_path / "held.txt"
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        real = Indexer._process
        swapped: list[bool] = []

        def process(self: Indexer, work: list[Any], *args: Any, **kw: Any) -> Any:
            # The watcher saw a regular file; it becomes a link before it is read.
            if not swapped and any(w.rel == "a.txt" for w in work):
                swapped.append(True)
                os.rename(folder / "a.txt", held)
                (folder / "a.txt").symlink_to(secret)
            return real(self, work, *args, **kw)

        monkeypatch.setattr(Indexer, "_process", process)
        (folder / "a.txt").write_text("an edited note about beavers\n")
        deadline = time.monotonic() + 5
        while "symlink (not followed)" not in (await server_info(client))["skipped"]:
            assert time.monotonic() < deadline, await server_info(client)
            await anyio.sleep(0.05)
        assert (await call(client, "folders_search_content", exact_terms=["zebra-4471"]))["results"] == []
        assert "zebra" not in await error_text(client, "folders_get_document_text", path="a.txt")
        # The original comes back with the same size and time: the watcher reads it again.
        os.remove(folder / "a.txt")
        os.rename(held, folder / "a.txt")
        deadline = time.monotonic() + 5
        while not (await call(client, "folders_search_content", exact_terms=["beavers"]))["results"]:
            assert time.monotonic() < deadline, await server_info(client)
            await anyio.sleep(0.05)
        doc = await call(client, "folders_get_document_text", path="a.txt")
        assert doc["text"] == "an edited note about beavers\n"
        assert (await call(client, "folders_search_content", exact_terms=["zebra-4471"]))["results"] == []


@pytest.mark.anyio
async def test_a_directory_swapped_for_an_outside_link_is_never_entered(plexor, plexor_config, tmp_path, monkeypatch):
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text(SECRET)
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})

    def swap() -> None:
        shutil.rmtree(folder / "sub")
        (folder / "sub").symlink_to(outside, target_is_directory=True)

    after_walk(monkeypatch, swap)
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert (await call(client, "folders_search_content", exact_terms=["zebra-4471"]))["results"] == []
        assert info["folders"][0]["documents"] == 0
        assert "symlink (not followed)" in info["folders"][0]["skipped"]


@pytest.mark.anyio
async def test_a_directory_swapped_for_a_link_during_the_walk_is_not_listed(plexor, plexor_config, tmp_path,
                                                                            monkeypatch):
    from plexor_folder_search import walk

    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "payroll-2026.txt").write_text(SECRET)
    real = walk.scan_dir

    def scan_dir(root: Path, rel_dir: str) -> Any:
        if rel_dir == "sub" and not (folder / "sub").is_symlink():  # listed as a directory, now a link
            shutil.rmtree(folder / "sub")
            (folder / "sub").symlink_to(outside, target_is_directory=True)
        return real(root, rel_dir)

    monkeypatch.setattr(walk, "scan_dir", scan_dir)
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client))["folders"][0]
        assert info["documents"] == 0 and info["skipped"] == {"symlink (not followed)": 1}, info
        status = await call(client, "folders_explore")
        assert status["skipped"] == {"symlink (not followed)": 1}
    from click.testing import CliRunner

    from plexor.testing import plugin_cli

    out = CliRunner().invoke(plugin_cli(), ["folder-search", "status", "--json"]).output
    assert "payroll" not in out and "sub/" in out, out


@pytest.mark.anyio
async def test_link_loops_and_undecodable_names_do_not_fail_the_folder(plexor, plexor_config, tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nThe heron waits by the weir.\n")
    (folder / "loop").symlink_to(folder / "loop")
    (folder / "ping").symlink_to(folder / "pong")
    (folder / "pong").symlink_to(folder / "ping")
    (folder / "dangling").symlink_to(folder / "nowhere")
    raw = os.fsencode(folder)
    with open(raw + b"/caf\xe9.txt", "wb") as fh:
        fh.write(b"latin-1 name, the heron again\n")
    os.mkdir(raw + b"/d\xff")
    with open(raw + b"/d\xff/inner.txt", "wb") as fh:
        fh.write(b"inside an undecodable directory\n")
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client))["folders"][0]
        assert info["state"] == "ready" and info["documents"] == 1, info
        skipped = info["skipped"]
        assert skipped["symlink loop"] == 3 and skipped["broken symlink"] == 1, skipped
        assert skipped["file name is not valid UTF-8"] == 2, skipped
        hits = (await call(client, "folders_search_content", exact_terms=["heron"]))["results"]
        assert [h["path"] for h in hits] == ["good.md"]
        tree = await call(client, "folders_explore")
        assert tree["skipped"]["file name is not valid UTF-8"] == 2
        for path in ("loop", "ping", str(folder / "loop")):  # Path.resolve() raised RuntimeError on these
            text = await error_text(client, "folders_get_document_text", path=path)
            assert "symlink loop" in text, text
        text = await error_text(client, "folders_search_content", folder=str(folder / "loop"), exact_terms=["x"])
        assert "no folder named" in text
        # Written while watching: the bad name is reported, the good file next to it is indexed.
        with open(raw + b"/new\xfe.txt", "wb") as fh:
            fh.write(b"another bad name\n")
        (folder / "later.md").write_text("# Later\n\nThe kingfisher dives.\n")
        deadline = time.monotonic() + 5
        while not (await call(client, "folders_search_content", exact_terms=["kingfisher"]))["results"]:
            assert time.monotonic() < deadline
            await anyio.sleep(0.05)
        info = await server_info(client)
        assert info["state"] == "ready" and info["skipped"]["file name is not valid UTF-8"] == 3


@pytest.mark.anyio
async def test_a_file_the_index_cannot_take_is_skipped_and_the_rest_indexed(plexor, plexor_config, tmp_path,
                                                                           monkeypatch):
    from plexor_folder_search.store import IndexStore

    folder = tmp_path / "mixed"
    folder.mkdir()
    for name in ("a.md", "bad.md", "c.md"):
        (folder / name).write_text(f"# {name}\n\nthe gannet dives near {name}\n")
    real = IndexStore.insert_file

    def insert_file(self: IndexStore, conn: Any, path: str, *args: Any, **kw: Any) -> Any:
        if path == "bad.md":  # stands for whatever one file could make SQLite refuse
            raise ValueError("the index refused this file")
        return real(self, conn, path, *args, **kw)

    monkeypatch.setattr(IndexStore, "insert_file", insert_file)
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client))["folders"][0]
        assert info["state"] == "ready" and info["documents"] == 2, info
        assert info["skipped"] == {"could not be indexed": 1}, info
        hits = (await call(client, "folders_search_content", exact_terms=["gannet"]))["results"]
        assert sorted(h["path"] for h in hits) == ["a.md", "c.md"]
        assert "the index refused" in await error_text(client, "folders_get_document_text", path="bad.md")


@pytest.mark.anyio
async def test_a_fifo_is_skipped_with_its_reason_and_a_swapped_in_fifo_does_not_hang(
        plexor, plexor_config, tmp_path, monkeypatch):
    folder = tmp_path / "pipes"
    folder.mkdir()
    os.mkfifo(folder / "already.txt")
    (folder / "b.txt").write_text("a plain note about walruses\n")
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client))["folders"][0]
        assert info["documents"] == 1 and info["skipped"] == {"not a regular file": 1}, info
        tree = await call(client, "folders_explore")
        assert tree["skipped"] == {"not a regular file": 1}
        (folder / "b.txt").write_text("an edited note about walruses\n")

        def swap() -> None:
            os.remove(folder / "b.txt")
            os.mkfifo(folder / "b.txt")

        after_walk(monkeypatch, swap)
        try:
            with anyio.fail_after(20):
                r = await client.call_tool("folders_reindex", {})
        finally:
            _unblock(folder / "b.txt")
        assert not r.is_error, r.content[0].text
        info = await server_info(client)
        assert info["state"] == "ready" and info["skipped"] == {"not a regular file": 2}, info
        # Later files are still indexed: the indexer is not stuck.
        os.remove(folder / "b.txt")
        (folder / "c.txt").write_text("a later note about seals\n")
        r = await client.call_tool("folders_reindex", {})
        assert (await call(client, "folders_search_content", exact_terms=["seals"]))["results"]


def _unblock(fifo: Path) -> None:
    """If a reader is stuck opening ``fifo`` (the bug), open its other end so the test can end."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


@pytest.mark.anyio
async def test_skip_records_of_deleted_files_go_with_them(plexor, plexor_config, tmp_path):
    folder = tmp_path / "media"
    (folder / "pics").mkdir(parents=True)
    (folder / "note.md").write_text("# Note\n\ntext\n")
    (folder / "image.png").write_bytes(b"\x89PNG" + bytes(200))
    for i in range(2):
        (folder / "pics" / f"p{i}.png").write_bytes(b"\x89PNG" + bytes(200))
    os.mkfifo(folder / "pipe")
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client))["folders"][0]
        assert info["skipped"] == {"binary file": 3, "not a regular file": 1}, info
        os.remove(folder / "image.png")
        os.remove(folder / "pipe")
        shutil.rmtree(folder / "pics")
        deadline = time.monotonic() + 5
        while (await server_info(client))["skipped"]:
            assert time.monotonic() < deadline, await server_info(client)
            await anyio.sleep(0.05)
        assert (await server_info(client))["documents"] == 1


@pytest.mark.anyio
async def test_arguments_with_unpaired_surrogates_are_refused_with_guidance(plexor, plexor_config, tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nhello\n")
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        for tool, args in [("folders_get_document_text", {"path": "\ud800.txt"}),
                           ("folders_list_documents", {"sub_path": "\udfff"}),
                           ("folders_search_content", {"exact_terms": ["\ud800"]}),
                           ("folders_search_content", {"semantic_concepts": "a \udc80 b"}),
                           ("folders_find_documents", {"query": "\ud800"}),
                           ("folders_search_content", {"folder": "\ud800", "exact_terms": ["x"]})]:
            text = await error_text(client, tool, **args)
            assert "unpaired surrogate" in text and "UnicodeEncodeError" not in text, (tool, text)
        assert (await call(client, "folders_search_content", exact_terms=["hello"]))["results"]


@pytest.mark.anyio
async def test_a_directory_moved_in_and_out_while_watching(plexor, plexor_config, tmp_path):
    folder = tmp_path / "live"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nstays\n")
    outside = tmp_path / "box"
    (outside / "deep").mkdir(parents=True)
    (outside / "one.md").write_text("# One\n\nthe ibis wades\n")
    (outside / "deep" / "two.md").write_text("# Two\n\nthe ibis feeds\n")
    (outside / "deep" / "pic.png").write_bytes(b"\x89PNG" + bytes(100))
    (outside / "deep" / "away").symlink_to(tmp_path)
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        os.rename(outside, folder / "box")
        deadline = time.monotonic() + 5
        while (await server_info(client))["documents"] != 3:
            assert time.monotonic() < deadline, await server_info(client)
            await anyio.sleep(0.05)
        hits = (await call(client, "folders_search_content", exact_terms=["ibis"]))["results"]
        assert sorted(h["path"] for h in hits) == ["box/deep/two.md", "box/one.md"]
        info = await server_info(client)
        assert info["skipped"] == {"binary file": 1, "symlink pointing outside the folder": 1}, info
        os.rename(folder / "box", tmp_path / "box-again")
        deadline = time.monotonic() + 5
        while (info := await server_info(client))["documents"] != 1 or info["skipped"]:
            assert time.monotonic() < deadline, info
            await anyio.sleep(0.05)
