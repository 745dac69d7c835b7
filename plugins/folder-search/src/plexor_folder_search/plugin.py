"""Plexor plugin ``folder-search``: offline hybrid search over the documents in the user's folders.

This module is the entry point; it imports only ``plexor`` and the standard
library. The index, the embedding model, numpy and watchdog are loaded in a
background thread after startup (see :mod:`plexor_folder_search.service`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from plexor import Context, Data, PlexorError, PluginHandle, Progress, Result, hookimpl
from plexor_folder_search.render import render_explore, render_hits

if TYPE_CHECKING:  # pragma: no cover - typing only
    import click

    from plexor import ConfigSpec, Settings, ToolRegistrar
    from plexor_folder_search.service import FolderService

PLEXOR_NAMESPACE = "folders"
PLEXOR_ICON = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCI+PHBhdGggZD0iTTIgNWg3bDIgMmgxMXYxMkgyeiIgZmlsbD0iI2UwYTUyNiIvPjxjaXJjbGUgY3g9IjEzIiBjeT0iMTMiIHI9IjMuNSIgZmlsbD0ibm9uZSIgc3Ryb2tlPSIjZmZmIiBzdHJva2Utd2lkdGg9IjIiLz48cGF0aCBkPSJNMTUuNSAxNS41bDMuNSAzLjUiIHN0cm9rZT0iI2ZmZiIgc3Ryb2tlLXdpZHRoPSIyIi8+PC9zdmc+"  # a folder and a magnifier, embedded (plexor.hints)
NAME = "folder-search"
RO = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}


@hookimpl
def plexor_add_config(config: ConfigSpec) -> None:
    from plexor_folder_search.defaults import declare

    declare(config)


@hookimpl
def plexor_register_tools(register: ToolRegistrar, settings: Settings) -> None:
    from plexor_folder_search.views import APP_URI

    for func in (search_content, find_documents, list_folders, list_documents, explore, get_document_metadata,
                 get_document_text, get_chunks, get_server_info):
        # Hosts that speak MCP Apps show the two searches' hits in the results view.
        shown = func in (search_content, find_documents)
        register(func, annotations=RO, ready_required=False, ui=APP_URI if shown else None)
    # A client may run it as a task (tasks/*): its progress becomes the task's status message.
    register(reindex, annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                                   "openWorldHint": False}, ready_required=False, task="optional")


@hookimpl
def plexor_register_resources(register: Any, settings: Settings) -> None:
    from plexor_folder_search.views import APP_URI, read_app

    register.app(APP_URI, read_app, name="Folder search results", prefers_border=True, blocking=False)


@hookimpl
def plexor_register_resource_templates(register: Any, settings: Settings) -> None:
    from plexor_folder_search.resources import TEMPLATE, complete_folder, complete_path, read_document

    # The original documents (resources.py); answers while indexing, like the tools.
    register(TEMPLATE, read_document, name="folder document", mime_type="text/plain", ready_required=False,
             complete={"folder": complete_folder, "path": complete_path})


@hookimpl
def plexor_register_commands(cli: click.Group, plugin: PluginHandle) -> None:
    from plexor_folder_search.cli import group

    group.context_settings["obj"] = plugin  # commands reach the handle (settings) with @click.pass_obj
    cli.add_command(group)


@hookimpl
def plexor_startup(plugin: PluginHandle) -> None:
    from plexor_folder_search.service import FolderService

    service = FolderService(plugin.settings, log=plugin.log, on_progress=plugin.warming)
    plugin.provide(service, close=service.stop)  # the kernel stops it at shutdown
    service.on_document_changed = lambda folder, rel: plugin.resource_updated(_document_uri(folder, rel))
    service.open_specs()
    _gauges(plugin, service)
    if service.folders:
        plugin.warming(0.0, "opening the folder indexes")
        service.start(on_warm=plugin.warmed)
    else:
        service.start(on_warm=None)


def _document_uri(folder: str, rel: str) -> str:
    from plexor_folder_search.resources import document_uri

    return document_uri(folder, rel)


def _gauges(plugin: PluginHandle, service: FolderService) -> None:
    """Index sizes and the indexing queue as metrics (read only when telemetry collects them)."""

    def count(table: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for st in list(service.folders.values()):
            if st.store is not None and st.state != "error":
                with st.store.reader() as conn:
                    out[st.name] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return out

    def queue() -> dict[str, float]:
        # Changes the watcher saw and has not applied yet, plus what a running scan has still to read.
        waiting = dict(getattr(service._watcher, "pending", None) or {})
        return {st.name: len(waiting.get(st.name, ())) + (max(st.total - st.done, 0) if st.state == "indexing"
                                                           and "files" in (st.message or "") else 0)
                for st in list(service.folders.values())}

    plugin.gauge("documents", "Documents in each folder's index.", lambda: count("files"), labels=["folder"],
                 unit="{document}")
    plugin.gauge("chunks", "Passages (chunks) in each folder's index.", lambda: count("chunks"), labels=["folder"],
                 unit="{chunk}")
    plugin.gauge("queue", "Files waiting to be indexed, per folder.", queue, labels=["folder"], unit="{file}")


@hookimpl
def plexor_error_guidance(exception: BaseException, context: dict[str, Any]) -> str | None:
    import sqlite3

    if isinstance(exception, sqlite3.DatabaseError):
        return ("The folder index could not be read. Run `plexor folder-search index --force` to rebuild it, "
                "or check the disk space under Plexor's data directory.")
    return None


def _service(ctx: Context) -> FolderService:
    from plexor_folder_search.service import FolderService

    return ctx.service(FolderService)


def search_content(
    ctx: Context,
    folder: str | None = None,
    semantic_concepts: str | list[str] | None = None,
    exact_terms: list[str] | None = None,
    limit: int = 10,
    continuation_token: str | None = None,
) -> Result:
    """Search inside the documents of a folder and return the best matching passages (chunks).

    Hybrid search: ``semantic_concepts`` finds passages by meaning (embedding similarity plus BM25 keywords);
    ``exact_terms`` are phrases that must all appear verbatim (case-insensitive) in a passage. Give either
    or both. Each result has the file path, chunk_id (for get_chunks), line range, a snippet with the
    matches marked **like this**, the score and its keyword/semantic parts. Use find_documents instead to
    rank whole documents. While the folder is still being indexed results carry ``partial: true``.

    :param folder: folder name (or its path) from list_folders; may be omitted when only one folder is configured.
    :param semantic_concepts: what to look for, in words (a sentence or key words); a list is joined.
    :param exact_terms: phrases that must appear in each result, e.g. ["max_retries", "connection pool"].
    :param limit: results per page, 1-100.
    :param continuation_token: the token from the previous page, to get the next one (same other arguments).
    """
    concepts = " ".join(semantic_concepts) if isinstance(semantic_concepts, list) else semantic_concepts
    data = _service(ctx).search_content(folder, concepts, list(exact_terms or []), limit, continuation_token)
    return Result(data, render_hits(data))


def find_documents(
    ctx: Context, query: str, folder: str | None = None, limit: int = 20, continuation_token: str | None = None
) -> Result:
    """Rank the documents of a folder by how well they match a query, best first (one entry per document).

    Use it to find which files are about something; then read them with get_document_text or look at the
    passages with search_content. Every page can be fetched with the returned continuation_token.

    :param query: what the documents should be about, in words.
    :param folder: folder name (or its path) from list_folders; may be omitted when only one folder is configured.
    :param limit: documents per page, 1-100.
    :param continuation_token: the token from the previous page, to get the next one (same query).
    """
    data = _service(ctx).find_documents(folder, query, limit, continuation_token)
    return Result(data, render_hits(data, doc_level=True))


def list_folders(ctx: Context, folder: str | None = None) -> dict[str, Any]:
    """List the folders the user made searchable, with their document counts and indexing state.

    Call this first to learn the folder names the other tools take. Folders are chosen by the user
    (``plexor folder-search add PATH``); no tool can add one. Give `folder` to check one folder, e.g.
    whether it has finished indexing or why it cannot be searched.

    :param folder: only this folder, by name or path (as listed); leave it out to list them all.
    """
    service = _service(ctx)
    data = service.list_folders()
    if folder is not None and folder.strip():
        name = _folder_name(service, folder)
        data["folders"] = [f for f in data["folders"] if f["name"] == name]
    return data


def _folder_name(service: FolderService, given: str) -> str:
    """The name of the folder ``given`` names (its name or path), including one that cannot be searched now."""
    from plexor import NotFound
    from plexor_folder_search.folders import plain_text

    if not service.folders:
        raise NotFound("no folders are configured for folder-search",
                       "Ask the user to add one: `plexor folder-search add PATH`; then restart the server.")
    key = plain_text(given.strip(), "folder")
    st = service.folders.get(key) or service._folder_at(key)  # a path, or not found with a did-you-mean
    return st.name


def list_documents(
    ctx: Context,
    folder: str | None = None,
    sub_path: str | None = None,
    recursive: bool = True,
    limit: int = 50,
    continuation_token: str | None = None,
) -> dict[str, Any]:
    """List the indexed documents of a folder (path, type, size, modified time, chunk count, title), by path.

    :param folder: folder name (or its path) from list_folders; may be omitted when only one folder is configured.
    :param sub_path: only documents under this directory (relative to the folder).
    :param recursive: include subdirectories (default true); false lists only the directory's own files.
    :param limit: documents per page, 1-500.
    :param continuation_token: the token from the previous page, to get the next one.
    """
    return _service(ctx).list_documents(folder, sub_path, recursive, limit, continuation_token)


def explore(ctx: Context, folder: str | None = None, sub_path: str | None = None) -> Result:
    """Show a folder's directory tree one level at a time: subdirectories with their document counts and the
    files directly inside, plus how many files were skipped and why. Use it to orient yourself in a folder.

    :param folder: folder name (or its path) from list_folders; may be omitted when only one folder is configured.
    :param sub_path: the directory to show, relative to the folder (default: the top).
    """
    data = _service(ctx).explore(folder, sub_path)
    return Result(data, render_explore(data))


def get_document_metadata(ctx: Context, path: str, folder: str | None = None) -> dict[str, Any]:
    """Describe one document without reading it: type, size, modified time, chunk count, title, headings and
    outline (with line numbers).

    :param path: the document's path relative to the folder (as other tools return it).
    :param folder: folder name (or its path); may be omitted when only one folder is configured.
    """
    return _service(ctx).metadata(folder, path)


def get_document_text(
    ctx: Context, path: str, folder: str | None = None, max_chars: int = 20000, continuation_token: str | None = None
) -> dict[str, Any]:
    """Read a document's text (as indexed: PDF, DOCX, XLSX and PPTX are converted to text), one bounded page
    at a time; follow continuation_token for the rest.

    :param path: the document's path relative to the folder.
    :param folder: folder name (or its path); may be omitted when only one folder is configured.
    :param max_chars: the most characters to return in this page, 100-100000.
    :param continuation_token: the token from the previous page, to read on.
    """
    return _service(ctx).document_text(folder, path, max_chars, continuation_token)


def get_chunks(ctx: Context, path: str, chunk_ids: list[int], folder: str | None = None) -> dict[str, Any]:
    """Fetch whole chunks (passages) of a document by their chunk_id, as returned by search_content, with
    their line ranges and headings. Use it to read around a search hit without loading the whole document.

    :param path: the document's path relative to the folder.
    :param chunk_ids: chunk ids within that document (0 is the first), at most 50.
    :param folder: folder name (or its path); may be omitted when only one folder is configured.
    """
    return _service(ctx).chunks(folder, path, chunk_ids)


ServerInfoSection = Literal["folders", "model", "search", "settings", "totals", "warnings"]


def get_server_info(ctx: Context, section: ServerInfoSection | None = None) -> dict[str, Any]:
    """Report the search service's state: folders with their indexing progress, document/chunk counts, skipped
    files by reason and index size; the embedding model (or why semantic search is off); and the settings.

    :param section: only this part of the report (beside the plugin, version and state): folders, model
        (the embedding model, or why semantic search is off), search (mode and ranking), settings, totals
        or warnings; leave it out for the whole report.
    """
    info = _service(ctx).server_info()
    if section is None:
        return info
    return {key: info[key] for key in ("plugin", "version", "state", section)}


async def reindex(ctx: Context, folder: str | None = None, force: bool = False) -> AsyncIterator[Any]:
    """Re-index a folder now (or every folder), reporting progress. Normally unnecessary: folders are indexed
    at startup and watched for changes. Only changed files are re-read unless force is true.

    :param folder: folder name or path; omit to re-index every folder.
    :param force: forget the folder's index and rebuild it from scratch.
    """
    import queue
    import threading

    import anyio

    service = _service(ctx)
    await anyio.to_thread.run_sync(service.wait_open)
    targets = [service.folder(folder)] if folder else [s for s in service.folders.values() if s.state != "error"]
    if not targets:
        raise PlexorError("there is no folder to index", "The user adds one with `plexor folder-search add PATH`.")
    events: queue.Queue[Any] = queue.Queue()
    reports: dict[str, Any] = {}

    def work() -> None:
        try:
            for st in targets:
                def progress(done: int, total: int, message: str, name: str = st.name) -> None:
                    events.put((name, done, total, message))

                report = service.index_folder(st, progress=progress, force=force)
                reports[st.name] = report.as_dict() if report else {"error": st.error}
        finally:
            events.put(None)

    thread = threading.Thread(target=work, name="folder-search-reindex", daemon=True)
    thread.start()
    while True:
        try:
            item = events.get_nowait()
        except queue.Empty:
            await anyio.sleep(0.05)
            continue
        if item is None:
            break
        name, done, total, message = item
        yield Progress(done, total or None, f"{name}: {message}")
    yield Data({"folders": reports})
