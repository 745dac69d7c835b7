"""The pictures in the docs are rendered from text sources kept beside them (docs/pictures/*.dot), and the
committed SVG is what its source renders to now (re-render with `bash tests/pictures/render.sh`).

The renderer is Graphviz compiled to WebAssembly (npm @viz-js/viz, pinned in tests/pictures/package-lock.json),
so the SVG is the same on every machine; `tox -e kernel` installs it (tests/pictures/setup.sh)
and set PLEXOR_REQUIRE_PICTURES=1, which turns the skip below into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PICTURES = REPO / "docs" / "pictures"
CACHE = Path(os.environ.get("PLEXOR_PICTURES_CACHE") or REPO / ".cache" / "pictures")
RENDER = CACHE / "render.mjs"


def _renderer() -> Path:
    missing = ("node is not on PATH" if shutil.which("node") is None
               else None if (CACHE / "node_modules" / "@viz-js" / "viz").is_dir() and RENDER.exists()
               else f"the renderer is not installed in {CACHE}")
    if missing:
        why = f"{missing}: run `bash tests/pictures/setup.sh` to install the pinned renderer"
        if os.environ.get("PLEXOR_REQUIRE_PICTURES"):
            pytest.fail(why)
        pytest.skip(why)
    return RENDER


SOURCES = sorted(PICTURES.glob("*.dot"))


def test_there_is_a_picture_of_the_architecture_in_the_docs():
    assert [p.name for p in SOURCES] == ["architecture.dot"]
    assert "](pictures/architecture.svg)" in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "](docs/pictures/architecture.svg)" in (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_the_committed_svg_is_what_its_source_renders_to(source):
    render = _renderer()
    out = subprocess.run(["node", str(render)], input=source.read_bytes(), capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    committed = source.with_suffix(".svg")
    assert committed.exists(), f"{committed.name} is missing: run `bash tests/pictures/render.sh` and commit it"
    assert out.stdout == committed.read_bytes(), (
        f"{committed.relative_to(REPO)} is stale: {source.name} renders differently now. "
        "Run `bash tests/pictures/render.sh` and commit the SVG.")
