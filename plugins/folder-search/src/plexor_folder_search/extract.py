"""Turning a file into indexable text, with its title and outline.

Plain text, Markdown, reStructuredText and source code are decoded as text;
HTML and DOCX go through the standard library's parsers (DOCX streamed); PDF,
XLSX and PPTX go through pypdfium2, openpyxl and python-pptx, each imported
only when a file of that type is met. Office files are zip archives: their
unpacked size is checked before anything is inflated (:func:`check_archive`). Converted documents are rendered with
Markdown headings (one per page, slide, sheet or styled heading) so the
chunker can follow their structure.
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Any

from plexor_folder_search.defaults import DEFAULTS

__all__ = ["Bounded", "Extracted", "ExtractError", "Limits", "Unsupported", "extract", "kind_of"]

MARKDOWN = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
RST = {".rst", ".rest"}
HTML = {".html", ".htm", ".xhtml"}
TEXT = {".txt", ".text", ".log", ".csv", ".tsv", ".tex", ".org", ".adoc", ".asciidoc", ".textile", ".me", ""}
CODE = {
    ".py", ".pyi", ".pyx", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".kts", ".go", ".rs",
    ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash",
    ".zsh", ".fish", ".ps1", ".sql", ".r", ".m", ".mm", ".lua", ".pl", ".pm", ".hs", ".ml", ".mli", ".ex", ".exs",
    ".erl", ".clj", ".cljs", ".dart", ".vue", ".svelte", ".css", ".scss", ".sass", ".less", ".json", ".jsonc",
    ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".xml", ".proto", ".graphql", ".gradle", ".cmake",
    ".mk", ".bat", ".cmd", ".vim", ".el", ".lisp", ".scm", ".f90", ".jl", ".nim", ".zig", ".v", ".sv", ".vhd",
    ".tf", ".hcl", ".nix", ".groovy", ".dockerfile", ".makefile", ".in", ".ac", ".am", ".d", ".pxd", ".asm", ".s",
}
CODE_NAMES = {"makefile", "dockerfile", "rakefile", "gemfile", "cmakelists.txt", "jenkinsfile", "vagrantfile"}
DOCUMENTS = {".pdf": "pdf", ".docx": "docx", ".xlsx": "xlsx", ".xlsm": "xlsx", ".pptx": "pptx"}
BINARY = {
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tif", ".tiff", ".psd", ".heic", ".svgz",
    ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".zst", ".tar", ".jar", ".war", ".whl", ".egg",
    ".exe", ".dll", ".so", ".dylib", ".a", ".o", ".obj", ".lib", ".class", ".pyc", ".pyo", ".pyd", ".wasm",
    ".mp3", ".mp4", ".wav", ".flac", ".ogg", ".m4a", ".mov", ".avi", ".mkv", ".webm", ".aac",
    ".ttf", ".otf", ".woff", ".woff2", ".eot", ".sqlite", ".sqlite3", ".db", ".bin", ".dat", ".pkl", ".pickle",
    ".npy", ".npz", ".parquet", ".onnx", ".pt", ".safetensors", ".iso", ".dmg", ".img", ".doc", ".xls", ".ppt",
    ".odt", ".ods", ".odp", ".key", ".pages", ".numbers", ".DS_Store",
}


class ExtractError(Exception):
    """The file could not be read or parsed (corrupt, encrypted, unreadable)."""


class Bounded(ExtractError):
    """The document goes past a limit (unpacked size, archive members, time); ``reason`` names which."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    """Bounds on extracting one document (settings ``max_unpacked_size`` and ``extract_timeout``)."""

    max_unpacked_size: int = DEFAULTS["max_unpacked_size"]
    timeout: float = DEFAULTS["extract_timeout"]
    max_members: int = 10_000

    def deadline(self) -> float:
        return time.monotonic() + self.timeout


class _Clock:
    """Checked in the readers' loops, so a document that takes too long is given up, not waited for."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.end = limits.deadline()

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise Bounded("took too long to extract",
                          f"more than {self.limits.timeout:g} s; the limit is extract_timeout = {self.limits.timeout:g}")


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


class Unsupported(Exception):
    """The file is not something we index (binary content, unknown format)."""


@dataclass
class Extracted:
    """A document's indexable text and what we know of its structure."""

    text: str
    kind: str
    title: str | None = None
    outline: list[dict[str, object]] = field(default_factory=list)


