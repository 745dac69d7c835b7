"""Keeping one folder's index in step with the disk, incrementally.

A file is re-read only when its size or modification time changed, and
re-indexed only when its content fingerprint (BLAKE2b of the bytes) changed.
A file that disappeared while another appeared with the same fingerprint was
moved: its chunks and vectors are kept and only its path changes. What is not
indexed is recorded with a reason (``skipped`` table), and a corrupt file is
reported there while indexing carries on. Listing is in :mod:`~plexor_folder_search.walk`,
reading in :mod:`~plexor_folder_search.safefs`, and writing in :mod:`~plexor_folder_search.batches`.
"""

from __future__ import annotations

import stat as statmod
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plexor_folder_search.batches import EMBED_TEXT_VERSION, Batches, Work, embed_text
from plexor_folder_search.changes import PathChanges
from plexor_folder_search.embed import Embedder
from plexor_folder_search.extract import Limits
from plexor_folder_search.ignore import IgnoreRules
from plexor_folder_search.safefs import ReadRefused, read_inside
from plexor_folder_search.store import IndexStore, meta_text
from plexor_folder_search.vectors import VectorIndex
from plexor_folder_search.walk import Skip, Walker

__all__ = ["FolderUnreachable", "IndexOptions", "Indexer", "ScanReport"]

# Skip reasons that depend only on a file's content: kept without re-reading while its size and time stay the same.
CONTENT_REASONS = {"binary file", "corrupt or unreadable document", "too large when unpacked", "took too long to extract"}

ProgressFn = Callable[[int, int, str], None]


EMPTY = ("the folder is empty although its index is not (a drive that is not mounted?); if its files were "
         "really deleted, re-index it with force")


class FolderUnreachable(Exception):
    """The folder itself cannot be listed (a drive unmounted, a share gone): nothing is deleted from its index."""


@dataclass
class IndexOptions:
    """What the indexer needs of the settings (built by the service from :class:`FolderSettings`)."""

    max_file_size: int
    chunk_size: int
    chunk_overlap: int
    exclude: list[str]
    limits: Limits
    include: list[str] | None = None
    batch_files: int = 64
    batch_chars: int = 2_000_000


