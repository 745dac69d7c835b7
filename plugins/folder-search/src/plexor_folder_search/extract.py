"""Turning a file into indexable text, with its title and outline.

Plain text, Markdown, reStructuredText and source code are decoded as text;
HTML goes through the standard library's parser and PDF through pypdfium2
(imported when a PDF is met). DOCX, XLSX and PPTX are read in
:mod:`plexor_folder_search.office`, checked for their unpacked size before
anything is inflated. Converted documents are rendered with Markdown headings
(one per page, slide, sheet or styled heading) so the chunker can follow their
structure.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import PurePosixPath

from plexor_folder_search.documents import Bounded, Clock, Extracted, ExtractError, Limits, Unsupported, md_outline
from plexor_folder_search.office import read_office

__all__ = ["Bounded", "Extracted", "ExtractError", "Limits", "Unsupported", "decode_text", "extract", "kind_of"]

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


def decode_text(data: bytes) -> str:
    """A text file's bytes as text, decoded the way the indexer decodes them (UTF-8, UTF-16, then cp1252)."""
    return _decode(data)


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
        return _pdf(data, Clock(limits))
    if kind in ("docx", "xlsx", "pptx"):
        return read_office(kind, data, limits)
    text = _decode(data)
    if kind == "html":
        return _html(text)
    if kind == "unknown":
        kind = "text"
    title: str | None = None
    if kind in ("markdown", "rst"):
        outline = md_outline(text, kind)
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
    outline = md_outline(body, "markdown")
    title = parser.title or (str(outline[0]["title"]) if outline else None)
    return Extracted(body, "html", title, outline)



def _pdf(data: bytes, clock: Clock) -> Extracted:
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


