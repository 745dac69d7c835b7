"""folders_list_folders(folder=...) and folders_get_server_info(section=...), through the real kernel."""

from __future__ import annotations

import pytest
from conftest import call, error_text, wait_ready

INSTALLED = ["folder-search"]
pytestmark = pytest.mark.anyio
SECTIONS = ("folders", "model", "search", "settings", "totals", "warnings")


async def test_list_folders_checks_one_folder_by_name_or_path(plexor, plexor_config, corpus, tmp_path):
    missing = tmp_path / "not-plugged-in"
    plexor_config({"folder-search": {"folders": [{"path": str(corpus), "name": "notes"},
                                                 {"path": str(missing), "name": "later"}]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        everything = await call(client, "folders_list_folders")
        assert sorted(f["name"] for f in everything["folders"]) == ["later", "notes"]
        assert (await call(client, "folders_list_folders", folder=None)) == everything  # null: every folder
        notes = await call(client, "folders_list_folders", folder="notes")
        assert [f["name"] for f in notes["folders"]] == ["notes"] and notes["folders"][0]["documents"] > 0
        by_path = await call(client, "folders_list_folders", folder=str(corpus))
        assert [f["name"] for f in by_path["folders"]] == ["notes"]
        # a folder that cannot be searched now is still reported, with why
        later = (await call(client, "folders_list_folders", folder="later"))["folders"]
        assert [(f["name"], f["state"]) for f in later] == [("later", "unavailable")]
        text = await error_text(client, "folders_list_folders", folder="note")
        assert "no folder named 'note'" in text and "Did you mean 'notes'?" in text and "later, notes" in text
        text = await error_text(client, "folders_list_folders", folder=7)
        assert "argument 'folder' must be string" in text


async def test_list_folders_with_none_configured_says_how_to_add_one(plexor, plexor_config):
    plexor_config({"folder-search": {}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        assert (await call(client, "folders_list_folders"))["folders"] == []
        text = await error_text(client, "folders_list_folders", folder="notes")
        assert "no folders are configured" in text and "plexor folder-search add PATH" in text


async def test_get_server_info_answers_one_section(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)]}})
    async with plexor.client(installed=INSTALLED) as client:
        whole = await wait_ready(client)
        assert set(SECTIONS) < set(whole)
        for section in SECTIONS:
            part = await call(client, "folders_get_server_info", section=section)
            assert set(part) == {"plugin", "version", "state", section}, section
            assert part["plugin"] == "folder-search" and part["state"] == "ready"
        model = await call(client, "folders_get_server_info", section="model")
        assert model["model"]["setting"] == whole["model"]["setting"]
        totals = await call(client, "folders_get_server_info", section="totals")
        assert totals["totals"]["documents"] == whole["totals"]["documents"] > 0
        assert set(await call(client, "folders_get_server_info", section=None)) == set(whole)
        text = await error_text(client, "folders_get_server_info", section="index")
        assert "argument 'section'" in text and "settings" in text and "totals" in text