@dataclass
class ScanReport:
    scanned: int = 0
    indexed: int = 0
    unchanged: int = 0
    moved: int = 0
    deleted: int = 0
    skipped: int = 0
    errors: int = 0
    chunks: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Indexer:
    """Brings one folder's :class:`IndexStore` (and its vectors) in line with the disk."""

    def __init__(self, root: Path, store: IndexStore, vectors: VectorIndex | None, embedder: Embedder | None,
                 options: IndexOptions,
                 private: list[Path] | None = None) -> None:
        self.root = root
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        self.options = options
        self.rules = IgnoreRules(root, options.exclude, private, options.include)
        self.walker = Walker(root, self.rules, options.max_file_size)
        self.lock = threading.Lock()  # one scan or update at a time per folder

    # ------------------------------------------------------------------ walking
    def walk(self) -> tuple[dict[str, tuple[int, int]], list[Skip]]:
        """Every indexable file ``rel -> (size, mtime_ns)`` and the skips ``(rel, reason, detail, size, mtime)``."""
        return self.walker.walk()

    def reachable(self) -> str | None:
        """Why the folder cannot be reached now, or ``None`` when it is a directory that can be listed."""
        import os

        try:
            st = os.stat(self.root)
        except OSError as exc:
            return exc.strerror or type(exc).__name__
        if not statmod.S_ISDIR(st.st_mode):
            return "it is no longer a directory"
        if not os.access(self.root, os.R_OK | os.X_OK):
            return "permission denied"
        return None

    def looks_unmounted(self) -> bool:
        """The folder is an empty directory although its index has documents: the mount point of a drive that
        is not mounted looks like that, so it is not taken for "every file was deleted"."""
        import os

        try:
            with os.scandir(self.root) as entries:
                if any(True for _ in entries):
                    return False
        except OSError:
            return True
        with self.store.reader() as conn:
            return conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None

    # ------------------------------------------------------------------ scanning
    def scan(self, progress: ProgressFn | None = None, stop: threading.Event | None = None) -> ScanReport:
        """A full pass: index what is new or changed, follow moves, drop what is gone."""
        with self.lock:
            started = time.perf_counter()
            report = ScanReport()
            problem = self.reachable()
            if problem:
                raise FolderUnreachable(problem)
            on_disk, skipped = self.walk()
            # A folder that vanished during the walk looks empty: never take that for "every file was deleted".
            problem = self.reachable() or next((f"{s[1]}: {s[2]}" for s in skipped if s[0] == "."), None)
            if problem is None and not on_disk and self.looks_unmounted():
                problem = EMPTY
            if problem:
                raise FolderUnreachable(problem)
            report.scanned = len(on_disk)
            known = self.store.file_states()
            prev_skipped = self.store.skipped_states()
            work: list[Work] = []
            for rel, (size, mtime) in on_disk.items():
                old = known.get(rel)
                if old is not None and old[1] == size and old[2] == mtime:
                    report.unchanged += 1
                    continue
                prev = prev_skipped.get(rel)
                if old is None and prev is not None and prev[0] in CONTENT_REASONS and prev[1] == size and prev[2] == mtime:
                    # Skipped for its content last time (binary, corrupt, a bomb) and unchanged since.
                    skipped.append((rel, prev[0], None, size, mtime))
                    continue
                work.append(Work(rel, size, mtime, old[0] if old else None, old[3] if old else None))
            gone = {rel: st for rel, st in known.items() if rel not in on_disk}
            self._process(work, gone, skipped, report, progress, stop, full=True, forget=[])
            report.seconds = round(time.perf_counter() - started, 3)
            return report

    def update_paths(self, rels: Iterable[str]) -> ScanReport:
        """Bring the given paths (files or directories, relative) up to date: the watcher's entry point."""
        with self.lock:
            started = time.perf_counter()
            report = ScanReport()
            problem = self.reachable()
            if problem:
                raise FolderUnreachable(problem)  # the events are those of the drive going away
            changes = PathChanges(self.root, self.rules, self.walker, self.store.file_states())
            for rel in sorted(set(rels)):
                changes.add(rel)
            report.unchanged += changes.unchanged
            report.scanned = len(changes.work)
            self._process(changes.work, changes.gone, changes.skipped, report, None, None, full=False,
                          forget=changes.forget)
            report.seconds = round(time.perf_counter() - started, 3)
            return report

    # ------------------------------------------------------------------ processing
    def _process(self, work: list[Work], gone: dict[str, tuple[int, int, int, str]], skipped: list[Any],
                 report: ScanReport, progress: ProgressFn | None, stop: threading.Event | None, *, full: bool,
                 forget: list[str]) -> None:
        gone_by_fp: dict[str, list[tuple[str, int]]] = {}
        for rel, (fid, _s, _m, fp) in gone.items():
            gone_by_fp.setdefault(fp, []).append((rel, fid))
        dropped = self._index(work, gone_by_fp, skipped, report, progress, stop)
        stopped = stop is not None and stop.is_set()
        # What is gone and was not found moved is deleted; skips are recorded.
        leftover = [fid for items in gone_by_fp.values() for _rel, fid in items]
        if (leftover or dropped) and self.reachable():  # gone meanwhile: what looks deleted may not be
            raise FolderUnreachable(self.reachable() or "gone")
        with self.store.writing() as conn:
            removed = self.store.delete_files(conn, leftover + dropped) if not stopped else []
            report.deleted += len(leftover) if not stopped else 0
            if full and not stopped:
                conn.execute("DELETE FROM skipped")
            if not full:
                # A path that is gone (or was re-walked) loses its old skip records, and so does all below it.
                for rel in [*gone, *forget]:
                    conn.execute("DELETE FROM skipped WHERE path=? OR substr(path, 1, ?) = ?",
                                 (rel, len(rel) + 1, rel + "/"))
            for rel, reason, detail, size, mtime in skipped:
                self.store.set_skipped(conn, rel, reason, detail, size, mtime)
        if self.vectors is not None:
            self.vectors.remove(removed)
        report.skipped = len(skipped)

    def _index(self, work: list[Work], gone_by_fp: dict[str, list[tuple[str, int]]], skipped: list[Any],
               report: ScanReport, progress: ProgressFn | None, stop: threading.Event | None) -> list[int]:
        """Read and index ``work`` in batches (a moved file takes its entry out of ``gone_by_fp``).

        Returns the ids of indexed files that are skipped now (what is there is not what was indexed).
        """
        total = len(work)
        done = 0
        if progress:
            progress(0, total, f"{total} files to index" if total else "nothing changed")
        batch: list[tuple[Work, bytes]] = []
        batch_chars = 0
        batches = Batches(self.store, self.vectors, self.embedder, self.options)
        dropped: list[int] = []
        for item in work:
            if stop is not None and stop.is_set():
                break
            data = self._read(item, skipped, report, dropped)
            if data is None:
                done += 1
                continue
            batch.append((item, data))
            batch_chars += len(data)
            if len(batch) >= self.options.batch_files or batch_chars >= self.options.batch_chars:
                done += len(batch)
                batches.add(batch, gone_by_fp, skipped, report)
                batch, batch_chars = [], 0
                if progress:
                    progress(done, total, f"indexed {done} of {total} files")
        if batch:
            done += len(batch)
            batches.add(batch, gone_by_fp, skipped, report)
            if progress:
                progress(done, total, f"indexed {done} of {total} files")
        batches.finish()
        return dropped

    def _read(self, item: Work, skipped: list[Any], report: ScanReport, dropped: list[int]) -> bytes | None:
        """The file's bytes, or ``None`` when it is skipped (recorded in ``skipped``, its old entry in ``dropped``)."""
        try:
            data, st = read_inside(self.root, item.rel, self.options.max_file_size)
        except ReadRefused as exc:
            skipped.append((item.rel, exc.reason, exc.detail, item.size, item.mtime_ns))
            if item.old_id is not None:
                dropped.append(item.old_id)  # what is there now is not what was indexed
            if exc.reason == "unreadable":
                report.errors += 1
            return None
        # Record what was read, not what the walk saw a moment earlier.
        item.size, item.mtime_ns = st.st_size, st.st_mtime_ns
        if len(data) > self.options.max_file_size:
            skipped.append((item.rel, "too large", f"more than max_file_size = {self.options.max_file_size} bytes",
                            item.size, item.mtime_ns))
            if item.old_id is not None:
                dropped.append(item.old_id)
            return None
        return data

    # ------------------------------------------------------------------ vectors
    def embed_missing(self, progress: ProgressFn | None = None, stop: threading.Event | None = None) -> int:
        """Embed chunks that have no vector (written with no model, or after a model change)."""
        if self.embedder is None:
            return 0
        done = 0
        with self.store.reader() as conn:
            total = conn.execute("SELECT count(*) FROM chunks WHERE vector IS NULL").fetchone()[0]
        while total and not (stop is not None and stop.is_set()):
            with self.store.reader() as conn:
                rows = conn.execute(
                    "SELECT c.id, f.path, c.heading, c.body, f.title, c.seq FROM chunks c JOIN files f ON f.id = c.file_id "
                    "WHERE c.vector IS NULL LIMIT 2048").fetchall()
            if not rows:
                break
            vecs = self.embedder.embed([embed_text(*r[1:]) for r in rows])
            with self.store.writing() as conn:
                conn.executemany("UPDATE chunks SET vector=? WHERE id=?",
                                 [(vecs[i].tobytes(), r[0]) for i, r in enumerate(rows)])
            if self.vectors is not None:
                self.vectors.add([r[0] for r in rows], vecs)
            done += len(rows)
            if progress:
                progress(done, total, f"embedded {done} of {total} chunks")
        return done

    def refresh_vectors(self, progress: ProgressFn | None = None, stop: threading.Event | None = None) -> int:
        """Re-embed the chunks whose vectors were made from an older embedding text (``EMBED_TEXT_VERSION``).

        The old vectors keep serving searches until every chunk has its new one; the vector index is then reloaded
        from the store, so a search never ranks old vectors beside new ones. Interrupted, it resumes where it stopped
        (meta ``embed_text_upto``). Returns how many chunks were re-embedded.
        """
        embedder = self.embedder
        if embedder is None or self.store.get_meta("embed_text") == str(EMBED_TEXT_VERSION):
            return 0
        with self.lock:  # no scan or update writes meanwhile: the reload at the end sees every chunk as written
            return self._refresh_vectors(embedder, str(EMBED_TEXT_VERSION), progress, stop)

    def _refresh_vectors(self, embedder: Embedder, version: str, progress: ProgressFn | None,
                         stop: threading.Event | None) -> int:
        last = int(self.store.get_meta("embed_text_upto") or 0)
        with self.store.reader() as conn:
            total = conn.execute("SELECT count(*) FROM chunks WHERE vector IS NOT NULL AND id > ?", (last,)).fetchone()[0]
        done = 0
        while total:
            if stop is not None and stop.is_set():
                return done
            with self.store.reader() as conn:
                rows = conn.execute(
                    "SELECT c.id, f.path, c.heading, c.body, f.title, c.seq, c.meta FROM chunks c "
                    "JOIN files f ON f.id = c.file_id WHERE c.vector IS NOT NULL AND c.id > ? ORDER BY c.id LIMIT 2048",
                    (last,)).fetchall()
            if not rows:
                break
            vecs = embedder.embed([embed_text(*r[1:6]) for r in rows])
            last = int(rows[-1][0])
            # The same version gave every passage the title as a keyword field: older rows get it here too.
            metas = [(r[0], r[3], r[6], meta_text(r[1], r[2], r[4])) for r in rows]
            stale = [m for m in metas if m[3] != m[2]]
            with self.store.writing() as conn:
                conn.executemany("UPDATE chunks SET vector=? WHERE id=?",
                                 [(vecs[i].tobytes(), r[0]) for i, r in enumerate(rows)])
                if stale:
                    self.store.rewrite_meta(conn, stale)
                self.store.set_meta(conn, "embed_text_upto", str(last))
            done += len(rows)
            if progress:
                progress(done, total, f"re-embedded {done} of {total} chunks (the embedding text changed)")
        with self.store.writing() as conn:
            self.store.set_meta(conn, "embed_text", version)
            conn.execute("DELETE FROM meta WHERE key='embed_text_upto'")
        if done and self.vectors is not None:
            self.vectors.load_store(self.store)
        return done
