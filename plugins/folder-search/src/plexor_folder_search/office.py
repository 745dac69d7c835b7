"""Office documents (DOCX, XLSX, PPTX): zip archives, checked before anything is inflated.

DOCX and PPTX are streamed with the standard library's XML parser (memory stays
at one paragraph, row or shape); XLSX goes through openpyxl's read-only mode,
imported when a file of that type is met.
Every reader checks the :class:`~plexor_folder_search.documents.Clock` as it goes.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import IO, Any

from plexor_folder_search.documents import Bounded, Clock, Extracted, ExtractError, Limits, md_outline

__all__ = ["check_archive", "read_office"]


def read_office(kind: str, data: bytes, limits: Limits) -> Extracted:
    """The text of a ``docx``, ``xlsx`` or ``pptx`` file, within ``limits``."""
    check_archive(data, limits)
    reader = {"docx": _docx, "xlsx": _xlsx, "pptx": _pptx}[kind]
    return reader(data, Clock(limits))


def check_archive(data: bytes, limits: Limits) -> None:
    """Refuse an Office file (a zip archive) whose members would unpack past the limits.

    ``zipfile`` never returns more than a member's declared size (a member that
    inflates past it fails its CRC check), so summing the declared sizes bounds
    what the document readers can unpack, before anything is inflated.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise ExtractError(f"not a valid Office file (zip archive): {exc}") from exc
    if len(infos) > limits.max_members:
        raise Bounded("too large when unpacked", f"{len(infos)} archive members; at most {limits.max_members} are read")
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_size:
        biggest = max(infos, key=lambda i: i.file_size)
        raise Bounded("too large when unpacked",
                      f"{total} bytes unpacked from {len(data)} ({biggest.filename} alone {biggest.file_size}); "
                      f"the limit is max_unpacked_size = {limits.max_unpacked_size}")


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"


