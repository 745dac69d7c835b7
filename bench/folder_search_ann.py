"""Vector index candidates for large folder-search indexes, side by side on real chunk vectors.

Reads the wordllama vectors of an index built by bench/folder_search_corpus.py (once, into a .npy cache), embeds
real queries (the stdlib bench queries and every SciFact question, with the plugin's query embedding) and measures
for each candidate: build time, memory (RSS growth), single-threaded query p50/p99 for the 10 and the 1,000
nearest, recall@10 against an exact float32 scan (ties counted: a hit scoring at least the 10th exact similarity is
right) and, for k = 1,000, recall@1,000. Candidates: exact numpy float32 (the anchor, timed in the same run), the
plugin's index (ann.IvfIndex: 4-bit fast-scan codes of every vector, candidates rescored from 8-bit codes), faiss
IVF-SQ8 with a quarter and a half of ~sqrt(n) lists probed (the plugin's previous index), and fast-scan codes with
fewer lists probed or with 4 dimensions per sub-vector.

Run: nice -n 10 python bench/folder_search_ann.py --index /var/tmp/fs-scale/data/indexes/<name>.sqlite3
     [--cache /var/tmp/ann] [--skip-others] [--rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_search import QUERIES, SCIFACT  # noqa: E402

from plexor_folder_search.ann import IvfIndex, ivf_shape  # noqa: E402
from plexor_folder_search.embed import load_embedder  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_vectors(index: Path, cache: Path, dim: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(ids, float32 matrix) of every chunk vector of ``index``, cached as .npy files under ``cache``."""
    ids_file, vec_file = cache / "ids.npy", cache / "vecs.npy"
    if not vec_file.exists():
        cache.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        n = conn.execute("SELECT count(*) FROM chunks WHERE vector IS NOT NULL AND length(vector)=?",
                         (dim * 4,)).fetchone()[0]
        ids = np.empty(n, dtype=np.int64)
        mat = np.lib.format.open_memmap(vec_file, mode="w+", dtype=np.float32, shape=(n, dim))
        i = 0
        for cid, blob in conn.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL AND length(vector)=? "
                                      "ORDER BY id", (dim * 4,)):
            if i == n:
                break
            ids[i], mat[i] = cid, np.frombuffer(blob, dtype=np.float32)
            i += 1
        conn.close()
        mat.flush()
        del mat
        np.save(ids_file, ids[:i])
    return np.load(ids_file), np.load(vec_file)


def queries() -> list[str]:
    """220 real query texts: the stdlib bench queries and every fifth SciFact question (bench/folder_search_scale.py)."""
    out = list(QUERIES)
    with open(SCIFACT / "queries.jsonl") as fh:
        for i, line in enumerate(fh):
            if i % 5 == 0:
                out.append(json.loads(line)["text"])
    return out[:220]


def query_vectors(cache: Path) -> np.ndarray:
    file = cache / "queries.npy"
    if not file.exists():
        emb = load_embedder("wordllama")
        assert emb is not None
        texts = list(QUERIES)
        with open(SCIFACT / "queries.jsonl") as fh:
            texts += [json.loads(line)["text"] for line in fh]
        np.save(file, np.stack([np.asarray(emb.embed_query(t), dtype=np.float32).reshape(-1) for t in texts]))
    return np.asarray(np.load(file))


