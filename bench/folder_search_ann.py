"""Vector index candidates for large folder-search indexes, side by side on real chunk vectors.

Reads the wordllama vectors of an index built by bench/folder_search_corpus.py, embeds real queries (SciFact's
test questions and the stdlib bench queries) and measures for each candidate: build time, memory (RSS growth and
the index's own size), single-threaded query p50/p99 for the 10 and the 1,000 nearest, and recall@10 against an
exact float32 scan. Candidates: exact numpy (the anchor), the plugin's coarse-to-fine numpy scan, faiss IVF with
8-bit scalar quantisation (the plugin's choice, several nprobe), faiss HNSW over 8-bit codes, usearch HNSW with
int8, hnswlib HNSW (float32 only).

Run: nice -n 10 python bench/folder_search_ann.py --index /tmp/fs-scale/data/indexes/<name>.sqlite3 [--rows N]
     [--hnsw-rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_search import QUERIES, SCIFACT  # noqa: E402

from plexor_folder_search.ann import IvfIndex, ivf_shape  # noqa: E402
from plexor_folder_search.embed import load_embedder  # noqa: E402
from plexor_folder_search.vectors import VectorIndex  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load(index: Path, rows: int, dim: int = 256) -> tuple[np.ndarray, np.ndarray]:
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    ids = np.empty(rows, dtype=np.int64)
    mat = np.empty((rows, dim), dtype=np.float32)
    n = 0
    for cid, blob in conn.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL ORDER BY id LIMIT ?", (rows,)):
        ids[n] = cid
        mat[n] = np.frombuffer(blob, dtype=np.float32)
        n += 1
    conn.close()
    return ids[:n], mat[:n]


def queries() -> list[str]:
    out = list(QUERIES)
    with open(SCIFACT / "queries.jsonl") as fh:
        for i, line in enumerate(fh):
            if i % 5 == 0:
                out.append(json.loads(line)["text"])
    return out[:220]


def timed(fn, qs: np.ndarray) -> tuple[list[list[int]], float, float]:
    res, times = [], []
    for q in qs:
        t = time.perf_counter()
        res.append(list(fn(q)))
        times.append(time.perf_counter() - t)
    times.sort()
    return res, statistics.median(times) * 1000, times[int(len(times) * 0.99) - 1] * 1000


def by_similarity(hits: object) -> np.ndarray:
    return hits.ids[np.argsort(-hits.sims)]  # type: ignore[attr-defined,no-any-return]


def recall(found: list[list[int]], truth: list[list[int]]) -> float:
    return sum(len(set(f[:10]) & set(t)) for f, t in zip(found, truth, strict=True)) / (10 * len(truth))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=3_100_000)
    ap.add_argument("--hnsw-rows", type=int, default=100_000, help="rows for the HNSW candidates (slow to build)")
    ap.add_argument("--skip-hnsw", action="store_true")
    args = ap.parse_args()
    emb = load_embedder("wordllama")
    assert emb is not None
    qs = emb.embed(queries())
    base = rss_mb()
    ids, mat = load(args.index, args.rows)
    n = len(ids)
    print(f"{n} vectors, {mat.nbytes / 1e6:.0f} MB float32; {len(qs)} queries", file=sys.stderr)
    rows: list[dict[str, object]] = []

    def report(name: str, rows_used: int, build_s: float, mem_mb: float, fn10, truth, fn1000=None) -> None:
        found, p50, p99 = timed(fn10, qs)
        row: dict[str, object] = {"candidate": name, "rows": rows_used, "build_s": round(build_s, 1),
                                  "memory_mb": round(mem_mb), "p50_ms_k10": round(p50, 2), "p99_ms_k10": round(p99, 2),
                                  "recall@10": round(recall(found, truth), 4)}
        if fn1000 is not None:
            _f, p50k, p99k = timed(fn1000, qs)
            row["p50_ms_k1000"], row["p99_ms_k1000"] = round(p50k, 2), round(p99k, 2)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    def exact_fn(m: np.ndarray, i: np.ndarray, k: int):
        def f(q: np.ndarray) -> np.ndarray:
            s = m @ q
            top = np.argpartition(-s, k - 1)[:k]
            return i[top[np.argsort(-s[top])]]
        return f

    for label, m, i in (("full", mat, ids), ("hnsw", mat[: args.hnsw_rows], ids[: args.hnsw_rows])):
        if label == "hnsw" and (args.skip_hnsw or len(i) == n):
            continue
        truth = [list(exact_fn(m, i, 10)(q)) for q in qs]
        report("exact numpy float32 (anchor)", len(i), 0.0, m.nbytes / 1e6, exact_fn(m, i, 10), truth, exact_fn(m, i, 1000))
        vi = VectorIndex(256, coarse_dims=64)
        VectorIndex.ANN_MIN_ROWS = 1 << 62  # this row is the coarse-to-fine scan, whatever the size
        before, t = rss_mb(), time.perf_counter()
        vi.load(i, m)
        bt, mem = time.perf_counter() - t, rss_mb() - before
        report("numpy coarse-to-fine (64-d prefix, then 256-d)", len(i), bt, mem + m.nbytes / 1e6,
               lambda q, vi=vi: by_similarity(vi.search(q, 10)), truth,
               lambda q, vi=vi: vi.search(q, 1000).ids)
        del vi
        nlist, nprobe0 = ivf_shape(len(i))
        before, t = rss_mb(), time.perf_counter()
        ivf = IvfIndex(256, nlist, nprobe0)
        step = max(1, len(i) // (nlist * ivf.TRAIN_PER_LIST))
        ivf.train(m[::step])
        for s in range(0, len(i), 50_000):
            ivf.add(i[s : s + 50_000], m[s : s + 50_000])
        bt, mem = time.perf_counter() - t, rss_mb() - before
        for nprobe in sorted({max(4, nprobe0 // 4), max(4, nprobe0 // 2), nprobe0, nprobe0 * 2}):
            ivf.nprobe = nprobe
            report(f"faiss IVF{nlist}-SQ8, nprobe {nprobe}", len(i), bt, max(mem, ivf.nbytes() / 1e6),
                   lambda q, ivf=ivf: ivf.search(q, 10)[0], truth, lambda q, ivf=ivf: ivf.search(q, 1000)[0])
        del ivf
        if label != "hnsw":
            continue
        import faiss

        before, t = rss_mb(), time.perf_counter()
        h = faiss.IndexHNSWSQ(256, faiss.ScalarQuantizer.QT_8bit, 32, faiss.METRIC_INNER_PRODUCT)
        h.train(m[:: max(1, len(i) // 50_000)])
        h.add(m)
        bt, mem = time.perf_counter() - t, rss_mb() - before
        for ef in (64, 128):
            h.hnsw.efSearch = ef
            report(f"faiss HNSW32-SQ8, efSearch {ef}", len(i), bt, mem,
                   lambda q, h=h, i=i: i[h.search(q.reshape(1, -1), 10)[1][0]], truth)
        del h
        from usearch.index import Index

        before, t = rss_mb(), time.perf_counter()
        u = Index(ndim=256, metric="ip", dtype="i8", connectivity=16)
        u.add(i, m, threads=1)
        bt, mem = time.perf_counter() - t, rss_mb() - before
        report("usearch HNSW16-i8", len(i), bt, mem, lambda q, u=u: u.search(q, 10, threads=1).keys, truth)
        del u
        import hnswlib

        before, t = rss_mb(), time.perf_counter()
        hl = hnswlib.Index(space="ip", dim=256)
        hl.init_index(max_elements=len(i), M=16, ef_construction=100)
        hl.set_num_threads(1)
        hl.add_items(m, i)
        hl.set_ef(64)
        bt, mem = time.perf_counter() - t, rss_mb() - before
        report("hnswlib HNSW16 float32, ef 64", len(i), bt, mem, lambda q, hl=hl: hl.knn_query(q, 10)[0][0], truth)
        del hl
    print(json.dumps({"rows": n, "base_rss_mb": round(base), "results": rows}, indent=1))


if __name__ == "__main__":
    main()
