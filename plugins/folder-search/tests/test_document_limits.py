"""Documents built to cost: Office zip bombs, extraction that takes too long, and the limits bounding them.

A DOCX or XLSX of under a megabyte can unpack to hundreds; it is skipped with its reason, quickly and in
little memory, and the rest of the folder is indexed.
"""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

import pytest
from conftest import call, error_text, wait_ready

INSTALLED = ["folder-search"]


def office_bomb(kind: str, unpacked_mb: int) -> bytes:
    """A real DOCX or XLSX whose main part is padded with ``unpacked_mb`` MB of repetitive XML (a zip bomb)."""
    buf = io.BytesIO()
    if kind == "docx":
        import docx

        d = docx.Document()
        d.add_paragraph("seed")
        d.save(buf)
        part, marker = "word/document.xml", b"<w:body>"
        unit = b"<w:p><w:r><w:t>boom boom boom</w:t></w:r></w:p>"
    else:
        import openpyxl

        wb = openpyxl.Workbook()
        wb.active.append(["seed"])
        wb.save(buf)
        part, marker = "xl/worksheets/sheet1.xml", b"<sheetData>"
        unit = b'<row><c t="inlineStr"><is><t>boom</t></is></c></row>'
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename != part:
                zf.writestr(info.filename, data)
                continue
            head, tail = data.split(marker, 1)
            block = unit * (1024 * 1024 // len(unit))
            with zf.open(part, "w", force_zip64=True) as fh:
                fh.write(head + marker)
                for _ in range(unpacked_mb):
                    fh.write(block)
                fh.write(tail)
    return out.getvalue()


@pytest.mark.anyio
async def test_office_zip_bombs_are_skipped_with_their_reason(plexor, plexor_config, tmp_path):
    folder = tmp_path / "office"
    folder.mkdir()
    (folder / "bomb.docx").write_bytes(office_bomb("docx", 64))
    (folder / "bomb.xlsx").write_bytes(office_bomb("xlsx", 64))
    assert (folder / "bomb.docx").stat().st_size < 1_000_000
    (folder / "ok.md").write_text("# Fine\n\nThe puffin nests on cliffs.\n")
    plexor_config({"folder-search": {"folders": [str(folder)], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client, timeout=30))["folders"][0]
        assert info["documents"] == 1 and info["skipped"] == {"too large when unpacked": 2}, info
        text = await error_text(client, "folders_get_document_text", path="bomb.docx")
        assert "too large when unpacked" in text and "max_unpacked_size" in text
        assert (await call(client, "folders_get_server_info"))["settings"]["max_unpacked_size"] == 32 * 1024 * 1024


@pytest.mark.anyio
async def test_extraction_that_takes_too_long_is_skipped_with_its_reason(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "extract_timeout": 1e-9, "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        info = (await wait_ready(client))["folders"][0]
        assert info["skipped"]["took too long to extract"] == 4, info  # docx, xlsx, pptx, pdf (broken.pdf: corrupt)
        text = await error_text(client, "folders_get_document_text", path="report.docx")
        assert "extract_timeout" in text
        assert (await call(client, "folders_search_content", exact_terms=["saffron"]))["results"]


@pytest.mark.anyio
async def test_a_limit_that_is_not_positive_is_refused_with_its_name(plexor, plexor_config, tmp_path):
    plexor_config({"folder-search": {"folders": [str(tmp_path)], "max_unpacked_size": 0}})
    async with plexor.client(installed=INSTALLED) as client:
        health = await call(client, "plexor_health")
        me = next(p for p in health["plugins"] if p["name"] == "folder-search")
        assert me["state"] == "failed" and "max_unpacked_size" in me["error"], me


def test_a_zip_bomb_costs_little_time_and_memory(tmp_path):
    # Measured in a fresh interpreter, so its peak memory is the extraction's own.
    for kind in ("docx", "xlsx"):
        path = tmp_path / f"bomb.{kind}"
        path.write_bytes(office_bomb(kind, 100))
        code = f"""
import resource, time
from plexor_folder_search.extract import Bounded, extract
data = open({str(path)!r}, "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    extract({path.name!r}, data)
    print("EXTRACTED")
except Bounded as exc:
    print("BOUNDED", exc.reason)
print("SECONDS", time.perf_counter() - start)
print("GROWTH_MB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
        assert lines.get("BOUNDED") == "too large when unpacked", out.stdout
        assert float(lines["SECONDS"]) < 2.0 and float(lines["GROWTH_MB"]) < 100, out.stdout
