"""Per-folder settings: model, include/exclude patterns, size limit and watching, in plexor.toml and `add`."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from conftest import call, wait_ready

INSTALLED = ["folder-search"]


def _folder(tmp_path, name):
    root = tmp_path / name
    (root / "drafts").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nThe okapi lives in the rainforest.\n")
    (root / "notes.txt").write_text("The okapi eats leaves.\n")
    (root / "drafts" / "wip.md").write_text("# WIP\n\nokapi draft\n")
    (root / "big.md").write_text("# Big\n\n" + "okapi " * 400)
    return root


def _info(info, name):
    return next(f for f in info["folders"] if f["name"] == name)


@pytest.mark.anyio
async def test_a_folder_table_overrides_patterns_size_model_and_watching(plexor, plexor_config, tmp_path):
    own = _folder(tmp_path, "own")
    plain = _folder(tmp_path, "plain")
    plexor_config({"folder-search": {"folders": [
        {"path": str(own), "name": "own", "include": ["*.md"], "exclude": ["drafts/"], "max_file_size": 1000,
         "model": "none", "watch": False},
        str(plain),  # the old simple form: every global default
    ], "rescan_interval": 0}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        mine, other = _info(info, "own"), _info(info, "plain")
        assert mine["settings"] == {"model": "none", "include": ["*.md"], "exclude": ["drafts/"],
                                    "max_file_size": 1000, "watch": False}
        assert other["settings"] == {}
        assert mine["model"] is None and other["model"] == info["model"]["name"]
        assert mine["watched"] is False and other["watched"] is True
        assert mine["documents"] == 1 and other["documents"] == 4
        assert mine["skipped"]["not matched by the include setting"] == 1
        assert mine["skipped"]["excluded by the exclude setting"] == 1
        assert mine["skipped"]["too large"] == 1
        r = await call(client, "folders_search_content", folder="own", exact_terms=["okapi"])
        assert [x["path"] for x in r["results"]] == ["guide.md"]
        r = await call(client, "folders_search_content", folder="plain", exact_terms=["okapi"])
        assert sorted({x["path"] for x in r["results"]}) == ["big.md", "drafts/wip.md", "guide.md", "notes.txt"]
        # The watched folder follows a new file; the unwatched one does not (it waits for a rescan).
        (plain / "new.md").write_text("the quagga returns\n")
        (own / "new.md").write_text("the quagga returns\n")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if (await call(client, "folders_search_content", folder="plain", exact_terms=["quagga"]))["results"]:
                break
            await anyio.sleep(0.05)
        assert (await call(client, "folders_search_content", folder="plain", exact_terms=["quagga"]))["results"]
        assert (await call(client, "folders_search_content", folder="own", exact_terms=["quagga"]))["results"] == []


@pytest.mark.anyio
async def test_include_patterns_apply_to_files_the_watcher_sees_in_new_directories(plexor, plexor_config, tmp_path):
    root = _folder(tmp_path, "inc")
    plexor_config({"folder-search": {"folders": [{"path": str(root), "include": ["*.md"]}]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        (root / "new" / "deeper").mkdir(parents=True)
        (root / "new" / "deeper" / "a.md").write_text("the tapir\n")
        (root / "new" / "deeper" / "b.txt").write_text("the tapir\n")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            hits = (await call(client, "folders_search_content", exact_terms=["tapir"]))["results"]
            if hits:
                break
            await anyio.sleep(0.05)
        await anyio.sleep(0.5)
        hits = (await call(client, "folders_search_content", exact_terms=["tapir"]))["results"]
        assert [h["path"] for h in hits] == ["new/deeper/a.md"]


@pytest.mark.anyio
async def test_changing_one_folders_model_re_embeds_only_that_folder(plexor, plexor_config, tmp_path):
    a, b = _folder(tmp_path, "a"), _folder(tmp_path, "b")
    for i in range(40):
        (a / f"extra{i}.md").write_text(f"# Extra {i}\n\nThe pangolin note number {i}.\n")
    plexor_config({"folder-search": {"folders": [{"path": str(a), "model": "none"}, str(b)]}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert _info(info, "a")["model"] is None and _info(info, "b")["vectors"] == _info(info, "b")["chunks"] > 0
        chunks_a = _info(info, "a")["chunks"]
        assert _info(info, "a")["vectors"] == 0
    plexor_config({"folder-search": {"folders": [{"path": str(a), "model": "wordllama"}, str(b)]}})
    async with plexor.client(installed=INSTALLED) as client:
        seen = set()
        deadline = time.monotonic() + 60
        while True:  # answered while it works in the background
            info = await call(client, "folders_get_server_info")
            seen.add((_info(info, "a")["state"], _info(info, "a").get("message")))
            if info["state"] == "ready" or time.monotonic() > deadline:
                break
            await anyio.sleep(0.01)
        a_info, b_info = _info(info, "a"), _info(info, "b")
        assert a_info["model"] == b_info["model"] == info["model"]["name"]
        # Only a's chunks were embedded; b's vectors were kept as they were.
        assert a_info["last_scan"]["embedded"] == chunks_a and a_info["vectors"] == chunks_a
        assert b_info["last_scan"]["embedded"] == 0 and b_info["vectors"] == b_info["chunks"]
        r = await call(client, "folders_search_content", folder="a", semantic_concepts="pangolin note")
        assert r["results"] and r["results"][0]["score_parts"]["semantic"] is not None


@pytest.mark.parametrize(("entry", "expected"), [
    ({"modle": "none"}, ["unknown key 'modle'", "Did you mean 'model'?"]),
    ({"model": "minilmm"}, ["unknown model 'minilmm'", "Did you mean 'minilm'?", "wordllama", "none"]),
    ({"include": ["!"]}, ["include pattern '!'", "not valid"]),
    ({"exclude": "\\"}, ["exclude pattern '\\\\'", "not valid"]),
    ({"max_file_size": -5}, ["max_file_size = -5", "positive"]),
    ({"watch": "yes"}, ["watch = 'yes'", "true or false"]),
])
def test_bad_folder_settings_are_refused_with_guidance(plexor, plexor_config, tmp_path, entry, expected):
    root = _folder(tmp_path, "f")
    plexor_config({"folder-search": {"folders": [{"path": str(root), **entry}]}})
    r = plexor.cli(["folder-search", "list"], installed=INSTALLED)
    assert r.exit_code == 2, r.output  # a configuration to fix
    for text in expected:
        assert text in r.output, (text, r.output)


def test_a_bad_global_pattern_is_refused(plexor, plexor_config, tmp_path):
    plexor_config({"folder-search": {"folders": [str(_folder(tmp_path, "f"))], "exclude": ["ok/", "!"]}})
    r = plexor.cli(["folder-search", "list"], installed=INSTALLED)
    assert r.exit_code == 2 and "the exclude pattern '!' in [folder-search] is not valid" in r.output, r.output


def test_add_and_set_store_a_folders_own_settings(plexor, plexor_config, plexor_home, tmp_path):
    root = _folder(tmp_path, "mine")
    r = plexor.cli(["folder-search", "add", str(root), "--name", "m", "--include", "*.md", "--exclude", "drafts/",
                    "--max-file-size", "1000", "--model", "none", "--no-watch"], installed=INSTALLED)
    assert r.exit_code == 0, r.output
    saved = json.loads((plexor_home / "data" / "folder-search" / "folders.json").read_text())["folders"]
    assert saved == [{"path": str(root), "name": "m", "include": ["*.md"], "exclude": ["drafts/"],
                      "model": "none", "max_file_size": 1000, "watch": False}]
    r = plexor.cli(["folder-search", "index", "m"], installed=INSTALLED)
    assert r.exit_code == 0 and "m: 1 indexed" in r.output, r.output
    r = plexor.cli(["folder-search", "status"], installed=INSTALLED)
    assert 'include = ["*.md"]' in r.output and "watch = false" in r.output, r.output
    # Bad values are refused before anything is stored.
    r = plexor.cli(["folder-search", "set", "m", "--model", "minilmm"], installed=INSTALLED)
    assert r.exit_code == 2 and "minilmm" in r.output and "wordllama" in r.output, r.output
    r = plexor.cli(["folder-search", "set", "m", "--include", "!"], installed=INSTALLED)
    assert r.exit_code == 2 and "not a valid pattern" in r.output, r.output
    r = plexor.cli(["folder-search", "set", "m"], installed=INSTALLED)
    assert r.exit_code == 2 and "nothing to change" in r.output
    r = plexor.cli(["folder-search", "set", "m", "--reset", "include", "--reset", "max_file_size", "--watch"],
                   installed=INSTALLED)
    assert r.exit_code == 0, r.output
    saved = json.loads((plexor_home / "data" / "folder-search" / "folders.json").read_text())["folders"]
    assert saved == [{"path": str(root), "name": "m", "exclude": ["drafts/"], "model": "none", "watch": True}]
    r = plexor.cli(["folder-search", "index", "m"], installed=INSTALLED)
    assert r.exit_code == 0 and "m: 2 indexed, 1 unchanged" in r.output, r.output  # notes.txt and big.md now too


@pytest.mark.anyio
async def test_a_running_server_applies_add_set_and_remove_on_its_next_rescan(plexor, plexor_config, tmp_path):
    a, b = _folder(tmp_path, "a"), _folder(tmp_path, "b")
    for i in range(30):
        (a / f"extra{i}.md").write_text(f"# Extra {i}\n\nThe pangolin note number {i}.\n")
    plexor_config({"folder-search": {"rescan_interval": 0.2}})
    assert plexor.cli(["folder-search", "add", str(a), "--model", "none"], installed=INSTALLED).exit_code == 0
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert _info(info, "a")["model"] is None and _info(info, "a")["vectors"] == 0
        chunks = _info(info, "a")["chunks"]
        # The folder's model changes while the server runs: only it is embedded, in the background.
        assert plexor.cli(["folder-search", "set", "a", "--model", "wordllama"], installed=INSTALLED).exit_code == 0
        assert plexor.cli(["folder-search", "add", str(b), "--include", "*.txt"], installed=INSTALLED).exit_code == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            info = await call(client, "folders_get_server_info")
            names = [f["name"] for f in info["folders"]]
            if names == ["a", "b"] and all(f["state"] == "ready" for f in info["folders"]) \
                    and _info(info, "a")["vectors"] == chunks:
                break
            await anyio.sleep(0.05)
        a_info, b_info = _info(info, "a"), _info(info, "b")
        assert a_info["settings"] == {"model": "wordllama"} and a_info["model"] == info["model"]["name"]
        assert a_info["last_scan"]["embedded"] == chunks and a_info["vectors"] == chunks
        assert a_info["last_scan"]["indexed"] == 0  # its text was kept; only the vectors are new
        assert b_info["settings"] == {"include": ["*.txt"]} and b_info["documents"] == 1
        assert (await call(client, "folders_search_content", folder="b", exact_terms=["okapi"]))["results"][0][
            "path"] == "notes.txt"
        assert plexor.cli(["folder-search", "remove", "b"], installed=INSTALLED).exit_code == 0
        deadline = time.monotonic() + 10
        while [f["name"] for f in (await call(client, "folders_list_folders"))["folders"]] != ["a"]:
            assert time.monotonic() < deadline
            await anyio.sleep(0.05)


def test_the_array_of_tables_form_from_the_readme(plexor, plexor_home, tmp_path):
    papers, notes = _folder(tmp_path, "papers"), _folder(tmp_path, "notes")
    config = plexor_home / "config" / "plexor.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'''
[folder-search]
exclude = ["*.tmp"]

[[folder-search.folders]]
path = "{papers}"
name = "papers"
include = ["*.md"]
exclude = ["drafts/"]
max_file_size = 1000
watch = false

[[folder-search.folders]]
path = "{notes}"
''')
    (notes / "scratch.tmp").write_text("okapi\n")
    r = plexor.cli(["folder-search", "index"], installed=INSTALLED)
    assert r.exit_code == 0, r.output
    assert "papers: 1 indexed" in r.output and "notes: 4 indexed" in r.output, r.output
    r = plexor.cli(["folder-search", "status", "--json"], installed=INSTALLED)
    info = json.loads(r.output)
    assert _info(info, "papers")["settings"] == {"include": ["*.md"], "exclude": ["drafts/"], "max_file_size": 1000,
                                                 "watch": False}
    assert _info(info, "notes")["skipped"] == {"excluded by the exclude setting": 1}
    assert _info(info, "papers")["skipped"]["excluded by the exclude setting"] == 1
