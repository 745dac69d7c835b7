"""What folder-search says of its index is true: a forced re-index right after start reports the rebuild it
does, `partial` only while the index does not cover the folder, and a folder is a virtual environment by
its marker (`pyvenv.cfg`, `conda-meta`), not by its name."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import call, wait_ready

from plexor_folder_search.ignore import IgnoreRules

INSTALLED = ["folder-search"]


@pytest.mark.anyio
async def test_a_forced_reindex_right_after_start_reports_every_file_it_rebuilt(plexor: Any, plexor_config: Any,
                                                                              corpus: Any) -> None:
    plexor_config({"folder-search": {"folders": [str(corpus)]}})  # watched, as by default
    for _ in range(2):  # a fresh index, then a complete one being re-checked at startup
        async with plexor.client(installed=INSTALLED) as client:
            report = (await call(client, "folders_reindex", force=True))["folders"]["corpus"]
            assert report["indexed"] == 10 and report["unchanged"] == 0, report
            await wait_ready(client)


@pytest.mark.anyio
async def test_a_complete_index_answers_in_full_right_after_a_restart(plexor: Any, plexor_config: Any,
                                                                     corpus: Any) -> None:
    plexor_config({"folder-search": {"folders": [str(corpus)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        first = await call(client, "folders_search_content", exact_terms=["saffron"])
        assert first["partial"] is True  # the first scan has not covered the folder yet
        await wait_ready(client)
    async with plexor.client(installed=INSTALLED) as client:  # the first search of the next start
        r = await call(client, "folders_search_content", exact_terms=["saffron"])
        assert r["partial"] is False and "indexing" not in r and r["results"], r
        rebuilt = await client.call_tool("folders_reindex", {"force": True})
        assert not rebuilt.is_error
    # `plexor call` starts a kernel for one call: the complete index answers without "still indexing".
    out = subprocess.run([sys.executable, "-m", "plexor", "call", "folders_search_content", "--json",
                          json.dumps({"exact_terms": ["saffron"]})], env=plexor.environ(INSTALLED),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "still indexing" not in out.stdout and "1 match" in out.stdout, out.stdout


def test_a_virtual_environment_is_known_by_its_marker_not_its_name(tmp_path: Any) -> None:
    for rel in ("Lib/venv", ".venv", "venv", "conda", "env"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "conda" / "conda-meta").mkdir()
    rules = IgnoreRules(tmp_path, [])
    assert rules.dir_reason("Lib/venv", tmp_path / "Lib" / "venv") is None  # CPython's own venv package
    assert rules.dir_reason(".venv", tmp_path / ".venv") is None
    assert rules.dir_reason("venv", tmp_path / "venv") is None
    assert rules.dir_reason("env", tmp_path / "env") == "virtual environment"
    assert rules.dir_reason("conda", tmp_path / "conda") == "virtual environment"


def test_a_forced_rebuild_asked_during_a_scan_waits_for_it_then_rebuilds_everything(tmp_path: Any) -> None:
    """The order that made a forced re-index say "indexed: 0": it is asked while another scan runs (held
    here at its first progress report, before it has read a file), and must not let that scan do the
    rebuild behind its back."""
    import threading

    from plexor import Settings
    from plexor_folder_search.service import FolderService

    root = tmp_path / "notes"
    root.mkdir()
    for i in range(6):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nThe kettle entry {i}.\n", encoding="utf-8")
    svc = FolderService(Settings("folder-search", {"folders": [str(root)], "model": "none", "watch": False},
                                 tmp_path / "data"))
    svc.open()
    try:
        st = next(iter(svc.folders.values()))
        first_report, release = threading.Event(), threading.Event()

        def hold(done: int, total: int, message: str) -> None:
            first_report.set()
            release.wait(30)

        scan = threading.Thread(target=svc.index_folder, args=(st, hold))
        scan.start()
        assert first_report.wait(30)
        reports: list[Any] = []
        forced = threading.Thread(target=lambda: reports.append(svc.index_folder(st, force=True)))
        forced.start()
        forced.join(0.5)
        assert forced.is_alive()  # it waits for the running scan instead of clearing under it
        release.set()
        scan.join(30)
        forced.join(30)
        assert reports[0].indexed == 6 and reports[0].unchanged == 0, reports[0]
        assert st.complete and st.state == "ready"
    finally:
        svc.stop()
