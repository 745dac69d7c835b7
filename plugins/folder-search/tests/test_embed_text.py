"""What a passage's vector and keyword fields are made of: the document's title reaches its later passages, an
index embedded from an older text is re-embedded, and the default model's query vector leaves out stop words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plexor import Settings
from plexor_folder_search.batches import EMBED_TEXT_VERSION, embed_text
from plexor_folder_search.embed import load_embedder
from plexor_folder_search.service import FolderService

TITLE = "Okapi field guide"
BODY = "\n\n".join(f"Paragraph {i}: giraffes and zebras drink at the river while the keepers count calves." for i in range(12))


def _service(tmp_path: Path, model: str = "wordllama") -> FolderService:
    root = tmp_path / "c"
    root.mkdir(exist_ok=True)
    if not (root / "guide.txt").exists():
        (root / "guide.txt").write_text(f"{TITLE}\n\n{BODY}\n", encoding="utf-8")
        (root / "other.txt").write_text("Lions sleep in the afternoon heat.\n", encoding="utf-8")
    svc = FolderService(Settings("folder-search", {"folders": [str(root)], "model": model, "chunk_size": 300,
                                                   "chunk_overlap": 0, "watch": False}, tmp_path / "data"))
    svc.open()
    svc.index_folder(next(iter(svc.folders.values())))
    return svc


def _rows(st: Any) -> list[tuple[int, int, str, str, bytes]]:
    with st.store.reader() as conn:
        rows: list[tuple[int, int, str, str, bytes]] = conn.execute(
            "SELECT c.id, c.seq, c.body, c.meta, c.vector FROM chunks c JOIN files f "
            "ON f.id = c.file_id WHERE f.path = 'guide.txt' ORDER BY c.seq").fetchall()
    return rows


def test_embed_text_puts_the_title_before_later_passages_only() -> None:
    assert embed_text("a.txt", "", "body", "Title", 0) == "body"
    assert embed_text("a.txt", "", "body", "Title", 1) == "Title\nbody"
    assert embed_text("a.md", "Install > Linux", "body", "Title", 2) == "Title\nInstall > Linux\nbody"
    # A heading trail that already names the title does not repeat it; no title, no change.
    assert embed_text("a.md", "Title > Linux", "body", "Title", 2) == "Title > Linux\nbody"
    assert embed_text("a.txt", "", "body", None, 3) == "body"


def test_later_passages_are_embedded_with_the_title_and_found_by_its_words(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    try:
        st: Any = next(iter(svc.folders.values()))
        emb = st.indexer.embedder
        rows = _rows(st)
        assert len(rows) >= 3 and st.store.get_meta("embed_text") == str(EMBED_TEXT_VERSION)
        for _cid, seq, body, meta, blob in rows:
            want = emb.embed([body if seq == 0 else f"{TITLE}\n{body}"])[0]
            assert np.allclose(np.frombuffer(blob, dtype=np.float32), want, atol=1e-6)
            assert TITLE in meta  # the title is a keyword field of every passage
        # "okapi" is only in the title, i.e. in the first passage's text: the keyword side finds every passage.
        hits = st.engine.rank("okapi", [], weight=0.0)
        assert {r[0] for r in rows} <= set(hits.ids.tolist())
        # A moved file keeps the title in its keyword fields.
        (tmp_path / "c" / "guide.txt").rename(tmp_path / "c" / "moved.txt")
        svc.index_folder(st)
        with st.store.reader() as conn:
            metas = [m for (m,) in conn.execute("SELECT c.meta FROM chunks c JOIN files f ON f.id = c.file_id "
                                                "WHERE f.path = 'moved.txt'")]
        assert metas and all("moved txt" in m and TITLE in m for m in metas)
    finally:
        svc.stop()


def test_an_index_embedded_from_an_older_text_is_re_embedded(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    st: Any = next(iter(svc.folders.values()))
    emb = st.indexer.embedder
    rows = _rows(st)
    # Make it look like an index written before the title was embedded: old vectors, keyword fields without the
    # title, no version recorded.
    with st.store.writing() as conn:
        for cid, _seq, body, meta, _blob in rows:
            conn.execute("UPDATE chunks SET vector=? WHERE id=?", (emb.embed([body])[0].tobytes(), cid))
            conn.execute("INSERT INTO chunk_fts(chunk_fts, rowid, body, meta) VALUES('delete', ?, ?, ?)",
                         (cid, body, meta))
            conn.execute("UPDATE chunks SET meta='guide txt' WHERE id=?", (cid,))
            conn.execute("INSERT INTO chunk_fts(rowid, body, meta) VALUES(?, ?, 'guide txt')", (cid, body))
        conn.execute("DELETE FROM meta WHERE key='embed_text'")
    assert set(st.engine.rank("okapi", [], weight=0.0).ids.tolist()) == {rows[0][0]}
    svc.stop()

    svc = _service(tmp_path)  # opened again: the scan re-embeds what the older text made
    try:
        st = next(iter(svc.folders.values()))
        assert st.store.get_meta("embed_text") == str(EMBED_TEXT_VERSION)
        assert st.store.get_meta("embed_text_upto") is None
        for cid, seq, body, _meta, blob in _rows(st):
            want = emb.embed([body if seq == 0 else f"{TITLE}\n{body}"])[0]
            assert np.allclose(np.frombuffer(blob, dtype=np.float32), want, atol=1e-6)
            # The vectors searched are the new ones, each once.
            near = st.vectors.search(want, 3)
            assert near.ids[0] == cid and near.sims[0] > 0.999 and cid not in near.ids[1:].tolist()
        # The title is a keyword field of every passage again, in the full-text index too.
        assert all(TITLE in meta for _c, _s, _b, meta, _v in _rows(st))
        with st.store.writing() as conn:  # raises if the full-text index disagrees with the chunks
            conn.execute("INSERT INTO chunk_fts(chunk_fts, rank) VALUES('integrity-check', 1)")
        assert {r[0] for r in rows} <= set(st.engine.rank("okapi", [], weight=0.0).ids.tolist())
        # Up to date: nothing more to do.
        assert st.indexer.refresh_vectors() == 0
    finally:
        svc.stop()


def test_an_interrupted_re_embedding_resumes_where_it_stopped(tmp_path: Path) -> None:
    import threading

    svc = _service(tmp_path)
    try:
        st: Any = next(iter(svc.folders.values()))
        with st.store.writing() as conn:
            conn.execute("UPDATE meta SET value='1' WHERE key='embed_text'")
        stop = threading.Event()
        stop.set()
        assert st.indexer.refresh_vectors(stop=stop) == 0
        assert st.store.get_meta("embed_text") == "1"  # stopped before any batch: still to do
        first = _rows(st)[0][0]
        with st.store.writing() as conn:  # as if a batch had ended at the guide's first chunk
            st.store.set_meta(conn, "embed_text_upto", str(first))
            total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            after = conn.execute("SELECT count(*) FROM chunks WHERE id > ?", (first,)).fetchone()[0]
        assert 0 < st.indexer.refresh_vectors() == after < total  # only the chunks after it
        assert st.store.get_meta("embed_text") == str(EMBED_TEXT_VERSION)
        assert st.store.get_meta("embed_text_upto") is None
    finally:
        svc.stop()


def test_the_default_models_query_vector_leaves_out_stop_words() -> None:
    emb = load_embedder("wordllama")
    assert emb is not None
    assert np.allclose(emb.embed_query("What is the role of the okapi?"), emb.embed(["role okapi?"])[0])
    # A query of stop words only is embedded as it is.
    assert np.allclose(emb.embed_query("what is the"), emb.embed(["what is the"])[0])