def _docx(data: bytes, clock: Clock) -> Extracted:
    """Stream the main part of a DOCX: memory stays at one paragraph or table, time is linear.

    (python-docx builds the whole tree and runs XPath queries per paragraph: about 2.7 s and 11 bytes of
    memory per byte of document XML, measured; a 150 KB file could unpack to minutes of work.)
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        main = _rel_target(zf, "", "/officeDocument") or "word/document.xml"
        styles = _docx_styles(zf, _rel_target(zf, main, "/styles"))
        title = _core_title(zf)
        with zf.open(main) as fh:
            lines, tables = _docx_body(fh, styles, clock)
    except Bounded:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile/XML errors on a corrupt file
        raise ExtractError(f"cannot read DOCX: {exc}") from exc
    for t_index, rows in enumerate(tables, start=1):
        lines += [f"## Table {t_index}", "", *rows, ""]
    text = "\n".join(lines)
    outline = md_outline(text, "markdown")
    if title is None and outline:
        title = str(outline[0]["title"])
    return Extracted(text, "docx", title, outline)


def _docx_body(fh: IO[bytes], styles: dict[str, str], clock: Clock) -> tuple[list[str], list[list[str]]]:
    """The document's paragraphs as Markdown lines, and its top-level tables' rows (one line per row)."""
    import xml.etree.ElementTree as ET

    lines: list[str] = []
    tables: list[list[str]] = []
    body: ET.Element | None = None
    p_depth = tbl_depth = 0
    for n, (event, el) in enumerate(ET.iterparse(fh, events=("start", "end"))):
        if n % 4096 == 0:
            clock.check()
        tag = el.tag
        if event == "start":
            if tag == _W + "body":
                body = el
            elif tag == _W + "p":
                p_depth += 1
            elif tag == _W + "tbl":
                tbl_depth += 1
                if tbl_depth == 1:
                    tables.append([])
            continue
        if tag == _W + "p":
            p_depth -= 1
            if p_depth or tbl_depth:
                continue
            _docx_paragraph(el, styles, lines)
        elif tag == _W + "tr" and tbl_depth == 1:
            tables[-1].append(" | ".join("\n".join(_ptext(p) for p in tc.iter(_W + "p")).strip()
                                         for tc in el.findall(_W + "tc")))
            el.clear()
            continue
        elif tag == _W + "tbl":
            tbl_depth -= 1
            if tbl_depth:
                continue
        else:
            continue
        if body is not None:
            body.clear()  # what is written out is dropped from the tree
    return lines, tables


def _ptext(p: Any) -> str:
    out: list[str] = []
    for el in p.iter():
        if el.tag == _W + "t":
            out.append(el.text or "")
        elif el.tag == _W + "tab":
            out.append("\t")
        elif el.tag in (_W + "br", _W + "cr"):
            out.append("\n")
    return "".join(out)


def _docx_paragraph(p: Any, styles: dict[str, str], lines: list[str]) -> None:
    text = _ptext(p).strip()
    if not text:
        return
    ps = p.find(f"{_W}pPr/{_W}pStyle")
    style = styles.get(ps.get(_W + "val", "") if ps is not None else "", "").lower()
    m = re.match(r"heading (\d)", style)
    if style == "title":
        lines.append(f"# {text}")
    elif m:
        lines.append("#" * min(6, int(m.group(1)) + 1) + " " + text)
    else:
        lines.append(text)
    lines.append("")


def _rels_of(zf: zipfile.ZipFile, part: str) -> list[tuple[str, str, str]]:
    """``(type, id, part path)`` of the internal relationships of ``part`` (``""``: the package's own)."""
    import posixpath
    import xml.etree.ElementTree as ET

    folder, _, name = part.rpartition("/")
    rels = f"{folder}/_rels/{name}.rels" if folder else f"_rels/{name}.rels"
    try:
        root = ET.fromstring(zf.read(rels))
    except (KeyError, ET.ParseError):
        return []
    out: list[tuple[str, str, str]] = []
    for rel in root.iter(_REL):
        if rel.get("TargetMode") == "External":
            continue
        target = rel.get("Target", "")
        path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
        out.append((rel.get("Type", ""), rel.get("Id", ""), path))
    return out


def _rel_target(zf: zipfile.ZipFile, part: str, type_suffix: str) -> str | None:
    return next((path for kind, _id, path in _rels_of(zf, part) if kind.endswith(type_suffix)), None)


def _docx_styles(zf: zipfile.ZipFile, part: str | None) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(zf.read(part or "word/styles.xml"))
    except (KeyError, ET.ParseError):
        return {}
    out: dict[str, str] = {}
    for st in root.iter(_W + "style"):
        name = st.find(_W + "name")
        out[st.get(_W + "styleId", "")] = name.get(_W + "val", "") if name is not None else ""
    return out


def _core_title(zf: zipfile.ZipFile) -> str | None:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(zf.read("docProps/core.xml"))
    except (KeyError, ET.ParseError):
        return None
    el = root.find("{http://purl.org/dc/elements/1.1/}title")
    return (el.text or "").strip() or None if el is not None else None


def _xlsx(data: bytes, clock: Clock, max_rows: int = 20000) -> Extracted:
    try:
        import openpyxl
    except ImportError as exc:
        raise ExtractError("reading XLSX needs openpyxl: pip install openpyxl") from exc
    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001
        raise ExtractError(f"cannot open XLSX: {exc}") from exc
    lines: list[str] = []
    try:
        for ws in wb.worksheets:
            lines.append(f"## Sheet: {ws.title}")
            lines.append("")
            for r, row in enumerate(ws.iter_rows(values_only=True)):
                clock.check()
                if r >= max_rows:
                    lines.append(f"(more rows not indexed; the first {max_rows} are)")
                    break
                cells = ["" if v is None else str(v) for v in row]
                while cells and not cells[-1]:
                    cells.pop()
                if cells:
                    lines.append("\t".join(cells))
            lines.append("")
        title = (wb.properties.title or "").strip() or None if wb.properties is not None else None
    finally:
        wb.close()
    text = "\n".join(lines)
    return Extracted(text, "xlsx", title, md_outline(text, "markdown"))


_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"


def _pptx(data: bytes, clock: Clock) -> Extracted:
    """Stream each slide of a PPTX: memory stays at one shape, as for DOCX.

    (python-pptx keeps every slide's whole tree: a 30 MB slide took 29 s and 440 MB, measured.)
    """
    import xml.etree.ElementTree as ET

    lines: list[str] = []
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        main = _rel_target(zf, "", "/officeDocument") or "ppt/presentation.xml"
        targets = {rid: path for _t, rid, path in _rels_of(zf, main)}
        ids = [el.get(_R + "id", "") for el in ET.fromstring(zf.read(main)).iter(_P + "sldId")]
        for i, part in enumerate((targets[r] for r in ids if r in targets), start=1):
            clock.check()
            slide_title, body = _slide_text(zf, part, clock, title_types=("title", "ctrTitle"))
            lines += [f"## Slide {i}" + (f": {slide_title}" if slide_title else ""), "", *body]
            notes = _rel_target(zf, part, "/notesSlide")
            if notes:
                # The notes page's own text is in its body placeholder; the rest is the slide's image and number.
                _t, note_lines = _slide_text(zf, notes, clock, title_types=(), only_type="body")
                text = "\n".join(note_lines).strip()
                if text:
                    lines.append(f"Notes: {text}")
            lines.append("")
        title = _core_title(zf)
    except Bounded:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile/XML errors on a corrupt file
        raise ExtractError(f"cannot read PPTX: {exc}") from exc
    text = "\n".join(lines)
    return Extracted(text, "pptx", title, md_outline(text, "markdown"))


def _slide_text(zf: zipfile.ZipFile, part: str, clock: Clock, title_types: tuple[str, ...],
                only_type: str | None = None) -> tuple[str, list[str]]:
    """The title and the other text lines (paragraphs, table rows) of one slide, in shape order."""
    import xml.etree.ElementTree as ET

    title: list[str] = []
    body: list[str] = []
    shape: list[str] = []
    kind: str | None = None  # the placeholder type of the shape being read
    tables = 0  # a table cell's paragraphs are read with their row
    with zf.open(part) as fh:
        for n, (event, el) in enumerate(ET.iterparse(fh, events=("start", "end"))):
            if n % 4096 == 0:
                clock.check()
            tag = el.tag
            if event == "start":
                if tag in (_P + "sp", _P + "graphicFrame"):
                    shape, kind = [], None
                elif tag == _A + "tbl":
                    tables += 1
                continue
            if tag == _P + "ph":
                kind = el.get("type", "body")
            elif tag == _A + "tbl":
                tables -= 1
            elif tag == _A + "p" and not tables:
                text = "".join(t.text or "" for t in el.iter(_A + "t")).strip()
                if text:
                    shape.append(text)
                el.clear()
            elif tag == _A + "tr" and tables == 1:
                shape.append(" | ".join("\n".join("".join(t.text or "" for t in p.iter(_A + "t"))
                                                  for p in tc.iter(_A + "p")).strip()
                                        for tc in el.findall(_A + "tc")))
                el.clear()
            elif tag in (_P + "sp", _P + "graphicFrame"):
                if kind in title_types:
                    title.append(" ".join(shape))
                elif only_type is None or kind == only_type:
                    body += shape
                shape, kind = [], None
                el.clear()
    return " ".join(t for t in title if t), body