def timed(fn: Callable[[np.ndarray], np.ndarray], qs: np.ndarray) -> tuple[list[np.ndarray], float, float]:
    res, times = [], []
    for q in qs:
        t = time.perf_counter()
        res.append(fn(q))
        times.append(time.perf_counter() - t)
    times.sort()
    return res, statistics.median(times) * 1000, times[max(0, int(len(times) * 0.99) - 1)] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--cache", type=Path, default=Path("/var/tmp/ann"))
    ap.add_argument("--skip-others", action="store_true", help="only the anchor and the plugin's index")
    ap.add_argument("--rows", type=int, default=None, help="only the first N vectors")
    args = ap.parse_args()
    import faiss as faiss_module
    from threadpoolctl import threadpool_limits

    faiss: Any = faiss_module  # its stubs lag behind the library (SearchParametersIVF(nprobe=))

    qs = query_vectors(args.cache)
    ids, mat = load_vectors(args.index, args.cache)
    if args.rows:
        ids, mat = ids[: args.rows], np.ascontiguousarray(mat[: args.rows])
    n = len(ids)
    pos_of_id = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    pos_of_id[ids] = np.arange(n)
    print(f"{n} vectors, {mat.nbytes / 1e6:.0f} MB float32; {len(qs)} queries", file=sys.stderr)
    faiss.omp_set_num_threads(2)  # the ground truth only
    exact_index = faiss.IndexFlatIP(mat.shape[1])
    exact_index.add(mat)
    truth_sims, _truth = exact_index.search(qs, 1000)
    del exact_index
    faiss.omp_set_num_threads(1)
    threadpool_limits(1)

    def recall(found: list[np.ndarray], k: int) -> float:
        hits = 0
        for f, q, d in zip(found, qs, truth_sims, strict=True):
            sims = mat[pos_of_id[np.asarray(f[:k], dtype=np.int64)]] @ q
            hits += min(k, int(np.sum(sims >= d[k - 1] - 1e-5)))
        return hits / (k * len(qs))

    rows: list[dict[str, object]] = []

    def report(name: str, build_s: float, mem_mb: float, fn: Callable[[np.ndarray, int], np.ndarray],
               anchor_qs: int | None = None) -> None:
        q_sel = qs if anchor_qs is None else qs[:: max(1, len(qs) // anchor_qs)]
        row: dict[str, object] = {"candidate": name, "rows": n, "build_s": round(build_s, 1), "memory_mb": round(mem_mb)}
        for k in (10, 1000):
            def one(q: np.ndarray, k: int = k) -> np.ndarray:
                return fn(q, k)

            found, p50, p99 = timed(one, q_sel)
            row[f"p50_ms_k{k}"], row[f"p99_ms_k{k}"] = round(p50, 2), round(p99, 2)
            if anchor_qs is None:
                row[f"recall@10_k{k}"] = round(recall(found, 10), 4)
                if k == 1000:
                    row["recall@1000"] = round(recall(found, 1000), 4)
        row["load"] = os.getloadavg()[0]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    def exact(q: np.ndarray, k: int) -> np.ndarray:
        s = mat @ q
        top = np.argpartition(-s, k - 1)[:k]
        return ids[top[np.argsort(-s[top])]]  # type: ignore[no-any-return]

    report("exact numpy float32 (anchor; 60 queries, recall 1 by definition)", 0.0, mat.nbytes / 1e6, exact, 60)

    # The plugin's index, built as VectorIndex.load_store builds it: a training sample, then 50k-row batches.
    nlist, _ = ivf_shape(n)
    before, t = rss_mb(), time.perf_counter()
    ann = IvfIndex(mat.shape[1], nlist)
    ann.train(mat[:: max(1, n // max(ann.TRAIN_MIN, nlist * ann.TRAIN_PER_LIST))])
    for s in range(0, n, 50_000):
        ann.add(ids[s : s + 50_000], mat[s : s + 50_000])
    build, mem = time.perf_counter() - t, rss_mb() - before
    report(f"plugin: IVF{nlist}-PQ{ann.scan.pq.M}x4fs all probed, {ann.CANDIDATES}+ rescored from SQ8", build, mem,
           lambda q, k: ann.search(q, k)[0])  # noqa: F821 - ann is deleted only below
    rng = np.random.default_rng(0)
    gone = rng.choice(ids, 1000, replace=False)
    t = time.perf_counter()
    ann.remove(gone[:100])
    remove_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    ann.add(gone[:100], mat[pos_of_id[gone[:100]]])
    t2 = time.perf_counter()
    ann.add(gone[100:1000], mat[pos_of_id[gone[100:1000]]])  # replacing 900 in place
    updates = {"remove_100_ms": round(remove_ms, 1), "add_100_ms": round((t2 - t) * 1000, 1),
               "replace_900_ms": round((time.perf_counter() - t2) * 1000, 1), "nbytes_mb": round(ann.nbytes() / 1e6)}
    print(json.dumps(updates), file=sys.stderr, flush=True)
    del ann
    if not args.skip_others:
        positions = np.arange(n, dtype=np.int64)

        def faiss_candidate(name: str, spec: str, probes: list[int], rescore: bool) -> None:
            before, t = rss_mb(), time.perf_counter()
            index = faiss.index_factory(mat.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
            index.train(mat[:: max(1, n // 65_536)])
            for s in range(0, n, 100_000):
                index.add_with_ids(mat[s : s + 100_000], positions[s : s + 100_000])
            build, mem = time.perf_counter() - t, rss_mb() - before
            for nprobe in probes:
                params = faiss.SearchParametersIVF(nprobe=nprobe)

                def fn(q: np.ndarray, k: int, params: object = params) -> np.ndarray:
                    want = max(2000, 4 * k) if rescore else k
                    _d, lab = index.search(q.reshape(1, -1), want, params=params)
                    lab = lab[0][lab[0] >= 0]
                    if rescore:  # exact float32 rescoring: the ceiling of any rescoring
                        s = mat[lab] @ q
                        top = np.argpartition(-s, k - 1)[:k]
                        lab = lab[top[np.argsort(-s[top])]]
                    return ids[lab]  # type: ignore[no-any-return]

                report(f"{name}, nprobe {nprobe}", build, mem, fn)
            del index

        lists = int(round(np.sqrt(n)))
        faiss_candidate(f"faiss IVF{lists}-SQ8 (the plugin's previous index)", f"IVF{lists},SQ8",
                        [lists // 4, lists // 2], False)
        faiss_candidate("faiss IVF1024-PQ64x4fs, 2000+ rescored exactly", "IVF1024,PQ64x4fs", [256, 512, 1024], True)
    print(json.dumps({"rows": n, "results": rows, "updates": updates}, indent=1))


if __name__ == "__main__":
    main()
