"""folder-search on a large index (built by bench/folder_search_corpus.py): latency, memory, vector recall.

1. Opens the index as the plugin does (``FolderService.open_as_is``): the vectors are streamed into the IVF
   index of 8-bit codes; the time and the resident memory after it are reported.
2. The keyword side's impact lists (keywords.py): the time to prepare every common word's list (once per
   index; skipped when the index already holds them), then query latency p50/p99, uncached, single client:
   hybrid ``search_content`` and BM25 alone, interleaved; the keyword side on queries of common terms against
   FTS5's exact OR-query of the same words (the anchor: what the keyword side did before); and how much of
   the exact OR-query's top 10 the keyword side finds, over the first ``--overlap`` queries.
3. Recall@10 of the vector side against an exact float32 scan of the same vectors (read after the memory
   figure is taken).
4. ``--scifact-forced DIR``: SciFact test nDCG@10 with the IVF index forced on (every size), against the
   exact scan, on an index folder_search_tool.py or folder_search.py left behind.

Run: nice -n 10 python bench/folder_search_scale.py --out /tmp/fs-scale [--scifact-forced /tmp/fs-tool/wordllama]
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

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_search import SCIFACT, load_qrels, ndcg10, rss_mb  # noqa: E402
from folder_search_ann import queries  # noqa: E402

from plexor import Settings  # noqa: E402
from plexor_folder_search.keywords import fts_or, query_words  # noqa: E402
from plexor_folder_search.service import FolderService  # noqa: E402
from plexor_folder_search.vectors import VectorIndex  # noqa: E402

COMMON = ["return value", "error", "the file", "self", "function", "string", "data", "use", "example", "default",
          "type", "name", "list", "value of the option", "this is"]


def pct(times: list[float], p: float) -> float:
    s = sorted(times)
    return s[min(len(s) - 1, int(len(s) * p))] * 1000


EXACT = "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT ?"


def _count(st: object, sql: str) -> int:
    with st.store.reader() as conn:  # type: ignore[attr-defined]
        return int(conn.execute(sql).fetchone()[0])


def scale(out: Path, n_queries: int, overlap: int) -> dict[str, object]:
    root = out / "root"
    t = time.perf_counter()
    svc = FolderService(Settings("folder-search", {"folders": [str(root)], "watch": False}, out / "data"))
    svc.open_as_is()
    st = next(iter(svc.folders.values()))
    res: dict[str, object] = {"open_s": round(time.perf_counter() - t, 1), "vector_mode": st.vectors.mode,
                              "vectors": len(st.vectors), "rss_after_open_mb": round(rss_mb())}
    with st.store.reader() as conn:
        res["chunks"] = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        res["files"] = conn.execute("SELECT count(*) FROM files").fetchone()[0]
    res["index_file_gb"] = round(st.store.size_bytes() / 1e9, 2)
    qs = queries()[:n_queries]
    side = st.engine.keywords
    t = time.perf_counter()
    prepared = side.prepare(duty=1.0)
    res["keywords_prepare"] = {"words": prepared, "seconds": round(time.perf_counter() - t, 1),
                               "lists_in_index": _count(st, "SELECT count(*) FROM term_impacts")}
    # Pass 1 meets each query's words for the first time (their document frequencies are counted once per
    # process); pass 2 asks the same queries again. Results are never served from the result cache.
    for label in ("first", "again"):
        hybrid, bm25 = [], []
        for q in qs:
            svc._cache.clear()
            st.engine._qvec.clear()
            t = time.perf_counter()
            svc.search_content(None, q, [], 10, None)
            hybrid.append(time.perf_counter() - t)
            t = time.perf_counter()
            st.engine.rank(q, [], cap=1000, weight=0.0)
            bm25.append(time.perf_counter() - t)
        res[f"hybrid_ms ({label})"] = {"p50": round(pct(hybrid, 0.5), 1), "p99": round(pct(hybrid, 0.99), 1)}
        res[f"bm25_ms ({label})"] = {"p50": round(pct(bm25, 0.5), 1), "p99": round(pct(bm25, 0.99), 1)}
        print(json.dumps(res), file=sys.stderr, flush=True)
    fts = {}
    with st.store.reader() as conn:
        for q in COMMON:
            t = time.perf_counter()
            st.engine._keyword(q)
            ours = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            conn.execute(EXACT, (fts_or(q), 1000)).fetchall()
            fts[q] = {"keyword_side_ms": round(ours, 1), "exact_or_query_ms": round((time.perf_counter() - t) * 1000, 1)}
    res["common_terms"] = fts
    overlaps = []
    with st.store.reader() as conn:
        for q in qs[:overlap]:
            words = query_words(q)
            if not words:
                continue
            exact = [r[0] for r in conn.execute(EXACT, (fts_or(q), 10)).fetchall()]
            if not exact:
                continue
            ids, scores = side.search(words, 1000)
            top = set(ids[np.argsort(-scores, kind="stable")[:10]].tolist())
            overlaps.append(len(top & set(exact)) / len(exact))
    res["keyword_top10_overlap_with_exact"] = {"queries": len(overlaps),
                                               "mean": round(statistics.mean(overlaps), 3) if overlaps else None,
                                               "all_10": sum(o == 1.0 for o in overlaps)}
    res["rss_after_queries_mb"] = round(rss_mb())
    # Recall of the vector side: the IVF index's 10 nearest against an exact scan of the stored float32 vectors.
    emb = st.engine.embedder
    qv = np.vstack([emb.embed_query(q) for q in qs])
    ids = []
    best = np.full((len(qs), 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(qs), 10), dtype=np.int64)
    conn = sqlite3.connect(f"file:{st.store.path}?mode=ro", uri=True)
    batch: list[tuple[int, bytes]] = []

    def fold() -> None:
        nonlocal best, best_ids
        if not batch:
            return
        bids = np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch))
        m = np.frombuffer(b"".join(r[1] for r in batch), dtype=np.float32).reshape(len(batch), -1)
        sims = qv @ m.T
        allsims = np.hstack([best, sims])
        allids = np.hstack([best_ids, np.broadcast_to(bids, (len(qs), len(bids)))])
        top = np.argpartition(-allsims, 9, axis=1)[:, :10]
        best = np.take_along_axis(allsims, top, 1)
        best_ids = np.take_along_axis(allids, top, 1)
        batch.clear()

    for row in conn.execute("SELECT id, vector FROM chunks WHERE vector IS NOT NULL"):
        batch.append(row)
        if len(batch) >= 50_000:
            fold()
    fold()
    conn.close()
    hits = 0
    for i, q in enumerate(qv):
        found = st.vectors.search(q, 10).ids
        ids.append(found)
        hits += len(set(found.tolist()) & set(best_ids[i].tolist()))
    res["vector_recall@10"] = round(hits / (10 * len(qs)), 4)
    res["queries"] = len(qs)
    svc.stop()
    return res


def scifact_forced(home: Path) -> dict[str, object]:
    """SciFact test nDCG@10 (documents, and the first 10 passages as the tool returns them), exact vs IVF forced."""
    data = home / "data" / "folder-search"
    folder = home.parent / "scifact-corpus"
    queries_ = {}
    with open(SCIFACT / "queries.jsonl") as fh:
        for line in fh:
            q = json.loads(line)
            queries_[q["_id"]] = q["text"]
    qrels = load_qrels("test")
    out: dict[str, object] = {}
    for label, threshold in (("exact", VectorIndex.ANN_MIN_ROWS), ("ivf forced", 0)):
        VectorIndex.ANN_MIN_ROWS = threshold
        svc = FolderService(Settings("folder-search", {"folders": [str(folder)], "watch": False}, data))
        svc.open_as_is()
        st = next(iter(svc.folders.values()))
        with st.store.reader() as conn:
            paths = dict(conn.execute("SELECT id, path FROM files").fetchall())
            owner = dict(conn.execute("SELECT id, file_id FROM chunks").fetchall())
        docs_scores, tool_scores = [], []
        for qid, rel in qrels.items():
            ranked = st.engine.rank_documents(queries_[qid], cap=10)
            docs_scores.append(ndcg10([paths[f][:-4] for f, _h in ranked], rel))
            hits = st.engine.rank(queries_[qid], [], cap=10)
            seen: list[str] = []
            for c in hits.ids.tolist():
                d = paths[owner[c]][:-4]
                if d not in seen:
                    seen.append(d)
            tool_scores.append(ndcg10(seen, rel))
        out[label] = {"mode": st.vectors.mode, "documents": round(statistics.mean(docs_scores), 4),
                      "first_10_passages": round(statistics.mean(tool_scores), 4)}
        svc.stop()
    VectorIndex.ANN_MIN_ROWS = 250_000
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/fs-scale"))
    ap.add_argument("--queries", type=int, default=220)
    ap.add_argument("--overlap", type=int, default=60, help="queries compared with the exact OR-query (seconds each)")
    ap.add_argument("--scifact-forced", type=Path, default=None, help="PLEXOR_HOME of folder_search_tool.py's run")
    ap.add_argument("--skip-scale", action="store_true")
    args = ap.parse_args()
    res: dict[str, object] = {}
    if not args.skip_scale:
        res["scale"] = scale(args.out, args.queries, args.overlap)
        print(json.dumps(res["scale"]), file=sys.stderr, flush=True)
    if args.scifact_forced:
        res["scifact_forced"] = scifact_forced(args.scifact_forced)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
