"""The folder-search service: open indexes, warm them up in the background, watch, answer queries.

The read side (search, list, read) is in :mod:`plexor_folder_search.queries`, what the service
reports of itself (the folder list, status) in :mod:`plexor_folder_search.reports`, watching in
:mod:`plexor_folder_search.watcher`.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from plexor_folder_search.defaults import MODELS, FolderSettings
from plexor_folder_search.embed import Embedder
from plexor_folder_search.extract import Limits
from plexor_folder_search.folders import FolderSpec, load_folders
from plexor_folder_search.indexer import FolderUnreachable, Indexer, IndexOptions, ScanReport
from plexor_folder_search.queries import FolderQueries
from plexor_folder_search.reports import FolderReports
from plexor_folder_search.search import DEFAULT_WEIGHT, SearchEngine
from plexor_folder_search.state import FolderState, Log, StdLog
from plexor_folder_search.store import IndexStore, SchemaError, VectorIndex
from plexor_folder_search.watcher import Watcher

COMPLETE = "complete"  # index meta key: "1" once a full scan covered the folder, "0" after clear()

__all__ = ["FolderService", "FolderState"]


def _options(config: FolderSettings, spec: FolderSpec | None = None) -> IndexOptions:
    """The indexing options of one folder: the global settings with the folder's own overrides."""
    size = spec.max_file_size if spec is not None and spec.max_file_size is not None else config.max_file_size
    include = list(spec.include) if spec is not None and spec.include else list(config.include)
    return IndexOptions(max_file_size=size, chunk_size=config.chunk_size,
                        chunk_overlap=config.chunk_overlap,
                        exclude=list(config.exclude) + (list(spec.exclude) if spec is not None else []),
                        limits=Limits(max_unpacked_size=config.max_unpacked_size, timeout=config.extract_timeout),
                        include=include or None)


