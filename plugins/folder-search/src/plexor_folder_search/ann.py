"""An inverted-file index of 8-bit quantised vectors (faiss ``IndexIVFScalarQuantizer``) for large folders.

Chosen by measurement against exact numpy scans, faiss HNSW and usearch (see BENCH.md): at millions of chunks
it keeps one byte per dimension (a quarter of float32), builds in minutes on one core and answers a query by
scanning only the ``nprobe`` lists nearest to it. Chunks are added and removed in place (a hash table maps
chunk ids to their codes), so the indexer's updates are seen by the next search without a rebuild.

faiss is imported when an index is built, never when this module loads.
"""

from __future__ import annotations

import math
import threading
from typing import Any

__all__ = ["IvfIndex", "ivf_shape"]


PROBE_FRACTION = 0.25


def ivf_shape(n: int, probe_fraction: float = PROBE_FRACTION) -> tuple[int, int]:
    """``(nlist, nprobe)`` for ``n`` vectors: about ``sqrt(n)`` lists, a quarter of them probed.

    Queries are short and chunks are averages of many tokens, so a query's nearest chunks are spread over many
    lists: on this machine's text, probing 5% of the lists found 70% of the true 10 nearest, 25% found 89%,
    50% found 96% (BENCH.md).
    """
    nlist = int(min(8192, max(16, round(math.sqrt(max(n, 1))))))
    nprobe = int(min(nlist, max(8, round(nlist * probe_fraction))))
    return nlist, nprobe


class IvfIndex:
    """Vectors by chunk id in a faiss IVF-SQ8 index; inner-product search (the vectors are L2-normalised)."""

    TRAIN_PER_LIST = 48  # k-means sample: this many vectors per list (faiss warns below 39)

    def __init__(self, dim: int, nlist: int, nprobe: int) -> None:
        import faiss as faiss_module
        import numpy as np

        faiss: Any = faiss_module  # its stubs lag behind the library (DirectMap, SearchParametersIVF(nprobe=))

        # One OpenMP thread (process-wide): the keyword query runs on the other core while a query is searched here.
        faiss.omp_set_num_threads(1)
        self._faiss: Any = faiss
        self._np = np
        self.dim, self.nlist, self.nprobe = dim, nlist, nprobe
        self._quantizer = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIVFScalarQuantizer(self._quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit,
                                                   faiss.METRIC_INNER_PRODUCT)
        self.index.cp.niter = 10
        # Each dimension's 8-bit range is the training sample's, widened by a tenth on either side, so that
        # vectors added later (new documents) are rarely clipped.
        self.index.sq.rangestat = faiss.ScalarQuantizer.RS_minmax
        self.index.sq.rangestat_arg = 0.1
        self.index.nprobe = nprobe
        self.ids = np.empty(0, dtype=np.int64)  # sorted: which chunks have a vector here
        self._lock = threading.Lock()

    @property
    def trained(self) -> bool:
        return bool(self.index.is_trained)

    def train(self, sample: Any) -> None:
        np = self._np
        with self._lock:
            self.index.train(np.ascontiguousarray(sample, dtype=np.float32))
            self.index.set_direct_map_type(self._faiss.DirectMap.Hashtable)

    def add(self, ids: Any, vectors: Any) -> None:
        """Add (or replace) the vectors of ``ids``."""
        np = self._np
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if not len(ids):
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        with self._lock:
            present = ids[np.isin(ids, self.ids, assume_unique=False)]
            if len(present):
                self.index.remove_ids(self._faiss.IDSelectorArray(len(present), self._faiss.swig_ptr(present)))
            self.index.add_with_ids(vecs, ids)
            self.ids = np.union1d(self.ids, ids)

    def remove(self, ids: Any) -> None:
        np = self._np
        ids = np.asarray(ids, dtype=np.int64)
        with self._lock:
            ids = np.ascontiguousarray(ids[np.isin(ids, self.ids)])
            if not len(ids):
                return
            self.index.remove_ids(self._faiss.IDSelectorArray(len(ids), self._faiss.swig_ptr(ids)))
            self.ids = np.setdiff1d(self.ids, ids, assume_unique=True)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def search(self, query: Any, k: int) -> tuple[Any, Any]:
        """The ``k`` nearest chunk ids and their (quantised) inner products, best first."""
        np = self._np
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        with self._lock:
            k = min(k, int(self.index.ntotal))
            if k <= 0:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
            # Probe enough lists to hold about 4 k vectors, however small the lists are.
            probe = min(self.nlist, max(self.nprobe, math.ceil(4 * k * self.nlist / max(1, int(self.index.ntotal)))))
            sims, ids = self.index.search(q, k, params=self._faiss.SearchParametersIVF(nprobe=probe))
        keep = ids[0] >= 0
        return ids[0][keep], sims[0][keep]

    def similarities(self, chunk_ids: Any, query: Any) -> tuple[Any, Any]:
        """``(ids, sims)`` for those of ``chunk_ids`` that have a vector here (vectors decoded from their codes)."""
        np = self._np
        want = np.unique(np.asarray(chunk_ids, dtype=np.int64))
        with self._lock:
            want = np.ascontiguousarray(want[np.isin(want, self.ids)])
            if not len(want):
                return want, np.empty(0, dtype=np.float32)
            vecs = self.index.reconstruct_batch(want)
        return want, vecs @ np.asarray(query, dtype=np.float32)

    def nbytes(self) -> int:
        """Memory held: the codes and ids in the lists, the centroids, the id map."""
        per_vector = int(self.index.code_size) + 8 + 16
        return int(self.index.ntotal) * per_vector + self.nlist * self.dim * 4 + int(self.ids.nbytes)
