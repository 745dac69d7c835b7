"""What the service knows of one folder while it runs, and a logger for use outside a kernel."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from plexor_folder_search.folders import FolderSpec
from plexor_folder_search.indexer import Indexer
from plexor_folder_search.search import SearchEngine
from plexor_folder_search.store import IndexStore, VectorIndex

__all__ = ["FolderState", "Log", "StdLog"]


class Log(Protocol):
    """What the service logs through: the kernel's structlog logger (``plugin.log``) or :class:`StdLog`."""

    def info(self, event: str, **kw: Any) -> Any: ...
    def warning(self, event: str, **kw: Any) -> Any: ...
    def error(self, event: str, **kw: Any) -> Any: ...
    def debug(self, event: str, **kw: Any) -> Any: ...


class StdLog:
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
    state: str = "pending"  # pending -> indexing -> ready | error | unavailable (unreachable, retried)
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
    unreachable_since: float | None = None  # when the folder was last found unreachable (kept until it is back)
    last_check: float | None = None  # the last rescan that looked at this folder
    checks: int = 0  # rescans that looked at it
    complete: bool = False  # the index covers the whole folder (a full scan finished since it was last cleared)
    scan_lock: threading.Lock = field(default_factory=threading.Lock)  # one full scan (or forced rebuild) at a time

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


