"""The app pages the plugins ship are what apps/build.mjs makes from the sources and the npm packages
pinned in apps/package-lock.json (the wheels carry the built pages, so installing needs no npm)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from apps.support import MODULES, REPO, need_browser

PAGES = ["plugins/arbor/src/plexor_arbor/apps/tree.html",
         "plugins/folder-search/src/plexor_folder_search/apps/results.html"]


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["node", str(root / "apps" / "build.mjs"), "--check"], capture_output=True, text=True,
                          timeout=120, cwd=root)


def test_the_committed_pages_equal_a_fresh_build() -> None:
    need_browser()
    done = _check(REPO)
    assert done.returncode == 0, done.stderr


def test_the_check_names_a_stale_page(tmp_path: Path) -> None:
    need_browser()
    (tmp_path / "apps").mkdir()
    shutil.copy(REPO / "apps" / "build.mjs", tmp_path / "apps")
    (tmp_path / "apps" / "node_modules").symlink_to(MODULES)
    for plugin in ("arbor", "folder-search"):
        shutil.copytree(REPO / "plugins" / plugin / "app", tmp_path / "plugins" / plugin / "app")
    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True)
        shutil.copy(REPO / page, tmp_path / page)
    assert _check(tmp_path).returncode == 0
    (tmp_path / PAGES[0]).write_text((REPO / PAGES[0]).read_text(encoding="utf-8").replace("Arbor tree", "A tree"),
                                     encoding="utf-8")
    done = _check(tmp_path)
    assert done.returncode == 1 and f"{PAGES[0]} differs from a fresh build" in done.stderr
