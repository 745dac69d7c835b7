"""Rescanning on a schedule: retry folders that failed, notice folders that went away or came back.

Every ``rescan_interval`` seconds the :class:`Rescanner` looks at each folder:

- one that cannot be listed any more (an unmounted drive, a share that is down) becomes
  ``unavailable``: its index is kept as it is and stays searchable, nothing is deleted;
- one that is back (or whose indexing failed, or whose index could not be opened) is opened if
  needed, watched again and scanned in full, which picks up whatever changed meanwhile;
- one with ``watch = false`` is scanned in full, so it stays current without a watcher.

It also applies what ``plexor folder-search add/set/remove`` changed in ``folders.json`` since the
server started: a new folder is opened and indexed, a removed one dropped, and one whose settings
changed is reopened with them (a new model re-embeds that folder only, in the background).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor_folder_search.service import FolderService
    from plexor_folder_search.state import FolderState

__all__ = ["Rescanner", "apply_cli_folders", "cli_folders_signature", "rescan_once"]


class Rescanner:
    """A daemon thread running :func:`rescan_once` every ``interval`` seconds until stopped."""

    def __init__(self, service: FolderService, interval: float) -> None:
        self.service = service
        self.interval = interval
        self.next_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="folder-search-rescan", daemon=True)

    def start(self) -> None:
        self.next_at = time.time() + self.interval
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(max(0.0, (self.next_at or 0) - time.time())):
            try:
                rescan_once(self.service)
            except Exception as exc:  # noqa: BLE001 - the schedule must survive one bad round
                self.service.log.error("rescan_failed", error=f"{type(exc).__name__}: {exc}")
            self.next_at = time.time() + self.interval

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)


def cli_folders_signature(data_dir: Any) -> tuple[int, int] | None:
    """When ``folders.json`` last changed (``None`` while there is none)."""
    import os

    from plexor_folder_search.folders import folders_file

    try:
        st = os.stat(folders_file(data_dir))
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def apply_cli_folders(service: FolderService) -> None:
    """Bring the open folders in line with ``folders.json`` if the CLI changed it since last time."""
    from plexor import PlexorError
    from plexor_folder_search.defaults import MODELS
    from plexor_folder_search.folders import load_folders

    seen = cli_folders_signature(service.data_dir)
    if seen == service.folders_seen:
        return
    service.folders_seen = seen
    warnings: list[str] = []
    try:
        specs = load_folders(list(service.config.folders), service.data_dir, warnings, MODELS)
    except PlexorError as exc:  # a hand-edited folders.json gone wrong: keep serving what is open
        service.log.error("folders_reload_failed", error=exc.render())
        return
    by_root = {st.spec.root: st for st in service.folders.values()}
    folders: dict[str, FolderState] = {}
    changed: list[FolderState] = []
    for spec in specs:
        st = by_root.pop(spec.root, None)
        if st is not None and st.spec == spec:
            folders[spec.name] = st
            continue
        if st is not None:
            _retire(service, st)
        fresh = service._open_folder(spec)
        if fresh.store is not None:
            fresh.state = "error"  # indexed by the retry below
        folders[spec.name] = fresh
        changed.append(fresh)
        service.log.info("folder_settings_applied", folder=spec.name, settings=spec.overrides())
    for st in by_root.values():
        _retire(service, st)
        service.log.info("folder_removed", folder=st.name)
    service.folders = folders
    service.warnings.extend(w for w in warnings if w not in service.warnings)


def _retire(service: FolderService, st: FolderState) -> None:
    if service._watcher is not None:
        service._watcher.unwatch(st.name)
    st.state = "removed"
    service.retired.append(st)  # a query may still hold it; its store is closed at stop


def rescan_once(service: FolderService) -> None:
    """One round over every folder (see the module's docstring)."""
    apply_cli_folders(service)
    for name in list(service.folders):
        if service._stop.is_set():
            return
        st = service.folders[name]
        if st.state in ("indexing", "pending"):
            continue  # the warm-up or a reindex is on it
        st.last_check = time.time()
        st.checks += 1
        if st.store is None:
            # The index could not be opened (a full disk, a locked file): try again from the start.
            fresh = service._open_folder(st.spec)
            if fresh.store is None:
                st.error = fresh.error
                continue
            fresh.last_check, fresh.checks, fresh.state = st.last_check, st.checks, "error"  # retried below
            service.folders[name] = st = fresh
        assert st.indexer is not None
        problem = st.indexer.reachable()
        if problem:
            service.mark_unreachable(st, problem)
            continue
        if st.state in ("unavailable", "error"):
            was = st.state
            service.log.info("folder_retried", folder=name, was=was)
            if service._watcher is not None or service.watches(st.spec):
                _rewatch(service, st)
            service.index_folder(st)
            if st.state == "ready":
                service.log.info("folder_back", folder=name, was=was)
        elif not service.watches(st.spec):
            service.index_folder(st)


def _rewatch(service: FolderService, st: FolderState) -> None:
    """Watch the folder afresh: a watch on a folder that went away is dead, or follows the old directory."""
    if not service.watches(st.spec):
        return
    if service._watcher is None:
        service._start_watching()
        return
    try:
        service._watcher.watch(st)
    except Exception as exc:  # noqa: BLE001 - it is still rescanned
        service.log.warning("rewatch_failed", folder=st.name, error=str(exc))
