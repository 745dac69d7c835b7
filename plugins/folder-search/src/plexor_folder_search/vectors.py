"""Chunk vectors in memory: one contiguous numpy matrix, searched with one matrix-vector product.

On a large index of Matryoshka vectors the search is coarse-to-fine; from
``ANN_MIN_ROWS`` vectors on, they move into a compressed index (4-bit codes
scanned for candidates, 8-bit codes to rescore them:
:mod:`plexor_folder_search.ann`). numpy is imported when an index is created,
never when this module loads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["MODE_ANN", "VectorHits", "VectorIndex", "single_threaded_blas"]

#: :attr:`VectorIndex.mode` of a large index: a scan of 4-bit codes, its candidates rescored from 8-bit codes.
MODE_ANN = "pq4-scan+sq8"


class VectorIndex:
    """Chunk vectors in memory: sorted ids and one contiguous (n, dim) float32 matrix, updated incrementally.

    :meth:`search` is one matrix-vector product and ``argpartition``. For a
    model whose vectors are Matryoshka-trained (their leading dimensions are
    themselves an embedding, as wordllama's are), a large index is searched
    coarse-to-fine: a normalised copy of the first ``coarse_dims`` dimensions
    picks ``4 k`` candidates, which are then rescored with the full vectors.
    """

    COARSE_MIN_ROWS = 20_000
    #: From this many vectors on they are kept as 4-bit and 8-bit codes (:class:`~.ann.IvfIndex`) instead of a
    #: float32 matrix: about a third of the memory, and a query scans 4-bit codes instead of float32 rows.
    ANN_MIN_ROWS = 250_000
    ANN_MIN_ABSOLUTE = 256  # however low ANN_MIN_ROWS is set, the codes' k-means needs some vectors to train on
    LOAD_BATCH = 50_000

    def __init__(self, dim: int, coarse_dims: int | None = None) -> None:
        import numpy as np

        self._np = np
        self.dim = dim
        self.coarse_dims = coarse_dims if coarse_dims and coarse_dims < dim else None
        self.ids = np.empty(0, dtype=np.int64)
        self.matrix = np.empty((0, dim), dtype=np.float32)
        self._prefix: Any = None
        self._removed: set[int] = set()
        self._pending_ids: list[Any] = []
        self._pending_vecs: list[Any] = []
        self._lock = threading.Lock()
        self.ann: Any = None  # an ann.IvfIndex once the index is large

    def __len__(self) -> int:
        with self._lock:
            self._compact()  # may move the vectors into the compressed index
            return len(self.ann) if self.ann is not None else len(self.ids)

    @property
    def mode(self) -> str:
        """``pq4-scan+sq8``, ``coarse-to-fine`` or ``exact``: how :meth:`search` finds the nearest vectors."""
        with self._lock:
            self._compact()
            if self.ann is not None:
                return MODE_ANN
            return "coarse-to-fine" if self._prefix is not None else "exact"

    def load_store(self, store: Any) -> None:
        """Load the stored vectors of ``store`` (an :class:`~.store.IndexStore`) of this dimension.

        A large index is streamed into the compressed index batch by batch, so that its float32 vectors are never
        all in memory at once.
        """
        np = self._np
        size = self.dim * 4
        with store.reader() as conn:
            n = conn.execute("SELECT count(*) FROM chunks WHERE vector IS NOT NULL AND length(vector)=?",
                             (size,)).fetchone()[0]
        if n < max(self.ANN_MIN_ROWS, self.ANN_MIN_ABSOLUTE):
            self.load(*store.load_vectors(self.dim))
            return
        from plexor_folder_search.ann import IvfIndex, ivf_shape

        nlist, nprobe = ivf_shape(n)
        ann = IvfIndex(self.dim, nlist, nprobe)
        want = max(ann.TRAIN_MIN, nlist * ann.TRAIN_PER_LIST)
        step = max(1, n // want)
        with store.reader() as conn:
            rows = conn.execute(
                "SELECT vector FROM chunks WHERE vector IS NOT NULL AND length(vector)=? AND id % ? = 0",
                (size, step)).fetchall()
            if len(rows) < min(n, want) // 2:  # ids spaced so that few are multiples of step: the first ones instead
                rows = conn.execute("SELECT vector FROM chunks WHERE vector IS NOT NULL AND length(vector)=? LIMIT ?",
                                    (size, want)).fetchall()
        ann.train(np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), self.dim))
        del rows
        ann.reserve(n)
        last = -1
        while True:
            with store.reader() as conn:
                rows = conn.execute(
                    "SELECT id, vector FROM chunks WHERE id > ? AND vector IS NOT NULL AND length(vector)=? "
                    "ORDER BY id LIMIT ?", (last, size, self.LOAD_BATCH)).fetchall()
            if not rows:
                break
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            ann.add(ids, np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), self.dim))
            last = int(ids[-1])
        with self._lock:
            self._reset_exact()
            self.ann = ann
        release_freed_memory()

    def _reset_exact(self) -> None:
        np = self._np
        self.ids = np.empty(0, dtype=np.int64)
        self.matrix = np.empty((0, self.dim), dtype=np.float32)
        self._prefix = None
        self._removed.clear()
        self._pending_ids.clear()
        self._pending_vecs.clear()

    def _to_ann(self) -> None:
        """Move the float32 matrix into the compressed index (the matrix has reached ``ANN_MIN_ROWS`` rows)."""
        from plexor_folder_search.ann import IvfIndex, ivf_shape

        n = len(self.ids)
        nlist, nprobe = ivf_shape(n)
        ann = IvfIndex(self.dim, nlist, nprobe)
        step = max(1, n // max(ann.TRAIN_MIN, nlist * ann.TRAIN_PER_LIST))
        ann.train(self.matrix[::step])
        ann.reserve(n)
        for i in range(0, n, self.LOAD_BATCH):
            ann.add(self.ids[i : i + self.LOAD_BATCH], self.matrix[i : i + self.LOAD_BATCH])
        self._reset_exact()
        self.ann = ann
        release_freed_memory()

    def load(self, ids: Any, matrix: Any) -> None:
        np = self._np
        order = np.argsort(ids, kind="stable")
        with self._lock:
            self.ann = None
            self.ids = np.ascontiguousarray(ids[order])
            self.matrix = np.ascontiguousarray(matrix[order], dtype=np.float32)
            self._prefix = None
            self._removed.clear()
            self._pending_ids.clear()
            self._pending_vecs.clear()
            if len(self.ids) >= max(self.ANN_MIN_ROWS, self.ANN_MIN_ABSOLUTE):
                self._to_ann()
            else:
                self._build_prefix()

    def add(self, ids: Iterable[int], vectors: Any) -> None:
        np = self._np
        arr = np.fromiter(ids, dtype=np.int64)
        if not len(arr):
            return
        with self._lock:
            if self.ann is not None:
                self.ann.add(arr, vectors)
                return
            self._removed.difference_update(arr.tolist())
            self._pending_ids.append(arr)
            self._pending_vecs.append(np.asarray(vectors, dtype=np.float32).reshape(len(arr), self.dim))

    def remove(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        if not ids:
            return
        with self._lock:
            if self.ann is not None:
                self.ann.remove(ids)
                return
            if self._pending_ids:
                self._compact()
            self._removed.update(ids)

    def clear(self) -> None:
        self.load(self._np.empty(0, dtype=self._np.int64), self._np.empty((0, self.dim), dtype=self._np.float32))

    def _compact(self) -> None:
        np = self._np
        if not self._removed and not self._pending_ids:
            return
        ids, mat = self.ids, self.matrix
        if self._removed:
            keep = ~np.isin(ids, np.fromiter(self._removed, dtype=np.int64))
            ids, mat = ids[keep], mat[keep]
            self._removed.clear()
        if self._pending_ids:
            ids = np.concatenate([ids, *self._pending_ids])
            mat = np.concatenate([mat, *self._pending_vecs])
            self._pending_ids.clear()
            self._pending_vecs.clear()
            order = np.argsort(ids, kind="stable")
            ids, mat = ids[order], mat[order]
        self.ids, self.matrix = np.ascontiguousarray(ids), np.ascontiguousarray(mat)
        self._prefix = None
        if len(self.ids) >= max(self.ANN_MIN_ROWS, self.ANN_MIN_ABSOLUTE):
            self._to_ann()
        else:
            self._build_prefix()

    def _build_prefix(self) -> None:
        np = self._np
        if self.coarse_dims is None or len(self.ids) < self.COARSE_MIN_ROWS:
            self._prefix = None
            return
        pre = np.ascontiguousarray(self.matrix[:, : self.coarse_dims])
        norms = np.linalg.norm(pre, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        pre /= norms
        self._prefix = pre

    def snapshot(self) -> tuple[Any, Any]:
        """The current (ids, matrix), consistent with each other (compressed: the vectors decoded from 8-bit codes)."""
        with self._lock:
            self._compact()
            if self.ann is not None:
                ids = self.ann.ids.copy()
                return ids, self.ann.reconstruct(ids)
            return self.ids, self.matrix

    def search(self, query: Any, k: int) -> VectorHits:
        """The ``k`` chunks nearest to ``query`` (L2-normalised like the stored vectors), unordered.

        The result can also give the similarity of any other chunk (:meth:`VectorHits.more`).
        """
        np = self._np
        with self._lock:
            self._compact()  # may move the vectors into the compressed index
            ann = self.ann
            ids, mat, pre = self.ids, self.matrix, self._prefix
        q = np.asarray(query, dtype=np.float32)
        if ann is not None:
            found, sims = ann.search(q, k)
            return VectorHits(found, None, q, np.arange(len(found)), sims, None, ann)
        n = len(ids)
        k = max(0, min(k, n))
        full = None
        with single_threaded_blas():
            if k == 0:
                pos = np.empty(0, dtype=np.int64)
                sims = np.empty(0, dtype=np.float32)
            elif pre is not None:
                qp = q[: pre.shape[1]]
                qp = qp / max(float(np.linalg.norm(qp)), 1e-12)
                coarse = pre @ qp
                c = min(n, 4 * k)
                pos = np.argpartition(-coarse, c - 1)[:c] if c < n else np.arange(n)
                sims = mat[pos] @ q
                if k < len(pos):
                    sel = np.argpartition(-sims, k - 1)[:k]
                    pos, sims = pos[sel], sims[sel]
            else:
                full = mat @ q
                pos = np.argpartition(-full, k - 1)[:k] if k < n else np.arange(n)
                sims = full[pos]
        return VectorHits(ids, mat, q, pos, sims, full)

    def nbytes(self) -> int:
        if self.ann is not None:
            return int(self.ann.nbytes())
        extra = self._prefix.nbytes if self._prefix is not None else 0
        return int(self.matrix.nbytes + self.ids.nbytes + extra)


class VectorHits:
    """The nearest chunks found by :meth:`VectorIndex.search`: ``ids`` and their cosine ``sims``."""

    def __init__(self, all_ids: Any, matrix: Any, query: Any, pos: Any, sims: Any, full: Any, ann: Any = None) -> None:
        self._all_ids, self._matrix, self._query, self._pos, self._full = all_ids, matrix, query, pos, full
        self._ann = ann
        self.ids = all_ids[pos]
        self.sims = sims

    def more(self, chunk_ids: Any) -> tuple[Any, Any]:
        """``(ids, sims)`` of those ``chunk_ids`` that have a vector and are not among ``ids``."""
        import numpy as np

        if self._ann is not None:
            want = np.asarray(chunk_ids, dtype=np.int64)
            want = want[~np.isin(want, self.ids)]
            return self._ann.similarities(want, self._query)  # type: ignore[no-any-return]
        all_ids = self._all_ids
        want = np.asarray(chunk_ids, dtype=np.int64)
        if not len(want) or not len(all_ids):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        at = np.clip(np.searchsorted(all_ids, want), 0, len(all_ids) - 1)
        at = at[all_ids[at] == want]
        if len(self._pos):
            at = at[~np.isin(at, self._pos)]
        if self._full is not None:
            sims = self._full[at]
        else:
            with single_threaded_blas():
                sims = self._matrix[at] @ self._query
        return all_ids[at], sims


def release_freed_memory() -> None:
    """Give the memory freed while building a large index back to the system (glibc keeps it otherwise).

    Building the compressed index of 3M vectors frees batches of float32 rows and grown code arrays; glibc's
    ``malloc_trim`` returns about 120 MB of them (BENCH.md). Elsewhere this does nothing.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


_BLAS: Any = None


def single_threaded_blas() -> Any:
    """A context in which numpy's BLAS uses one thread.

    The keyword query runs on another core at the same time; a multi-threaded
    BLAS would spin on that core too, making both sides slower.
    """
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        except Exception:  # noqa: BLE001 - only a speed-up
            _BLAS = False
    if _BLAS is False:
        return contextlib.nullcontext()
    return _BLAS.limit(limits=1, user_api="blas")
