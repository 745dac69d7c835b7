"""One folder's index: a SQLite database (FTS5 for keywords, float32 vectors) under the data directory.

This is an index, rebuilt from the user's files whenever needed, so it uses
the standard library's ``sqlite3`` directly (FTS5 virtual tables, bulk
writes) rather than the kernel's peewee storage. It is schema-versioned with
``PRAGMA user_version``; an index written by a newer version of the plugin is
refused, never silently rebuilt.

Vectors are stored here as blobs and kept in memory in a
:class:`~plexor_folder_search.vectors.VectorIndex`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from plexor_folder_search.vectors import VectorIndex

__all__ = ["FTS_TOKENIZE", "SCHEMA_VERSION", "IndexStore", "SchemaError", "VectorIndex", "meta_text"]

SCHEMA_VERSION = 1

#: The chunks' full-text tokenizer (keywords.py asks it what a query word becomes).
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

_SCHEMA_V1 = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT,
    outline TEXT,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    chars INTEGER NOT NULL DEFAULT 0,
    indexed_at REAL NOT NULL
);
CREATE INDEX files_fingerprint ON files(fingerprint);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    heading TEXT NOT NULL DEFAULT '',
    meta TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    vector BLOB
);
CREATE INDEX chunks_file ON chunks(file_id, seq);
CREATE VIRTUAL TABLE chunk_fts USING fts5(
    body, meta, content='chunks', content_rowid='id', tokenize='{FTS_TOKENIZE}'
);
INSERT INTO chunk_fts(chunk_fts, rank) VALUES('rank', 'bm25(1.0, 0.3)');
CREATE TABLE documents (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    text BLOB NOT NULL
);
CREATE TABLE skipped (
    path TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    detail TEXT,
    size INTEGER,
    mtime_ns INTEGER
);
"""

# version -> SQL taking the schema from version-1 to version; 1 creates it.
MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}


class SchemaError(Exception):
    """The index file was written by a newer plugin version (or is not an index at all)."""


