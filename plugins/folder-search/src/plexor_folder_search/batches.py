"""Indexing a batch of read files: extract and chunk them, then embed and write them in one transaction.

Extraction and chunking (Python, holding the GIL) of one batch overlap with the
embedding and writing (Rust tokenizer, numpy, SQLite: mostly without the GIL)
of the previous one, on a single writer thread. Each file is written under its
own savepoint, so a file the index cannot take is skipped and the batch goes on.
"""

from __future__ import annotations

import hashlib
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plexor_folder_search.chunking import Chunk, chunk_text, language_of
from plexor_folder_search.embed import Embedder
from plexor_folder_search.extract import Bounded, Extracted, ExtractError, Unsupported, extract
from plexor_folder_search.store import IndexStore
from plexor_folder_search.vectors import VectorIndex
from plexor_folder_search.walk import Skip

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor_folder_search.indexer import IndexOptions, ScanReport

__all__ = ["EMBED_TEXT_VERSION", "Batches", "Work", "embed_text", "fingerprint"]


def fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class Work:
    """A file to (re)index: its path, the size and time read, and its previous entry if it had one."""

    rel: str
    size: int
    mtime_ns: int
    old_id: int | None
    old_fp: str | None = None


class Batches:
    """The batches of one scan or update; :meth:`finish` waits for the last one to be written."""

    def __init__(self, store: IndexStore, vectors: VectorIndex | None, embedder: Embedder | None,
                 options: IndexOptions) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        self.options = options
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    def finish(self) -> None:
        self._wait_commit()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def add(self, batch: list[tuple[Work, bytes]], gone_by_fp: dict[str, list[tuple[str, int]]],
            skipped: list[Skip], report: ScanReport) -> None:
        """Prepare ``batch`` here, then embed and write it on the writer thread once the previous one is written."""
        parts = self._prepare(batch, gone_by_fp, skipped, report)
        self._wait_commit()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="folder-search-embed")
        self._pending = self._pool.submit(self._commit, *parts, report, skipped)

    def _wait_commit(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _prepare(self, batch: list[tuple[Work, bytes]], gone_by_fp: dict[str, list[tuple[str, int]]],
                 skipped: list[Any], report: ScanReport) -> tuple[Any, Any, Any]:
        prepared: list[tuple[Work, str, Any, list[Any]]] = []
        moves: list[tuple[Work, int, str]] = []
        touched: list[Work] = []
        for item, data in batch:
            fp = fingerprint(data)
            if item.old_id is not None and fp == item.old_fp:
                touched.append(item)  # only the time changed: keep everything
                continue
            if item.old_id is None and gone_by_fp.get(fp):
                old_rel, fid = gone_by_fp[fp].pop()
                if not gone_by_fp[fp]:
                    del gone_by_fp[fp]
                moves.append((item, fid, old_rel))
                continue
            got = self._extract(item, data, skipped, report)
            prepared.append((item, fp, *(got or (None, []))))
        return prepared, moves, touched

    def _extract(self, item: Work, data: bytes, skipped: list[Skip],
                 report: ScanReport) -> tuple[Extracted, list[Chunk]] | None:
        """The text and chunks of one file, or ``None`` with the reason added to ``skipped``."""
        try:
            ex = extract(item.rel, data, limits=self.options.limits)
            return ex, chunk_text(ex.text, language_of(ex.kind), self.options.chunk_size, self.options.chunk_overlap)
        except Bounded as exc:
            skipped.append((item.rel, exc.reason, exc.detail, item.size, item.mtime_ns))
        except Unsupported as exc:
            skipped.append((item.rel, "binary file", str(exc), item.size, item.mtime_ns))
        except ExtractError as exc:
            skipped.append((item.rel, "corrupt or unreadable document", str(exc), item.size, item.mtime_ns))
            report.errors += 1
        except Exception as exc:  # noqa: BLE001 - a parser bug on one file must not stop indexing
            skipped.append((item.rel, "corrupt or unreadable document", f"{type(exc).__name__}: {exc}",
                            item.size, item.mtime_ns))
            report.errors += 1
        return None

    def _commit(self, prepared: list[Any], moves: list[Any], touched: list[Any], report: ScanReport,
                skipped: list[Skip]) -> None:
        vectors = None
        all_chunks = [(ex, ch, item.rel) for item, _fp, ex, chs in prepared if ex is not None for ch in chs]
        if self.embedder is not None and all_chunks:
            vectors = self.embedder.embed([embed_text(rel, ch.heading, ch.text, ex.title, ch.seq)
                                           for ex, ch, rel in all_chunks])
        added_ids: list[int] = []
        added_rows: list[int] = []
        removed: list[int] = []
        row = 0
        with self.store.writing() as conn:
            for item in touched:
                conn.execute("UPDATE files SET size=?, mtime_ns=? WHERE id=?", (item.size, item.mtime_ns, item.old_id))
                report.unchanged += 1
            for item, fid, _old_rel in moves:
                self.store.rename_file(conn, fid, item.rel, item.mtime_ns)
                report.moved += 1
            for item, fp, ex, chunks in prepared:
                vecs = vectors[row : row + len(chunks)] if vectors is not None and ex is not None else None
                # One file per savepoint: a file the index cannot take is skipped, the batch goes on.
                conn.execute("SAVEPOINT one_file")
                try:
                    if item.old_id is not None:
                        gone = self.store.delete_files(conn, [item.old_id])
                    ids = self._insert(conn, item, fp, ex, chunks, vecs)
                    conn.execute("RELEASE one_file")
                except Exception as exc:  # noqa: BLE001
                    conn.execute("ROLLBACK TO one_file")
                    conn.execute("RELEASE one_file")
                    skipped.append((item.rel, "could not be indexed", f"{type(exc).__name__}: {exc}",
                                    item.size, item.mtime_ns))
                    report.errors += 1
                    row += len(chunks) if ex is not None else 0
                    continue
                if item.old_id is not None:
                    removed.extend(gone)
                if ex is None:
                    continue
                if vecs is not None:
                    added_ids.extend(ids)
                    added_rows.extend(range(row, row + len(chunks)))
                row += len(chunks)
                report.indexed += 1
                report.chunks += len(chunks)
        if self.vectors is not None:
            self.vectors.remove(removed)
            if vectors is not None and added_ids:
                self.vectors.add(added_ids, vectors[added_rows])

    def _insert(self, conn: sqlite3.Connection, item: Work, fp: str, ex: Extracted | None, chunks: list[Chunk],
                vecs: Any) -> list[int]:
        if ex is None:
            return []
        conn.execute("DELETE FROM skipped WHERE path=?", (item.rel,))
        return self.store.insert_file(conn, item.rel, item.size, item.mtime_ns, fp, ex.kind, ex.title,
                                      ex.outline, chunks, vecs, ex.text)


#: What :func:`embed_text` makes of a chunk. Stored in the index (meta ``embed_text``); an index whose vectors were
#: made from an older text has them re-embedded (``Indexer.refresh_vectors``), so old and new are never mixed.
#: 1: heading and body. 2: a document's second and later passages also carry its title.
EMBED_TEXT_VERSION = 2


def embed_text(rel: str, heading: str, body: str, title: str | None = None, seq: int = 0) -> str:
    """The text a chunk's vector is made from: its heading trail and body, and for a document's second and later
    passages its title (the first passage usually begins with it). Measured on SciFact's *train* judgements
    (bench/folder_search_tool.py, BENCH.md): with the title in the keyword fields as well, +0.001 nDCG@10."""
    head = heading
    if seq > 0 and title and title not in heading:
        head = f"{title}\n{heading}" if heading else title
    return f"{head}\n{body}" if head else body
