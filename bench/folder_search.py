"""Benchmark of the folder-search plugin (run: python bench/folder_search.py [--skip-300k] [--tune]).

Measured side by side in one run:
1. indexing this machine's CPython standard library (.py .rst .txt, no site-packages), files/s end to end,
   default model (wordllama) beside keyword-only (no model) as the anchor;
2. query latency p50 on that index: hybrid vs BM25 alone; and on a synthesized 300,000-chunk index;
3. SciFact nDCG@10 on the 300 test queries: hybrid (weight tuned on the train judgements only, or the
   shipped default), BM25 alone and embedding alone;
4. resident memory.
Figures go to stdout; copy them to plugins/folder-search/BENCH.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from plexor import Settings
from plexor_folder_search.service import FolderService

SCIFACT = Path(os.environ.get("SCIFACT_DIR", Path(__file__).resolve().parents[2] / "shared" / "reference" / "scifact"))
QUERIES = [
    "parse command line arguments", "open a zip archive and list its members", "compute a hash of a file",
    "format a date as ISO 8601", "send an email over SMTP", "read a CSV file into rows", "thread pool executor",
    "regular expression named groups", "decode JSON from a string", "temporary directory cleanup",
    "unicode normalization of strings", "asynchronous sleep in event loop", "random sample without replacement",
    "deep copy of nested objects", "logging handler that rotates files", "http server request handler",
    "socket timeout configuration", "pickle protocol version", "decimal rounding modes", "heap queue priority",
]


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def settings(folder: Path, data: Path, model: str, weight: float | None = None) -> Settings:
    return Settings("folder-search", {
        "folders": [str(folder)], "model": model, "fusion_weight": weight, "max_file_size": 10 * 1024 * 1024,
        "exclude": [], "chunk_size": 1100, "chunk_overlap": 150, "watch": False, "debounce_ms": 300,
    }, data)


def index_once(folder: Path, data: Path, model: str, weight: float | None = None) -> tuple[FolderService, float, dict]:
    start = time.perf_counter()
    svc = FolderService(settings(folder, data, model, weight))
    svc.open()
    st = next(iter(svc.folders.values()))
    report = svc.index_folder(st)
    return svc, time.perf_counter() - start, report.as_dict()


def copy_stdlib(dest: Path) -> int:
    src = Path(sysconfig.get_paths()["stdlib"])
    n = 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = [d for d in dirnames if d != "site-packages" and d != "__pycache__"]
        for name in filenames:
            if name.endswith((".py", ".rst", ".txt")):
                p = Path(dirpath) / name
                if p.is_symlink():
                    continue
                out = dest / p.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, out)
                n += 1
    return n


def p50(times: list[float]) -> float:
    return statistics.median(times) * 1000


def time_queries(svc: FolderService, repeat: int = 5) -> tuple[float, float]:
    """p50 ms of (hybrid ``search_content`` uncached, BM25 alone), interleaved query by query.

    Interleaving gives both the same share of whatever else the machine is doing at the time.
    """
    st = next(iter(svc.folders.values()))
    hybrid, bm25 = [], []
    for _ in range(repeat):
        for q in QUERIES:
            svc._cache.clear()
            st.engine._qvec.clear()  # uncached: the query is embedded every time
            t = time.perf_counter()
            svc.search_content(None, q, [], 10, None)
            hybrid.append(time.perf_counter() - t)
            t = time.perf_counter()
            st.engine.rank(q, [], cap=1000, weight=0.0)
            bm25.append(time.perf_counter() - t)
    return p50(hybrid), p50(bm25)


def synthesize_300k(base: Path, out: Path, target: int = 300_000) -> int:
    """A 300k-chunk index made of copies of the stdlib index (text and vectors), FTS rebuilt."""
    shutil.copyfile(base, out)
    conn = sqlite3.connect(out)
    n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    max_file = conn.execute("SELECT max(id) FROM files").fetchone()[0]
    copies = math.ceil(target / n) - 1
    conn.execute("BEGIN")
    for k in range(1, copies + 1):
        conn.execute(
            "INSERT INTO files(id, path, size, mtime_ns, fingerprint, kind, title, outline, chunk_count, chars, indexed_at) "
            "SELECT id + ?, 'copy' || ? || '/' || path, size, mtime_ns, fingerprint || ?, kind, title, outline, chunk_count, chars, indexed_at "
            "FROM files WHERE id <= ?", (k * max_file, k, k, max_file))
        conn.execute(
            "INSERT INTO chunks(file_id, seq, start_line, end_line, start_char, end_char, heading, meta, body, vector) "
            "SELECT file_id + ?, seq, start_line, end_line, start_char, end_char, heading, meta, body, vector "
            "FROM chunks WHERE file_id <= ? LIMIT ?", (k * max_file, max_file, max(0, min(n, target - n * k))))
    conn.execute("INSERT INTO chunk_fts(chunk_fts) VALUES('rebuild')")
    conn.execute("COMMIT")
    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    return total


def ndcg10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / idcg if idcg else 0.0


def load_qrels(name: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    with open(SCIFACT / "qrels" / f"{name}.tsv") as fh:
        next(fh)
        for line in fh:
            q, d, s = line.split("\t")
            if int(s) > 0:
                out.setdefault(q, set()).add(d)
    return out


def scifact(work: Path, tune: bool, model: str = "wordllama") -> dict:
    folder = work / "scifact"
    if not folder.exists():
        folder.mkdir()
        with open(SCIFACT / "corpus.jsonl") as fh:
            for line in fh:
                doc = json.loads(line)
                (folder / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
    queries = {}
    with open(SCIFACT / "queries.jsonl") as fh:
        for line in fh:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    svc, secs, report = index_once(folder, work / f"data-scifact-{model}", model)
    if svc.embedder is None:
        svc.stop()
        raise SystemExit(f"model {model!r} is not available: {svc.embedder_error}")
    st = next(iter(svc.folders.values()))
    with st.store.reader() as conn:
        paths = dict(conn.execute("SELECT id, path FROM files").fetchall())

    def evaluate(qrels: dict[str, set[str]], weight: float) -> float:
        scores = []
        for qid, rel in qrels.items():
            ranked = st.engine.rank_documents(queries[qid], cap=10, weight=weight)
            scores.append(ndcg10([paths[fid][:-4] for fid, _h in ranked], rel))
        return sum(scores) / len(scores)

    out: dict = {"model": svc.embedder.name, "docs": report["indexed"], "chunks": report["chunks"],
                 "index_seconds": round(secs, 1)}
    weight = svc.weight  # the plugin's default for this model
    if tune:
        train = load_qrels("train")
        grid = {w / 20: round(evaluate(train, w / 20), 4) for w in range(0, 21)}
        weight = max(grid, key=lambda w: (grid[w], -abs(w - 0.5)))
        out["train_grid"] = grid
        out["tuned_weight"] = weight
    test = load_qrels("test")
    out["weight"] = weight
    out["hybrid"] = round(evaluate(test, weight), 4)
    out["bm25"] = round(evaluate(test, 0.0), 4)
    out["embedding"] = round(evaluate(test, 1.0), 4)
    svc.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-300k", action="store_true")
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-stdlib", action="store_true", help="skip indexing the stdlib and the query latencies")
    ap.add_argument("--tune", action="store_true", help="grid-search the fusion weight on SciFact train judgements")
    ap.add_argument("--scifact-models", default="wordllama",
                    help="comma-separated models for the SciFact section, e.g. wordllama,minilm (minilm needs the "
                         "[minilm] extra and takes several minutes to embed the corpus on 2 cores)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fs-bench-"))
    rows: list[tuple[str, str, str, str]] = []
    try:
        if not args.skip_stdlib:
            stdlib = work / "stdlib"
            nfiles = copy_stdlib(stdlib)
            mb = sum(p.stat().st_size for p in stdlib.rglob("*") if p.is_file()) / 1e6
            print(f"stdlib copy: {nfiles} files, {mb:.1f} MB", file=sys.stderr)
            svc_kw, t_kw, rep_kw = index_once(stdlib, work / "data-kw", "none")
            svc_kw.stop()
            svc, t_def, rep = index_once(stdlib, work / "data-def", "wordllama")
            st = next(iter(svc.folders.values()))
            rows.append(("index stdlib, files/s (higher is better)", f"{rep['indexed'] / t_def:.0f}",
                         f"{rep_kw['indexed'] / t_kw:.0f} (keyword-only, no model)", f"{(rep['indexed'] / t_def) / (rep_kw['indexed'] / t_kw):.2f}"))
            print(f"stdlib: {rep['indexed']} files, {rep['chunks']} chunks in {t_def:.1f} s (default) / {t_kw:.1f} s (keyword-only)", file=sys.stderr)
            hybrid, bm25 = time_queries(svc)
            rows.append(("hybrid query p50 ms, stdlib index (search_content)", f"{hybrid:.1f}", f"{bm25:.1f} (BM25 alone)", f"{hybrid / bm25:.2f}"))
            rss_after = rss_mb()
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            rows.append(("resident memory MB after stdlib index + queries", f"{rss_after:.0f}", f"peak {peak:.0f}", ""))
            index_path = st.store.path
            index_bytes = st.store.size_bytes()
            rows.append(("stdlib index size MB", f"{index_bytes / 1e6:.0f}", f"{mb:.0f} (source text)", f"{index_bytes / 1e6 / mb:.2f}"))
            svc.stop()
            if not args.skip_300k:
                big_dir = work / "data-big" / "indexes"
                big_dir.mkdir(parents=True)
                big_svc = FolderService(settings(stdlib, work / "data-big", "wordllama"))
                big_svc.open_specs()
                name = next(iter(big_svc.folders.values())).spec.index_name
                t = time.perf_counter()
                total = synthesize_300k(index_path, big_dir / name)
                print(f"synthesized {total} chunks in {time.perf_counter() - t:.0f} s", file=sys.stderr)
                big_svc.open_as_is()
                h, b = time_queries(big_svc)
                rows.append((f"hybrid query p50 ms, {total // 1000}k-chunk index", f"{h:.1f}", f"{b:.1f} (BM25 alone)", f"{h / b:.2f}"))
                rows.append(("resident memory MB with the 300k index loaded", f"{rss_mb():.0f}", "", ""))
                big_svc.stop()
        if not args.skip_scifact and SCIFACT.exists():
            for model in [m.strip() for m in args.scifact_models.split(",") if m.strip()]:
                sf = scifact(work, args.tune, model)
                print(json.dumps(sf), file=sys.stderr)
                rows.append((f"SciFact nDCG@10, 300 test queries, {model} (hybrid, w={sf['weight']})", f"{sf['hybrid']:.4f}",
                             f"{sf['bm25']:.4f} (BM25 alone)", f"{sf['hybrid'] / sf['bm25']:.3f}"))
                rows.append((f"SciFact nDCG@10, embedding ({sf['model']}) alone", f"{sf['embedding']:.4f}", "", ""))
                rows.append((f"SciFact index, {model}: chunks/s (end to end)", f"{sf['chunks'] / sf['index_seconds']:.0f}",
                             f"{sf['chunks']} chunks", ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'plexor':>10}  {'anchor':<34} ratio")
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:>10}  {r[2]:<34} {r[3]}")


if __name__ == "__main__":
    main()
