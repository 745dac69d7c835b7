"""Each indexed document as an MCP resource: ``folders://{folder}/{+path}``, the original file.

Text files are read as text, PDFs and office files as blobs with their MIME type. The same rules
as the tools apply: only documents of the configured folders that are in the index, paths
relative to the folder, no ``..``, no symbolic link on the way (the file is opened component by
component with :func:`~plexor_folder_search.safefs.read_inside`).
"""

from __future__ import annotations

import mimetypes
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from plexor import Context, NotFound, PlexorError, embedded_resource

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor_folder_search.service import FolderService

__all__ = ["TEMPLATE", "complete_folder", "complete_path", "document_uri", "mime_type_of", "read_document"]

TEMPLATE = "folders://{folder}/{+path}"
_BLOB_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
_TEXT_TYPES = {"markdown": "text/markdown", "rst": "text/x-rst", "html": "text/html"}
_TEXTUAL_APPS = {"application/json", "application/xml", "application/javascript", "application/x-sh",
                 "application/toml", "application/yaml", "application/x-yaml", "application/sql"}


def document_uri(folder: str, path: str) -> str:
    """The resource URI of the document ``path`` (relative, posix) in ``folder``."""
    return f"folders://{quote(folder, safe='')}/{quote(path, safe='/')}"


def mime_type_of(kind: str, path: str) -> str:
    """The MIME type a document of ``kind`` is served with."""
    if kind in _BLOB_TYPES:
        if path.lower().endswith(".xlsm"):
            return "application/vnd.ms-excel.sheet.macroEnabled.12"
        return _BLOB_TYPES[kind]
    if kind in _TEXT_TYPES:
        return _TEXT_TYPES[kind]
    guess = mimetypes.guess_type(path, strict=False)[0]
    if guess and (guess.startswith("text/") or guess in _TEXTUAL_APPS):
        return guess
    return "text/plain"


def _service(ctx: Context) -> FolderService:
    from plexor_folder_search.service import FolderService

    return ctx.service(FolderService)


def read_document(ctx: Context, folder: str, path: str) -> dict[str, Any]:
    """The original document: text files as text, PDF, DOCX, XLSX and PPTX as blobs with their MIME type.

    Only indexed documents of the configured folders can be read; paths are relative to the folder.
    """
    from plexor_folder_search.extract import Unsupported, decode_text
    from plexor_folder_search.safefs import ReadRefused, read_inside

    service = _service(ctx)
    st = service.folder(folder)
    row, clean = service._file_row(st, path)  # refuses '..', absolute paths elsewhere and links out of the folder
    assert row is not None and st.indexer is not None
    if st.state == "unavailable":
        raise PlexorError(f"the folder {st.name!r} is unreachable now, so {clean!r} cannot be read from it",
                          "Its indexed text is still readable with get_document_text; the folder is checked again "
                          "on every rescan (get_server_info shows when).")
    limit = st.indexer.options.max_file_size
    try:
        data, _stat = read_inside(st.spec.root, clean, limit)
    except ReadRefused as exc:
        raise NotFound(f"{clean!r} cannot be read: {exc.reason}" + (f" ({exc.detail})" if exc.detail else ""),
                       "Only regular files inside the folder are served, never through a symbolic link.") from None
    if len(data) > limit:
        raise PlexorError(f"{clean!r} is larger than max_file_size ({limit} bytes) now",
                          "It will be skipped at its next indexing; read its indexed text with get_document_text.")
    kind = str(row["kind"])
    mime = mime_type_of(kind, clean)
    uri = document_uri(st.name, clean)
    if kind in _BLOB_TYPES:
        return embedded_resource(uri, blob=data, mime_type=mime)
    try:
        text = decode_text(data)
    except Unsupported as exc:
        raise NotFound(f"{clean!r} is no longer text: {exc}", "It is dropped from the index at its next indexing.") from None
    return embedded_resource(uri, text=text, mime_type=mime)


def complete_folder(value: str, ctx: Context) -> list[str]:
    """Folder names starting with what was typed."""
    service = _service(ctx)
    service.wait_open()
    low = (value or "").lower()
    return sorted(n for n in service.folders if n.lower().startswith(low))


def complete_path(value: str, ctx: Context) -> list[str]:
    """Indexed document paths starting with what was typed (at most 101, by path).

    From the folder the client already chose (``ctx.chosen``, the request's ``context.arguments``);
    a client that does not say offers the paths of every folder.
    """
    service = _service(ctx)
    service.wait_open()
    prefix = (value or "").lstrip("/")
    folder = ctx.chosen.get("folder")
    folders = [service.folders[folder]] if folder in service.folders else list(service.folders.values())
    out: set[str] = set()
    for st in folders:
        if st.store is None or st.state == "error":
            continue
        with st.store.reader() as conn:
            rows = conn.execute("SELECT path FROM files WHERE substr(path, 1, ?) = ? ORDER BY path LIMIT 101",
                                (len(prefix), prefix)).fetchall()
        out.update(r[0] for r in rows)
    return sorted(out)[:101]
