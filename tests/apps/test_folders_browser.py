"""The folder-search results view in a real Chromium, through a host built on the ext-apps SDK's
AppBridge, against a real ``plexor serve --transport http``: hits with their document, highlighted
terms and score, paging with the tool, a hit opened in its document (the folders:// resource), and a
hostile document whose text must stay text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from interop.support import http_server, index_folders, server_env

from apps.support import drive, keep_shots, need_browser

HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script> tea'
NOTES = {
    "kettle.md": "# Tea\n\nBoil the kettle, then steep green tea for two minutes.\nPour it slowly.\n",
    "teapot.md": "# Teapots\n\nA teapot keeps tea warm.\n\nWarm the pot with hot water first.\n",
    "evil.md": f"# Notes\n\n{HOSTILE}\n",
    "bikes.md": "# Bicycles\n\nPump the tyres before a long ride.\n",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    need_browser()
    base = tmp_path_factory.mktemp("folders")
    notes = base / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    env = server_env(base / "home", PLEXOR_PLUGINS="folder-search", PLEXOR_FOLDER_SEARCH_FOLDERS=str(notes))
    index_folders(env)  # indexed up front, so the first search already sees every note
    with http_server(env, log=base / "serve.log") as server:
        yield server


def test_results_show_hits_page_and_open_a_hit_in_its_document(served: Any, tmp_path: Path) -> None:
    report = drive(served.url, {"tool": "folders_search_content",
                                "args": {"exact_terms": ["tea"], "limit": 2}, "steps": [
        {"wait": '.hit[data-hit="0"]'},
        {"count": ".hit"},                                    # 0: the first page
        {"text": '.hit[data-hit="0"] mark'},                  # 1: the matched term, highlighted
        {"text": '.hit[data-hit="0"] .score'},                # 2
        {"text": "#summary"},                                 # 3
        {"click": "#more"},                                   # the next page, through the tool
        {"wait": '.hit[data-hit="2"]'},
        {"count": ".hit"},                                    # 4
        {"eval": "document.getElementById('more').hidden"},   # 5: no page after the last
        {"click": '.hit[data-hit="0"] .open'},
        {"wait": ".hit-line"},
        {"text": "#reader h2"},                               # 6
        {"eval": "[...document.querySelectorAll('.hit-line .t')].map(e => e.textContent).join('|')"},  # 7
        {"shot": "folder-search-results"},
    ]}, tmp_path)
    steps = report["steps"]
    assert steps[0] == 2 and steps[1].lower() == "tea" and steps[2].startswith("score ")
    assert steps[3].startswith("2 of 3 passages in 'notes'")
    assert steps[4] == 3 and steps[5] is True
    assert steps[6].endswith(".md · lines 1-" + steps[6].rsplit("-", 1)[1])
    path = steps[6].split(" ·")[0]
    assert "tea" in steps[7].lower() and steps[7].split("|")[0] == NOTES[path].split("\n")[0]
    assert report["outside"] == [] and report["dialogs"] == 0
    keep_shots(tmp_path, "folder-search-results")


def test_a_hostile_document_stays_text(served: Any, tmp_path: Path) -> None:
    report = drive(served.url, {"tool": "folders_find_documents", "args": {"query": "pwned onerror script"}, "steps": [
        {"wait": '.hit[data-hit="0"]'},
        {"text": '.hit[data-hit="0"] .path'},
        {"click": '.hit[data-hit="0"] .open'},
        {"wait": ".row"},
        {"eval": "[...document.querySelectorAll('.row .t')].map(e => e.textContent).join('\\n')"},
        {"eval": "[document.querySelectorAll('img').length, window.pwned ?? null, document.scripts.length]"},
    ]}, tmp_path)
    path, text, (images, pwned, scripts) = report["steps"]
    assert path == "evil.md" and HOSTILE in text
    assert images == 0 and pwned is None and scripts == 1
    assert report["outside"] == [] and report["dialogs"] == 0