class IndexStore:
    """The SQLite index of one folder. Writes are serialised; reads use a small pool of connections."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.write_lock = threading.RLock()
        self._writer = self._connect()
        self._readers: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = [self._writer]
        self._pool_lock = threading.Lock()
        self.generation = 0  # bumped on every committed write; result caches key on it
        self._migrate()
        # The keyword side's impact lists (keywords.py): a cache kept beside the index, rebuilt when missing, so
        # it needs no schema version (an older plugin reading this index ignores it).
        self._writer.execute("CREATE TABLE IF NOT EXISTS term_impacts (word TEXT PRIMARY KEY, upto INTEGER NOT NULL, "
                             "ids BLOB NOT NULL, scores BLOB NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA cache_size=-32000")
        return conn

    def _migrate(self) -> None:
        conn = self._writer
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"the index {self.path} has schema version {version}, newer than this plugin's {SCHEMA_VERSION}"
            )
        if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise SchemaError(f"{self.path} is not a folder-search index")
        with self.write_lock:
            for v in range(version + 1, SCHEMA_VERSION + 1):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _split_sql(MIGRATIONS[v]):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={v}")
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise

    # ---------------------------------------------------------------- connections
    @contextlib.contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        with self._pool_lock:
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = self._connect()
            with self._pool_lock:
                self._all.append(conn)
        try:
            yield conn
        finally:
            with self._pool_lock:
                self._readers.append(conn)

    @contextlib.contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the single writer connection."""
        with self.write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self.generation += 1

    def side_write(self, sql: str, args: tuple[Any, ...] = (), wait: float = -1) -> bool:
        """One statement that changes no search result (a cache kept in the index): result caches stay valid.

        With ``wait`` >= 0, gives up (returns False) when the writer is busy that long, e.g. with an indexing batch.
        """
        if not self.write_lock.acquire(timeout=wait):
            return False
        try:
            self._writer.execute(sql, args)
        finally:
            self.write_lock.release()
        return True

    def close(self) -> None:
        with self._pool_lock:
            conns, self._all, self._readers = self._all, [], []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()

    # ---------------------------------------------------------------- meta
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        with self.reader() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))

    # ---------------------------------------------------------------- files
    def file_states(self) -> dict[str, tuple[int, int, int, str]]:
        """``path -> (id, size, mtime_ns, fingerprint)`` for every indexed file."""
        with self.reader() as conn:
            return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute("SELECT path, id, size, mtime_ns, fingerprint FROM files")}

    def skipped_states(self) -> dict[str, tuple[str, int | None, int | None]]:
        with self.reader() as conn:
            return {r[0]: (r[1], r[2], r[3]) for r in conn.execute("SELECT path, reason, size, mtime_ns FROM skipped")}

    def delete_files(self, conn: sqlite3.Connection, file_ids: list[int]) -> list[int]:
        """Delete files and their chunks (and FTS rows); returns the removed chunk ids."""
        removed: list[int] = []
        for fid in file_ids:
            rows = conn.execute("SELECT id, body, meta FROM chunks WHERE file_id=?", (fid,)).fetchall()
            if rows:
                conn.executemany(
                    "INSERT INTO chunk_fts(chunk_fts, rowid, body, meta) VALUES('delete', ?, ?, ?)", rows
                )
                removed.extend(r[0] for r in rows)
            conn.execute("DELETE FROM chunks WHERE file_id=?", (fid,))
            conn.execute("DELETE FROM files WHERE id=?", (fid,))
        return removed

    def insert_file(
        self,
        conn: sqlite3.Connection,
        path: str,
        size: int,
        mtime_ns: int,
        fingerprint: str,
        kind: str,
        title: str | None,
        outline: list[dict[str, Any]],
        chunks: list[Any],
        vectors: Any,
        text: str,
    ) -> list[int]:
        """Insert one file with its chunks; returns the new chunk ids in order."""
        cur = conn.execute(
            "INSERT INTO files(path, size, mtime_ns, fingerprint, kind, title, outline, chunk_count, chars, indexed_at)"
            " VALUES(?,?,?,?,?,?,?,?,?,?)",
            (path, size, mtime_ns, fingerprint, kind, title, json.dumps(outline), len(chunks), len(text), time.time()),
        )
        fid = cur.lastrowid
        conn.execute("INSERT INTO documents(file_id, text) VALUES(?, ?)", (fid, zlib.compress(text.encode("utf-8"), 1)))
        ids: list[int] = []
        for i, ch in enumerate(chunks):
            meta = meta_text(path, ch.heading, title)
            blob = vectors[i].tobytes() if vectors is not None else None
            c = conn.execute(
                "INSERT INTO chunks(file_id, seq, start_line, end_line, start_char, end_char, heading, meta, body, vector)"
                " VALUES(?,?,?,?,?,?,?,?,?,?)",
                (fid, ch.seq, ch.start_line, ch.end_line, ch.start_char, ch.end_char, ch.heading, meta, ch.text, blob),
            )
            ids.append(c.lastrowid)  # type: ignore[arg-type]
        if ids:
            conn.execute(
                "INSERT INTO chunk_fts(rowid, body, meta) SELECT id, body, meta FROM chunks WHERE file_id=?", (fid,)
            )
        return ids

    def rename_file(self, conn: sqlite3.Connection, file_id: int, new_path: str, mtime_ns: int) -> None:
        """A moved file keeps its chunks and vectors; only its path (and the path words in FTS) change."""
        rows = conn.execute("SELECT id, body, meta, heading FROM chunks WHERE file_id=?", (file_id,)).fetchall()
        title = conn.execute("SELECT title FROM files WHERE id=?", (file_id,)).fetchone()[0]
        self.rewrite_meta(conn, [(cid, body, meta, meta_text(new_path, heading, title)) for cid, body, meta, heading in rows])
        conn.execute("UPDATE files SET path=?, mtime_ns=?, indexed_at=? WHERE id=?", (new_path, mtime_ns, time.time(), file_id))

    def rewrite_meta(self, conn: sqlite3.Connection, rows: list[tuple[int, str, str, str]]) -> None:
        """New keyword fields for chunks, ``(chunk id, body, old meta, new meta)``; the full-text index follows."""
        conn.executemany("INSERT INTO chunk_fts(chunk_fts, rowid, body, meta) VALUES('delete', ?, ?, ?)",
                         [(cid, body, old) for cid, body, old, _new in rows])
        conn.executemany("UPDATE chunks SET meta=? WHERE id=?", [(new, cid) for cid, _body, _old, new in rows])
        conn.executemany("INSERT INTO chunk_fts(rowid, body, meta) VALUES(?, ?, ?)",
                         [(cid, body, new) for cid, body, _old, new in rows])

    def set_skipped(self, conn: sqlite3.Connection, path: str, reason: str, detail: str | None,
                    size: int | None = None, mtime_ns: int | None = None) -> None:
        conn.execute(
            "INSERT INTO skipped(path, reason, detail, size, mtime_ns) VALUES(?,?,?,?,?) ON CONFLICT(path) DO UPDATE "
            "SET reason=excluded.reason, detail=excluded.detail, size=excluded.size, mtime_ns=excluded.mtime_ns",
            (path, reason, detail, size, mtime_ns),
        )

    # ---------------------------------------------------------------- vectors
    def load_vectors(self, dim: int) -> tuple[Any, Any]:
        import numpy as np

        with self.reader() as conn:
            rows = conn.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL AND length(vector)=?",
                                (dim * 4,)).fetchall()
        if not rows:
            return np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.float32)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim).copy()
        return ids, mat

    def document_text(self, file_id: int) -> str:
        with self.reader() as conn:
            row = conn.execute("SELECT text FROM documents WHERE file_id=?", (file_id,)).fetchone()
        return zlib.decompress(row[0]).decode("utf-8") if row else ""

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total


def meta_text(path: str, heading: str, title: str | None = None) -> str:
    # File name words help keyword search ("config loader" finds config_loader.py). The document's title is there
    # for every passage, as a title field: +0.005 nDCG@10 on SciFact's train judgements (BENCH.md).
    name = path.replace("/", " ").replace("_", " ").replace("-", " ").replace(".", " ")
    extra = title if title and title not in heading else ""
    return " ".join(part for part in (name.strip(), heading, extra) if part)


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