def kind_of(name: str) -> str | None:
    """The document kind from a file name, ``None`` for a known binary type, ``"unknown"`` otherwise."""
    p = PurePosixPath(name)
    low = p.name.lower()
    suffix = p.suffix.lower()
    if low in CODE_NAMES:
        return "code"
    if suffix in DOCUMENTS:
        return DOCUMENTS[suffix]
    if suffix in BINARY or low == ".ds_store":
        return None
    if suffix in MARKDOWN:
        return "markdown"
    if suffix in RST:
        return "rst"
    if suffix in HTML:
        return "html"
    if suffix in CODE:
        return "code"
    if suffix in TEXT:
        return "text"
    return "unknown"


def _decode(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise Unsupported("binary content (NUL bytes)")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if bad > max(8, len(text) // 50):
        # Mostly not UTF-8: a legacy 8-bit text, or binary; cp1252 is the common case of the former.
        sample = data[:4096]
        controls = sum(1 for b in sample if b < 9 or 13 < b < 32)
        if controls > len(sample) // 100 + 1:
            raise Unsupported("binary content (not text in any common encoding)")
        return data.decode("cp1252", errors="replace")
    return text


def _md_outline(text: str, style: str) -> list[dict[str, object]]:
    from plexor_folder_search.chunking import _line_info

    lines = text.splitlines()
    _, headings = _line_info(lines, style)
    return [{"level": h[0], "title": h[1], "line": i + 1} for i, h in enumerate(headings) if h is not None][:500]


def _code_outline(text: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    pat = re.compile(r"^(\s{0,4})(?:async\s+)?(?:def|class|function|func|fn|pub\s+fn|struct|interface|trait|enum)\s+([A-Za-z_][\w]*)")
    for i, line in enumerate(text.splitlines()):
        m = pat.match(line)
        if m:
            out.append({"level": 1 if not m.group(1) else 2, "title": m.group(2), "line": i + 1})
            if len(out) >= 500:
                break
    return out


def extract(name: str, data: bytes, kind: str | None = None, limits: Limits | None = None) -> Extracted:
    """Extract text from ``data`` (the bytes of the file called ``name``).

    Raises :class:`Unsupported` for binary content, :class:`Bounded` when a
    document goes past ``limits`` and :class:`ExtractError` when it is corrupt
    or cannot be parsed.
    """
    kind = kind or kind_of(name)
    limits = limits or Limits()
    if kind is None:
        raise Unsupported("binary file type")
    if kind == "pdf":
        return _pdf(data, _Clock(limits))
    if kind in ("docx", "xlsx", "pptx"):
        check_archive(data, limits)
        reader = {"docx": _docx, "xlsx": _xlsx, "pptx": _pptx}[kind]
        return reader(data, _Clock(limits))
    text = _decode(data)
    if kind == "html":
        return _html(text)
    if kind == "unknown":
        kind = "text"
    title: str | None = None
    if kind in ("markdown", "rst"):
        outline = _md_outline(text, kind)
        title = str(outline[0]["title"]) if outline else None
    elif kind == "code":
        outline = _code_outline(text)
    else:
        outline = []
    if title is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        title = first[:120] or None if kind == "text" else None
    return Extracted(text, kind, title, outline)


class _HTMLText(HTMLParser):
    BLOCK = {"p", "div", "br", "li", "tr", "table", "section", "article", "header", "footer", "pre", "blockquote",
             "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "dt", "dd", "hr", "nav", "main", "aside", "figure"}
    SKIP = {"script", "style", "noscript", "template", "svg", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0
        self.title: str | None = None
        self.in_title = False
        self.heading: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in self.SKIP:
            self.skip += 1
        if tag in self.BLOCK:
            self.parts.append("\n\n" if tag not in ("br", "li", "tr") else "\n")
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.heading = int(tag[1])
            self.parts.append("#" * self.heading + " ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        if tag in self.BLOCK:
            self.parts.append("\n\n" if tag not in ("br", "li", "tr") else "\n")
        if self.heading and tag == f"h{self.heading}":
            self.heading = None

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title = (self.title or "") + data.strip()
            return
        if self.skip:
            return
        if self.heading:
            data = " ".join(data.split())
        self.parts.append(data)


def _html(text: str) -> Extracted:
    parser = _HTMLText()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # noqa: BLE001 - html.parser is lenient; anything else is a broken file
        raise ExtractError(f"cannot parse HTML: {exc}") from exc
    body = "".join(parser.parts)
    body = re.sub(r"[ \t]+\n", "\n", body)
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    outline = _md_outline(body, "markdown")
    title = parser.title or (str(outline[0]["title"]) if outline else None)
    return Extracted(body, "html", title, outline)



def _pdf(data: bytes, clock: _Clock) -> Extracted:
    try:
        import pypdfium2 as pdfium
    except ImportError as exc:
        raise ExtractError("reading PDF needs pypdfium2: pip install pypdfium2") from exc
    try:
        pdf = pdfium.PdfDocument(data)
    except Exception as exc:  # noqa: BLE001 - pdfium raises PdfiumError for corrupt/encrypted files
        raise ExtractError(f"cannot open PDF: {exc}") from exc
    parts: list[str] = []
    outline: list[dict[str, object]] = []
    title: str | None = None
    try:
        try:
            meta = pdf.get_metadata_dict()
            title = (meta.get("Title") or "").strip() or None
        except Exception:  # noqa: BLE001 - metadata is optional
            title = None
        line = 1
        for i in range(len(pdf)):
            clock.check()
            page = pdf[i]
            try:
                textpage = page.get_textpage()
                text = textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n")
                textpage.close()
            finally:
                page.close()
            header = f"## Page {i + 1}\n\n"
            outline.append({"level": 2, "title": f"Page {i + 1}", "line": line})
            block = header + text.strip() + "\n\n"
            parts.append(block)
            line += block.count("\n")
    except Bounded:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ExtractError(f"cannot read PDF text: {exc}") from exc
    finally:
        pdf.close()
    return Extracted("".join(parts), "pdf", title, outline)


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"


def _docx(data: bytes, clock: _Clock) -> Extracted:
    """Stream the main part of a DOCX: memory stays at one paragraph or table, time is linear.

    (python-docx builds the whole tree and runs XPath queries per paragraph: about 2.7 s and 11 bytes of
    memory per byte of document XML, measured; a 150 KB file could unpack to minutes of work.)
    """
    import xml.etree.ElementTree as ET

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        main = _rel_target(zf, "_rels/.rels", "/officeDocument") or "word/document.xml"
        folder = main.rsplit("/", 1)[0] + "/" if "/" in main else ""
        styles = _docx_styles(zf, _rel_target(zf, f"{folder}_rels/{main.rsplit('/', 1)[-1]}.rels", "/styles"))
        title = _core_title(zf)
        lines: list[str] = []
        tables: list[list[str]] = []
        body: ET.Element | None = None
        p_depth = tbl_depth = 0
        with zf.open(main) as fh:
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
    except Bounded:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile/XML errors on a corrupt file
        raise ExtractError(f"cannot read DOCX: {exc}") from exc
    for t_index, rows in enumerate(tables, start=1):
        lines += [f"## Table {t_index}", "", *rows, ""]
    text = "\n".join(lines)
    outline = _md_outline(text, "markdown")
    if title is None and outline:
        title = str(outline[0]["title"])
    return Extracted(text, "docx", title, outline)


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


def _rel_target(zf: zipfile.ZipFile, rels: str, type_suffix: str) -> str | None:
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(zf.read(rels))
    except (KeyError, ET.ParseError):
        return None
    base = rels.split("_rels/", 1)[0]
    for rel in root.iter(_REL):
        if rel.get("Type", "").endswith(type_suffix) and rel.get("TargetMode") != "External":
            target = rel.get("Target", "")
            return target.lstrip("/") if target.startswith("/") else base + target
    return None


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


def _xlsx(data: bytes, clock: _Clock, max_rows: int = 20000) -> Extracted:
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
    return Extracted(text, "xlsx", title, _md_outline(text, "markdown"))


def _pptx(data: bytes, clock: _Clock) -> Extracted:
    try:
        import pptx
    except ImportError as exc:
        raise ExtractError("reading PPTX needs python-pptx: pip install python-pptx") from exc
    try:
        prs = pptx.Presentation(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001
        raise ExtractError(f"cannot open PPTX: {exc}") from exc
    lines: list[str] = []
    for i, slide in enumerate(prs.slides, start=1):
        clock.check()
        title_shape = slide.shapes.title
        slide_title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        lines.append(f"## Slide {i}" + (f": {slide_title}" if slide_title else ""))
        lines.append("")
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                for para in shape.text_frame.paragraphs:
                    text = "".join(run.text for run in para.runs).strip()
                    if text:
                        lines.append(text)
            elif getattr(shape, "has_table", False) and shape.has_table:
                for row in shape.table.rows:
                    lines.append(" | ".join(c.text.strip() for c in row.cells))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                lines.append(f"Notes: {notes}")
        lines.append("")
    text = "\n".join(lines)
    title = (prs.core_properties.title or "").strip() or None
    outline = _md_outline(text, "markdown")
    return Extracted(text, "pptx", title, outline)
