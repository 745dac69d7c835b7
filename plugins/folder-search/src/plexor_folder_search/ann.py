"""The vector index of large folders: a fast scan of 4-bit codes picks candidates, 8-bit codes rescore them.

Chosen by measurement on 3 million chunks of real text (BENCH.md, "Large folders: the vector index"). wordllama's
short-query vectors sit far from the averaged chunk vectors and the nearest chunks of a query are spread over
the whole collection, so probing a subset of inverted lists loses them (a quarter of the lists found 87% of the
true 10 nearest, half of them 93%). Scanning every vector is affordable with codes small enough: each vector is
kept twice,

* as a product-quantised code of 4 bits per pair of dimensions (faiss ``IndexIVFPQFastScan``: a few lists, all of
  them probed; the lists only make the codes encode the residual from a nearby centroid), scanned with SIMD
  lookups to pick the ``CANDIDATES`` best (at least four times the number asked for);
* as an 8-bit scalar-quantised code (faiss ``IndexIVFScalarQuantizer`` with one list and a hash-table id map),
  which rescores those candidates almost exactly (cosine error ≈ 0.002).

Chunks are added, removed and replaced in place in both, so the indexer's updates are seen by the next search
without a rebuild. faiss is imported when an index is built, never when this module loads.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["IvfIndex", "ivf_shape", "pq_subquantizers"]

#: Vectors per inverted list, about: the lists only give the 4-bit codes a nearby centroid to encode from.
LIST_SIZE = 50_000
MAX_LISTS = 64


def ivf_shape(n: int) -> tuple[int, int]:
    """``(nlist, nprobe)`` for ``n`` vectors: one list per ``LIST_SIZE`` vectors (at most 64), all of them probed."""
    nlist = int(min(MAX_LISTS, max(1, n // LIST_SIZE)))
    return nlist, nlist


def pq_subquantizers(dim: int) -> int:
    """Sub-vectors of the 4-bit code: one per pair of dimensions (``dim / 2``; ``dim`` itself if ``dim`` is odd)."""
    if dim <= 0:
        raise ValueError(f"vector dimension must be positive, got {dim}")
    return dim // 2 if dim % 2 == 0 else dim


class IvfIndex:
    """Vectors by chunk id: 4-bit fast-scan codes to find candidates, 8-bit codes to rescore them (inner product)."""

    TRAIN_PER_LIST = 1024  # training sample: this many vectors per list, and at least TRAIN_MIN
    TRAIN_MIN = 65_536
    #: Candidates taken from the 4-bit scan: at least this many, and at least 4 × the number asked for.
    CANDIDATES = 2000

    def __init__(self, dim: int, nlist: int, nprobe: int | None = None) -> None:
        import faiss as faiss_module
        import numpy as np

        faiss: Any = faiss_module  # its stubs lag behind the library (DirectMap, SearchParametersIVF(nprobe=))

        # One OpenMP thread (process-wide): the keyword query runs on the other core while a query is searched here.
        faiss.omp_set_num_threads(1)
        self._faiss: Any = faiss
        self._np = np
        self.dim, self.nlist = dim, nlist
        self.nprobe = nlist if nprobe is None else nprobe
        m = pq_subquantizers(dim)
        self._coarse = faiss.IndexFlatIP(dim)
        self.scan = faiss.IndexIVFPQFastScan(self._coarse, dim, nlist, m, 4, faiss.METRIC_INNER_PRODUCT)
        self.scan.cp.niter = 10
        self._one = faiss.IndexFlatIP(dim)
        self.codes = faiss.IndexIVFScalarQuantizer(self._one, dim, 1, faiss.ScalarQuantizer.QT_8bit,
                                                   faiss.METRIC_INNER_PRODUCT)
        # Each dimension's 8-bit range is the training sample's, widened by a tenth on either side, so that
        # vectors added later (new documents) are rarely clipped.
        self.codes.sq.rangestat = faiss.ScalarQuantizer.RS_minmax
        self.codes.sq.rangestat_arg = 0.1
        self.ids = np.empty(0, dtype=np.int64)  # sorted: which chunks have a vector here
        self._lock = threading.Lock()

    @property
    def trained(self) -> bool:
        return bool(self.scan.is_trained and self.codes.is_trained)

    def train(self, sample: Any) -> None:
        np = self._np
        sample = np.ascontiguousarray(sample, dtype=np.float32).reshape(-1, self.dim)
        if len(sample) < max(self.nlist * 39, 64):
            raise ValueError(f"training the vector index needs at least {max(self.nlist * 39, 64)} vectors for "
                             f"{self.nlist} lists, got {len(sample)}; keep small indexes exact (VectorIndex)")
        with self._lock:
            self.scan.train(sample)
            self.codes.train(sample)
            self.codes.set_direct_map_type(self._faiss.DirectMap.Hashtable)

    def reserve(self, n: int) -> None:
        """Make room for ``n`` 8-bit codes at once (before adding them in batches): the one array that holds them
        then never grows by doubling, which would copy it and leave the old copy in the heap (3M vectors: peak
        RSS 1.6 GB while building)."""
        lists = self._faiss.downcast_InvertedLists(self.codes.invlists)
        with self._lock:
            have = int(lists.list_size(0))
            if n > have:
                lists.resize(0, n)  # std::vector: capacity n, kept when the size goes back
                lists.resize(0, have)

    def _present(self, ids: Any) -> Any:
        """Which of ``ids`` have a vector here: a boolean mask (binary search in the sorted ``self.ids``, O(m log n);
        ``numpy.isin`` would sort all n ids on every call)."""
        np = self._np
        if not len(self.ids):
            return np.zeros(len(ids), dtype=bool)
        at = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return self.ids[at] == ids

    def _drop(self, ids: Any) -> None:
        """Remove ``ids`` (all present) from both code sets; the lock is held."""
        faiss = self._faiss
        self.codes.remove_ids(faiss.IDSelectorArray(len(ids), faiss.swig_ptr(ids)))
        # The fast-scan lists have no id map: removal scans them, testing each id against a hash set.
        self.scan.remove_ids(faiss.IDSelectorBatch(len(ids), faiss.swig_ptr(ids)))

    def add(self, ids: Any, vectors: Any) -> None:
        """Add (or replace) the vectors of ``ids``."""
        np = self._np
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if not len(ids):
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.size != len(ids) * self.dim:
            raise ValueError(f"{len(ids)} ids need {len(ids)} vectors of {self.dim} dimensions, got shape {vecs.shape}")
        vecs = vecs.reshape(len(ids), self.dim)
        if len(np.unique(ids)) != len(ids):
            raise ValueError("the same chunk id twice in one add(); pass each chunk once")
        with self._lock:
            mask = self._present(ids)
            if mask.any():
                self._drop(np.ascontiguousarray(ids[mask]))
            self.scan.add_with_ids(vecs, ids)
            self.codes.add_with_ids(vecs, ids)
            new = np.sort(ids[~mask])
            self.ids = np.insert(self.ids, np.searchsorted(self.ids, new), new)

    def remove(self, ids: Any) -> None:
        np = self._np
        ids = np.asarray(ids, dtype=np.int64)
        with self._lock:
            ids = np.unique(ids)
            ids = np.ascontiguousarray(ids[self._present(ids)])
            if not len(ids):
                return
            self._drop(ids)
            self.ids = np.delete(self.ids, np.searchsorted(self.ids, ids))

    def __len__(self) -> int:
        return int(self.codes.ntotal)

    def search(self, query: Any, k: int) -> tuple[Any, Any]:
        """The ``k`` nearest chunk ids and their (8-bit) inner products, best first."""
        np = self._np
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        with self._lock:
            n = int(self.codes.ntotal)
            k = min(k, n)
            if k <= 0:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            wanted = min(n, max(self.CANDIDATES, 4 * k))
            _d, found = self.scan.search(q, wanted, params=self._faiss.SearchParametersIVF(nprobe=self.nprobe))
            cand = found[0][found[0] >= 0]
            sims = self.codes.reconstruct_batch(cand) @ q[0]
        if k < len(cand):
            top = np.argpartition(-sims, k - 1)[:k]
            cand, sims = cand[top], sims[top]
        order = np.argsort(-sims, kind="stable")
        return cand[order], sims[order]

    def similarities(self, chunk_ids: Any, query: Any) -> tuple[Any, Any]:
        """``(ids, sims)`` for those of ``chunk_ids`` that have a vector here (vectors decoded from their codes)."""
        np = self._np
        want = np.unique(np.asarray(chunk_ids, dtype=np.int64))
        with self._lock:
            want = np.ascontiguousarray(want[self._present(want)])
            if not len(want):
                return want, np.empty(0, dtype=np.float32)
            vecs = self.codes.reconstruct_batch(want)
        return want, vecs @ np.asarray(query, dtype=np.float32)

    def reconstruct(self, ids: Any) -> Any:
        """The vectors of ``ids`` (all present) decoded from their 8-bit codes."""
        np = self._np
        with self._lock:
            return self.codes.reconstruct_batch(np.ascontiguousarray(ids, dtype=np.int64))

    def nbytes(self) -> int:
        """Memory held: both codes of each vector with its id, the hash-table id map, the centroids, ``ids``."""
        per_vector = int(self.scan.code_size) + int(self.codes.code_size) + 2 * 8 + 16
        return int(self.codes.ntotal) * per_vector + (self.nlist + 1) * self.dim * 4 + int(self.ids.nbytes)
