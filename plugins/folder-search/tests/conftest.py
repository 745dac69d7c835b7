"""Corpora built by the tests themselves (no network), and helpers to drive the plugin through MCP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

NO_NETWORK_PREAMBLE = r"""
import sys
events = []
def hook(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"):
        events.append((event, repr(args)[:100]))
sys.addaudithook(hook)
"""


def run_offline(code: str, home: Path, timeout: float) -> str:
    """Run ``code`` in a fresh interpreter that records any network attempt; assert there was none.

    ``HOME`` is ``home`` (no model cache to fall back on) and no ``HF_``/``TRANSFORMERS_`` variable
    leaks in. Returns the child's stdout.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env["HOME"] = str(home)
    script = NO_NETWORK_PREAMBLE + code + '\nprint("EVENTS", events)\n'
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "EVENTS []" in out.stdout
    return out.stdout


def tiny_pdf(text_lines: list[str]) -> bytes:
    """A valid one-page PDF with the given lines in Helvetica, xref offsets computed."""
    content = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({t}) Tj T*" for t in text_lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{obj}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def build_corpus(root: Path) -> Path:
    """A small folder with every supported format and every kind of skipped file."""
    import docx
    import openpyxl
    import pptx

    root.mkdir(parents=True, exist_ok=True)
    (root / "docs").mkdir()
    (root / "docs" / "retry.md").write_text(
        "# Retry policy\n\nThe HTTP client retries failed requests with exponential backoff and jitter.\n\n"
        "## Settings\n\nSet max_retries to control how many attempts are made before giving up.\n\n"
        "## Timeouts\n\nEach attempt waits at most read_timeout seconds.\n", encoding="utf-8")
    (root / "docs" / "garden.rst").write_text(
        "Gardening notes\n===============\n\nTomatoes need full sun and regular watering.\n\n"
        "Pruning\n-------\n\nRemove suckers weekly to keep plants productive.\n", encoding="utf-8")
    (root / "docs" / "page.html").write_text(
        "<html><head><title>Volcano facts</title><script>var x = 'hidden';</script></head>"
        "<body><h1>Volcanoes</h1><p>Magma chambers feed eruptions of basaltic lava.</p></body></html>", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "pool.py").write_text(
        "import socket\n\n\nclass ConnectionPool:\n    \"\"\"Keeps sockets open for reuse.\"\"\"\n\n"
        "    def acquire(self, host):\n        return socket.create_connection((host, 80))\n", encoding="utf-8")
    (root / "notes.txt").write_text("Shopping list: oat milk, lentils, saffron.\n", encoding="utf-8")
    d = docx.Document()
    d.add_heading("Quarterly report", level=1)
    d.add_paragraph("Revenue grew thanks to the zeppelin division.")
    d.save(str(root / "report.docx"))
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Inventory"
    ws.append(["item", "count"])
    ws.append(["marzipan", 12])
    wb.save(str(root / "stock.xlsx"))
    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Launch the hovercraft in autumn"
    prs.save(str(root / "deck.pptx"))
    (root / "manual.pdf").write_bytes(tiny_pdf(["Calibrate the spectrometer daily.", "Use the quokka protocol."]))
    # Things that must be skipped, each with its reason.
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    (root / "data.weird").write_bytes(b"abc\x00\x01\x02" * 100)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core] wombatcore = 1\n")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "index.js").write_text("// wombatnode\n")
    (root / "venv").mkdir()
    (root / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "venv" / "lib.py").write_text("# wombatvenv\n")
    (root / ".gitignore").write_text("secret/\n*.log\n")
    (root / "secret").mkdir()
    (root / "secret" / "keys.txt").write_text("wombatsecret\n")
    (root / "debug.log").write_text("wombatlog\n")
    return root


async def call(client: Any, tool: str, **args: Any) -> Any:
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.structured_content


async def error_text(client: Any, tool: str, **args: Any) -> str:
    r = await client.call_tool(tool, args)
    assert r.is_error, r.structured_content
    return r.content[0].text


async def wait_ready(client: Any, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = await call(client, "folders_get_server_info")
        if info["state"] == "ready":
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready after {timeout} s: {json.dumps(info)[:500]}")
        await anyio.sleep(0.05)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return build_corpus(tmp_path / "corpus")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def indexed_service(tmp_path: Path, folder: Path, model: str = "none") -> Any:
    """A FolderService over ``folder`` (no watching), opened and indexed once, for tests of the ranking parts."""
    from plexor import Settings
    from plexor_folder_search.service import FolderService

    settings = Settings("folder-search", {
        "folders": [str(folder)], "model": model, "fusion_weight": 0.4, "max_file_size": 1 << 20, "exclude": [],
        "chunk_size": 1100, "chunk_overlap": 150, "watch": False, "debounce_ms": 300,
    }, tmp_path / "data")
    svc = FolderService(settings)
    svc.open()
    svc.index_folder(next(iter(svc.folders.values())))
    return svc
