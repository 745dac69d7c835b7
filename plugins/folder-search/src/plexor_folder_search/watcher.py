"""Watching the folders: watchdog events, debounced and coalesced into batches for the indexer."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plexor_folder_search.ignore import CACHE_DIRS, DEPENDENCY_DIRS, VCS_DIRS

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor_folder_search.service import FolderService

__all__ = ["Watcher"]

_SKIP_PARTS = VCS_DIRS | DEPENDENCY_DIRS | CACHE_DIRS


class Watcher:
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

        self._handler = Handler
        self._watches: dict[str, Any] = {}
        for st in service.folders.values():
            if st.indexer is not None and service.watches(st.spec) and st.spec.root.is_dir():
                try:
                    self.watch(st)
                except OSError as exc:  # this folder is rescanned instead; the others are watched
                    service.log.warning("watch_folder_failed", folder=st.name, error=str(exc))
        self.thread = threading.Thread(target=self._run, name="folder-search-watch", daemon=True)

    def watch(self, st: Any) -> None:
        """Watch the folder of ``st`` (again: a folder that came back needs a new watch)."""
        old = self._watches.pop(st.name, None)
        if old is not None:
            try:
                self.observer.unschedule(old)
            except Exception:  # noqa: BLE001 - the old watch may have died with its directory
                pass
        self._watches[st.name] = self.observer.schedule(self._handler(st.name, st.spec.root), str(st.spec.root),
                                                        recursive=True)

    def unwatch(self, name: str) -> None:
        old = self._watches.pop(name, None)
        if old is not None:
            try:
                self.observer.unschedule(old)
            except Exception:  # noqa: BLE001 - it may have died with its directory
                pass

    def watching(self, name: str) -> bool:
        return name in self._watches

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
