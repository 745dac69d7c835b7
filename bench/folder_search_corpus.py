"""Build a folder-search index of millions of chunks from real text on this machine (for bench/folder_search_scale.py).

What goes in: every text file (documentation, source code, HTML) under the ROOTS below whose kind the plugin
recognises as text, code, Markdown, reStructuredText or HTML, at most 2 MB, each distinct content once (files are
deduplicated by their BLAKE2b digest, so the several copies of a standard library count once). Files are taken
round-robin from the roots, in sorted order within each, until the index has ``--chunks`` chunks. No text is
repeated or synthesised.

How: the plugin's own extraction (``extract``), chunking (``chunk_text``), embedding text (``embed_text``),
embedder (wordllama) and ``IndexStore.insert_file`` - the steps of its indexer, without the watcher and without
holding the vectors in memory. The chunk size is a plugin setting; 500 characters (overlap 80) is used so that
the text on this machine reaches three million chunks.

Run (about an hour on one core): nice -n 10 python bench/folder_search_corpus.py --out /tmp/fs-scale
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the tokenizer's thread pool: one core, the machine is shared
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from plexor import Settings  # noqa: E402
from plexor_folder_search.batches import EMBED_TEXT_VERSION, embed_text  # noqa: E402
from plexor_folder_search.chunking import chunk_text, language_of  # noqa: E402
from plexor_folder_search.documents import ExtractError, Unsupported  # noqa: E402
from plexor_folder_search.embed import load_embedder  # noqa: E402
from plexor_folder_search.extract import extract, kind_of  # noqa: E402
from plexor_folder_search.service import FolderService  # noqa: E402
from plexor_folder_search.store import IndexStore  # noqa: E402

ROOTS = [
    "/root/.rustup",  # Rust toolchains: the HTML books and API docs, the standard library's source
    "/root/.pyenv",  # Python installs: standard libraries, site-packages
    "/usr/lib/google-cloud-sdk",  # Python source and docs
    "/usr/lib/python3", "/usr/lib/python3.11", "/usr/share/doc", "/usr/include", "/usr/local/lib",
    "/work/venv/lib", "/usr/lib/node_modules", "/root/.cargo",
    # Debian's linux-source-6.1 package (the kernel's C source and its Documentation/ tree, 1.5 GB), unpacked:
    #   apt-get install linux-source-6.1 && tar xf /usr/src/linux-source-6.1.tar.xz -C /var/tmp/corpus
    "/var/tmp/corpus/linux-source-6.1",
]
KINDS = {"text", "code", "markdown", "rst", "html"}
MAX_BYTES = 2 * 1024 * 1024


def walk(root: str) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".git")]
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if kind_of(name) in KINDS and not p.is_symlink():
                yield p


def files() -> Iterator[Path]:
    walkers = [walk(r) for r in ROOTS if Path(r).is_dir()]
    for group in itertools.zip_longest(*walkers):
        yield from (p for p in group if p is not None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/fs-scale"))
    ap.add_argument("--chunks", type=int, default=3_050_000)
    ap.add_argument("--chunk-size", type=int, default=500)
    ap.add_argument("--overlap", type=int, default=80)
    args = ap.parse_args()
    root = args.out / "root"  # the folder the index belongs to (its files stay where they are)
    root.mkdir(parents=True, exist_ok=True)
    data = args.out / "data"
    svc = FolderService(Settings("folder-search", {"folders": [str(root)], "watch": False}, data))
    svc.open_specs()
    spec = next(iter(svc.folders.values())).spec
    (data / "indexes").mkdir(parents=True, exist_ok=True)
    store = IndexStore(data / "indexes" / spec.index_name)
    emb = load_embedder("wordllama")
    assert emb is not None
    with store.writing() as conn:
        store.set_meta(conn, "embedder", emb.name)
        store.set_meta(conn, "embed_text", str(EMBED_TEXT_VERSION))  # as the indexer writes it (batches.py)
    seen: set[bytes] = set()
    n_chunks = n_files = n_bytes = dup = 0
    per_root: dict[str, int] = {}
    t0 = time.perf_counter()
    batch: list[tuple[str, Path, object, list[object]]] = []

    def flush() -> None:
        nonlocal n_chunks
        if not batch:
            return
        texts = [embed_text(rel, ch.heading, ch.text, ex.title, ch.seq)  # type: ignore[attr-defined]
                 for rel, _p, ex, chs in batch for ch in chs]
        vecs = emb.embed(texts)
        row = 0
        with store.writing() as conn:
            for rel, p, ex, chs in batch:
                st = p.stat()
                store.insert_file(conn, rel, st.st_size, st.st_mtime_ns, "-", ex.kind, ex.title, ex.outline,  # type: ignore[attr-defined]
                                  chs, vecs[row : row + len(chs)], ex.text)  # type: ignore[attr-defined]
                row += len(chs)
        n_chunks += row
        batch.clear()

    pending = 0
    for p in files():
        try:
            if p.stat().st_size > MAX_BYTES:
                continue
            raw = p.read_bytes()
        except OSError:
            continue
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        if digest in seen:
            dup += 1
            continue
        seen.add(digest)
        try:
            ex = extract(p.name, raw)
        except (ExtractError, Unsupported, UnicodeError, ValueError):
            continue
        if not ex.text.strip():
            continue
        chs = chunk_text(ex.text, language_of(ex.kind), args.chunk_size, args.overlap)
        if not chs:
            continue
        rel = str(p).lstrip("/")
        batch.append((rel, p, ex, chs))
        top = next(r for r in ROOTS if str(p).startswith(r + "/"))
        per_root[top] = per_root.get(top, 0) + len(chs)
        n_files += 1
        n_bytes += len(raw)
        pending += len(chs)
        if pending >= 20_000:
            flush()
            pending = 0
            el = time.perf_counter() - t0
            print(f"{n_chunks} chunks, {n_files} files, {n_bytes / 1e9:.2f} GB, {el:.0f} s, "
                  f"{n_chunks / el:.0f} chunks/s", file=sys.stderr, flush=True)
            if n_chunks >= args.chunks:
                break
    flush()
    el = time.perf_counter() - t0
    summary = {"chunks": n_chunks, "files": n_files, "bytes": n_bytes, "duplicates_skipped": dup,
               "seconds": round(el), "chunk_size": args.chunk_size, "overlap": args.overlap,
               "chunks_per_root": per_root, "index": str(store.path), "index_bytes": store.size_bytes()}
    store.close()
    (args.out / "corpus.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