class FolderService(FolderQueries, FolderReports):
    """Everything the tools and the CLI use; one per kernel (or per CLI command)."""

    def __init__(self, settings: Mapping[str, Any], *, log: Log | None = None,
                 on_progress: Callable[[float, str], None] | None = None) -> None:
        self.config = FolderSettings.read(settings)
        self.data_dir = self.config.data_dir
        self.index_dir = self.data_dir / "indexes"
        self.log: Log = log or StdLog()
        self.on_progress = on_progress
        self.warnings: list[str] = []
        self.model_name = self.config.model
        # None: the model's own weight (tuned per model on SciFact train), known once the model is loaded.
        self._weight_setting = self.config.fusion_weight
        self.weight = float(self._weight_setting) if self._weight_setting is not None else DEFAULT_WEIGHT
        self.embedder: Embedder | None = None
        self.embedder_error: tuple[str, str] | None = None
        self.folders: dict[str, FolderState] = {}
        self._stop = threading.Event()
        self._opened = threading.Event()
        self._want_watch = False
        self._on_warm: Callable[[], None] | None = None
        self.specs: list[FolderSpec] = []
        self._thread: threading.Thread | None = None
        self._watcher: Watcher | None = None
        self._rescanner: Any = None
        self.folders_seen: Any = None
        self.retired: list[FolderState] = []  # replaced by a settings change; closed at stop
        #: Called with (folder name, relative path) when a document may have changed (resource_updated).
        self.on_document_changed: Callable[[str, str], None] | None = None
        self._cache: collections.OrderedDict[str, tuple[Any, Any]] = collections.OrderedDict()
        self._cache_lock = threading.Lock()
        self.started_at = time.time()
        self.warm = False

    # ------------------------------------------------------------------ setup
    def open(self) -> FolderService:
        """Read the folder list and open every index (loads the embedding model)."""
        self.open_specs()
        self.open_indexes()
        return self

    def open_as_is(self) -> FolderService:
        """Open every index for a one-off command (the CLI): no warm-up, no watching.

        Searches read the index as it stands; :meth:`index_folder` brings a folder up to date.
        """
        self.open()
        for st in self.folders.values():
            if st.state == "pending":
                self._prepare_vectors(st)
                st.state, st.initial_done = "ready", True
        return self

    def open_specs(self) -> None:
        """Cheap: the folder list only (startup must not wait for models or indexes)."""
        from plexor_folder_search.rescan import cli_folders_signature

        self.folders_seen = cli_folders_signature(self.data_dir)  # the rescan applies later `add`/`set`/`remove`
        self.specs = load_folders(list(self.config.folders), self.data_dir, self.warnings, MODELS)
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

    def _embedder_for(self, spec: FolderSpec) -> Embedder | None:
        """The folder's own model (its ``model`` setting), or the plugin's."""
        if spec.model is None or spec.model == self.model_name:
            return self.embedder
        from plexor_folder_search.embed import load_embedder

        try:
            return load_embedder(spec.model)
        except Exception as exc:  # noqa: BLE001 - that folder falls back to keyword search, the others go on
            self.warnings.append(f"folder {spec.name!r}: the model {spec.model!r} is unavailable ({exc}); "
                                 "its search is keyword-only")
            self.log.warning("folder_embedder_unavailable", folder=spec.name, model=spec.model, error=str(exc))
            return None

    def watches(self, spec: FolderSpec) -> bool:
        """Whether the folder is watched for changes (its ``watch`` setting, else the plugin's)."""
        return bool(self._want_watch) and (spec.watch if spec.watch is not None else self.config.watch)

    def _open_folder(self, spec: FolderSpec) -> FolderState:
        st = FolderState(spec)
        try:
            st.store = IndexStore(self.index_dir / spec.index_name)
        except (SchemaError, OSError, Exception) as exc:  # noqa: BLE001
            st.state, st.error = "error", f"cannot open the index: {exc}"
            self.log.error("index_open_failed", folder=spec.name, error=str(exc))
            return st
        embedder = self._embedder_for(spec)
        dim = embedder.dim if embedder is not None else 0
        st.vectors = VectorIndex(dim, getattr(embedder, "coarse_dims", None)) if embedder is not None else None
        st.complete = st.store.get_meta(COMPLETE) == "1"
        st.indexer = Indexer(spec.root, st.store, st.vectors, embedder, _options(self.config, spec),
                             private=[self.data_dir.resolve()] if self.data_dir.exists() else [self.data_dir])
        weight = self.weight if embedder is self.embedder or self._weight_setting is not None else float(
            getattr(embedder, "fusion_weight", DEFAULT_WEIGHT))
        st.engine = SearchEngine(st.store, st.vectors, embedder, weight)
        return st

    def _prepare_vectors(self, st: FolderState) -> None:
        """Load stored vectors; if they came from another model, drop them so they are re-embedded."""
        embedder = st.indexer.embedder if st.indexer is not None else None
        if st.store is None or embedder is None or st.vectors is None:
            return
        model = st.store.get_meta("embedder")
        if model != embedder.name:
            # This folder's model changed: only its own chunks are embedded again (embed_missing, with progress).
            with st.store.writing() as conn:
                if model is not None:
                    conn.execute("UPDATE chunks SET vector = NULL WHERE vector IS NOT NULL")
                    self.log.info("folder_model_changed", folder=st.name, old=model, new=embedder.name)
                st.store.set_meta(conn, "embedder", embedder.name)
        st.vectors.load_store(st.store)  # a large index is streamed into an IVF index (vectors.py)

    # ------------------------------------------------------------------ warm-up
    def start(self, *, watch: bool | None = None, on_warm: Callable[[], None] | None = None) -> None:
        """In a background thread: open the indexes, start watching, then scan every folder."""
        self._want_watch = True if watch is None else watch  # each folder's watch setting decides (watches())
        self._on_warm = on_warm
        self._thread = threading.Thread(target=self._warm, name="folder-search-warmup", daemon=True)
        self._thread.start()

    def _start_watching(self) -> None:
        if any(self.watches(st.spec) for st in self.folders.values()):
            try:
                self._watcher = Watcher(self, self.config.debounce_ms / 1000.0)
                self._watcher.start()
            except Exception as exc:  # noqa: BLE001 - no inotify etc.: search still works, just not live
                self._watcher = None
                self.warnings.append(f"watching is off: {exc}")
                self.log.warning("watch_failed", error=str(exc))

    def _report(self) -> None:
        if self.on_progress is None:
            return
        states = [s for s in self.folders.values() if s.state not in ("error", "unavailable")]
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
            from plexor_folder_search.rescan import Rescanner

            if self.config.rescan_interval > 0 and not self._stop.is_set():
                self._rescanner = Rescanner(self, self.config.rescan_interval)
                self._rescanner.start()
            threading.Thread(target=self._prepare_keywords, name="folder-search-keywords", daemon=True).start()
        except Exception as exc:  # noqa: BLE001
            self.log.error("warmup_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if self._on_warm is not None and not self._stop.is_set():
                try:
                    self._on_warm()
                except Exception:  # noqa: BLE001
                    pass

    def _prepare_keywords(self) -> None:
        """A large index's common words get their impact lists (keywords.py) before queries need them."""
        for st in list(self.folders.values()):
            if st.engine is None or st.state != "ready" or self._stop.is_set():
                continue
            try:
                done = st.engine.keywords.prepare(self._stop)
                if done:
                    self.log.info("keywords_prepared", folder=st.name, words=done)
            except Exception as exc:  # noqa: BLE001 - queries then compute the lists they need themselves
                if not self._stop.is_set():  # (at shutdown the index closes under it)
                    self.log.warning("keywords_prepare_failed", folder=st.name,
                                     error=f"{type(exc).__name__}: {exc}")

    def clear(self, st: FolderState) -> None:
        """Forget everything indexed for ``st`` (a forced full re-index follows)."""
        if st.store is None or st.indexer is None:
            return
        with st.indexer.lock, st.store.writing() as conn:
            conn.execute("INSERT INTO chunk_fts(chunk_fts) VALUES('delete-all')")
            for table in ("documents", "chunks", "files", "skipped"):
                conn.execute(f"DELETE FROM {table}")
            st.store.set_meta(conn, COMPLETE, "0")
        st.complete = False
        if st.engine is not None:
            st.engine.keywords.forget()
        if st.vectors is not None:
            st.vectors.clear()

    def index_folder(self, st: FolderState, progress: Callable[[int, int, str], None] | None = None,
                     force: bool = False) -> ScanReport | None:
        """A full scan of one folder (also the explicit re-index); updates ``st``'s progress.

        With ``force`` the index is forgotten first. One full scan runs at a time per folder, so a
        forced rebuild asked for during the startup scan waits for it and then rebuilds: its report
        counts every file it re-read (had the startup scan slipped in between, it would say "indexed: 0").
        """
        if st.indexer is None:
            return None
        with st.scan_lock:
            if force:
                self.clear(st)
            return self._scan_folder(st, progress)

    def _scan_folder(self, st: FolderState, progress: Callable[[int, int, str], None] | None) -> ScanReport | None:
        assert st.indexer is not None and st.store is not None
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

            st.indexer.refresh_vectors(cb, self._stop)  # vectors made from an older embedding text (batches.py)
            report = st.indexer.scan(cb, self._stop)
            st.message = "embedding chunks"
            embedded = st.indexer.embed_missing(cb, self._stop)  # all of them after a change of this folder's model
            st.last_scan = {**report.as_dict(), "embedded": embedded}
            st.last_update = time.time()
            st.state = "ready" if not self._stop.is_set() else "pending"
            if not self._stop.is_set() and not st.complete:
                with st.store.writing() as conn:
                    st.store.set_meta(conn, COMPLETE, "1")
                st.complete = True
            st.initial_done = True
            st.message = None
            st.error = None
            st.unreachable_since = None
            self.log.info("folder_indexed", folder=st.name, **report.as_dict())
            self._report()
            return report
        except FolderUnreachable as exc:
            self.mark_unreachable(st, str(exc))
            return None
        except Exception as exc:  # noqa: BLE001 - one folder's failure must not stop the others
            st.state, st.error = "error", f"{type(exc).__name__}: {exc}"
            self.log.error("folder_index_failed", folder=st.name, error=st.error)
            self._report()
            return None

    def mark_unreachable(self, st: FolderState, why: str) -> None:
        """The folder cannot be listed now: keep its index as it is and let the rescan retry it."""
        if st.state != "unavailable":
            st.unreachable_since = time.time()
            self.log.warning("folder_unreachable", folder=st.name, path=str(st.spec.root), error=why)
        st.state, st.message = "unavailable", None
        st.error = (f"the folder {str(st.spec.root)!r} is unreachable ({why}); its index is kept and searchable, "
                    "and it is checked again on every rescan")
        self._report()

    def update_paths(self, name: str, rels: list[str]) -> None:
        st = self.folders.get(name)
        if st is None or st.indexer is None or st.state == "unavailable":
            return
        try:
            report = st.indexer.update_paths(rels)
            st.last_update = time.time()
            st.live_batches += 1
            st.live_paths += len(rels)
            st.last_batch = {"paths": len(rels), **report.as_dict()}
            if report.indexed or report.deleted or report.moved:
                self.log.info("folder_updated", folder=name, **report.as_dict())
                self._changed(name, rels)
        except FolderUnreachable as exc:
            self.mark_unreachable(st, str(exc))
        except Exception as exc:  # noqa: BLE001
            self.log.error("folder_update_failed", folder=name, error=f"{type(exc).__name__}: {exc}")

    def _changed(self, name: str, rels: list[str]) -> None:
        if self.on_document_changed is None:
            return
        for rel in rels:
            try:
                self.on_document_changed(name, rel)
            except Exception:  # noqa: BLE001 - telling subscribers is best effort
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._rescanner is not None:
            self._rescanner.stop()
        if self._watcher is not None:
            self._watcher.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for st in [*self.folders.values(), *self.retired]:
            if st.store is not None:
                st.store.close()
