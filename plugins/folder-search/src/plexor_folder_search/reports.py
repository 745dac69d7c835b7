"""What the service reports of itself: the folder list, each folder's counts and state, and the status.

:class:`FolderReports` is the part of :class:`~plexor_folder_search.service.FolderService` behind
``list_folders``, ``get_server_info`` and ``plexor folder-search status``; the service (the rest)
opens, indexes, watches and rescans the folders it reports on.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor_folder_search.defaults import FolderSettings
    from plexor_folder_search.embed import Embedder
    from plexor_folder_search.state import FolderState
    from plexor_folder_search.watcher import Watcher

__all__ = ["FolderReports"]


def _iso(ts: float | None) -> str | None:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat() if ts else None


class FolderReports:
    """The folder list and the status report (the service sets what they read)."""

    folders: dict[str, FolderState]
    config: FolderSettings
    index_dir: Path
    model_name: str
    weight: float
    embedder: Embedder | None
    embedder_error: tuple[str, str] | None
    warnings: list[str]
    _watcher: Watcher | None
    _rescanner: Any

    def wait_open(self, timeout: float = 20.0) -> None:
        raise NotImplementedError

    def list_folders(self) -> dict[str, Any]:
        """Every folder with its state and counts (``list_folders``); a note when none is configured."""
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
            item.update(self._folder_extras(st))
            out.append(item)
        data: dict[str, Any] = {"folders": out}
        if not out:
            data["notes"] = ["No folders are configured. The user adds one with `plexor folder-search add PATH` "
                             "(a running server picks it up on its next rescan), or with folders = [...] under "
                             "[folder-search] in plexor.toml and a restart."]
        return data

    def skipped_examples(self, per_reason: int = 3) -> dict[str, dict[str, list[str]]]:
        """For each folder, a few skipped paths per reason (with their detail), for a status report."""
        out: dict[str, dict[str, list[str]]] = {}
        for st in self.folders.values():
            if st.store is None:
                continue
            with st.store.reader() as conn:
                rows = conn.execute("SELECT reason, path, detail FROM skipped ORDER BY reason, path").fetchall()
            per: dict[str, list[str]] = {}
            for reason, path, detail in rows:
                lst = per.setdefault(reason, [])
                if len(lst) < per_reason:
                    lst.append(path + (f" ({detail})" if detail else ""))
            out[st.name] = per
        return out

    def server_info(self) -> dict[str, Any]:
        """The whole status: model, search mode, every folder's counts and progress, totals and settings."""
        from plexor_folder_search import __version__

        self.wait_open()
        folders = []
        total_docs = total_chunks = total_bytes = 0
        states: list[str] = []  # each folder's state as its entry shows it (the warm-up thread moves them on)
        for st in self.folders.values():
            info: dict[str, Any] = {"name": st.name, "path": str(st.spec.root), "source": st.spec.source,
                                    **st.progress()}
            states.append(info["state"])
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
            info.update(self._folder_extras(st))
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
            "state": "ready" if all(s in ("ready", "error", "unavailable") for s in states) else "indexing",
            "watching": self._watcher is not None,
            "folders": folders,
            "totals": {"folders": len(folders), "documents": total_docs, "chunks": total_chunks, "index_bytes": total_bytes},
            "index_dir": str(self.index_dir),
            "settings": {"max_file_size": self.config.max_file_size, "max_unpacked_size": self.config.max_unpacked_size,
                         "extract_timeout": self.config.extract_timeout, "chunk_size": self.config.chunk_size,
                         "exclude": list(self.config.exclude), "include": list(self.config.include),
                         "rescan_interval": self.config.rescan_interval},
            "warnings": list(self.warnings),
        }

    def _folder_extras(self, st: FolderState) -> dict[str, Any]:
        """A folder's own settings, model, watching and rescan state, for list_folders and get_server_info."""
        embedder = st.indexer.embedder if st.indexer is not None else None
        out: dict[str, Any] = {
            "settings": st.spec.overrides(),
            "model": embedder.name if embedder is not None else None,
            "watched": self._watcher is not None and self._watcher.watching(st.name),
            "reachable": st.state != "unavailable" and (st.indexer is None or st.indexer.reachable() is None),
        }
        rescanner = self._rescanner
        rescan: dict[str, Any] = {"interval": self.config.rescan_interval, "checks": st.checks,
                                  "last_check": _iso(st.last_check)}
        if rescanner is not None and rescanner.next_at:
            rescan["next_check"] = _iso(rescanner.next_at)
        if st.unreachable_since is not None:
            rescan["unreachable_since"] = _iso(st.unreachable_since)
        out["rescan"] = rescan
        return out
