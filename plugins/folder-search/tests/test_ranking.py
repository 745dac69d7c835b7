"""The ranking machinery on its own: vector search (exact and coarse-to-fine), keyword narrowing, fusion."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import indexed_service

from plexor_folder_search.search import Ranking, SearchEngine, fts_or
from plexor_folder_search.service import FolderService
from plexor_folder_search.store import VectorIndex


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_vector_search_is_exact_and_gives_any_other_chunk_its_similarity():
    rng = np.random.default_rng(7)
    mat = _unit(rng.normal(size=(500, 32)))
    ids = rng.permutation(np.arange(10, 510)).astype(np.int64)  # stored out of order on purpose
    vi = VectorIndex(32)
    vi.load(ids, mat)
    q = _unit(rng.normal(size=(1, 32)))[0]
    near = vi.search(q, 20)
    truth = {int(ids[i]): float(mat[i] @ q) for i in range(500)}
    best = sorted(truth, key=lambda c: -truth[c])[:20]
    assert sorted(near.ids.tolist()) == sorted(best)
    for cid, sim in zip(near.ids.tolist(), near.sims.tolist(), strict=True):
        assert math.isclose(sim, truth[cid], abs_tol=1e-5)
    # Others: only those with a vector and not already found, each with its true similarity.
    others = [best[0], best[-1], int(ids[0]), 9999, 3]
    more_ids, more_sims = near.more(others)
    expect = [c for c in others if c in truth and c not in best]
    assert sorted(more_ids.tolist()) == sorted(expect)
    for cid, sim in zip(more_ids.tolist(), more_sims.tolist(), strict=True):
        assert math.isclose(sim, truth[cid], abs_tol=1e-5)
    # Updates are seen by the next search.
    vi.remove([best[0]])
    vi.add([7], q.reshape(1, 32))
    again = vi.search(q, 3)
    assert 7 in again.ids.tolist() and best[0] not in again.ids.tolist()
    assert len(vi) == 500


def test_large_index_is_searched_coarse_to_fine_with_full_similarities(monkeypatch):
    monkeypatch.setattr(VectorIndex, "COARSE_MIN_ROWS", 100)
    rng = np.random.default_rng(3)
    # The leading 8 dimensions carry the meaning (as in a Matryoshka embedding); the tail is small noise.
    head = rng.normal(size=(400, 8))
    tail = rng.normal(scale=0.01, size=(400, 24))
    mat = _unit(np.hstack([head, tail]))
    ids = np.arange(400, dtype=np.int64)
    vi = VectorIndex(32, coarse_dims=8)
    vi.load(ids, mat)
    assert vi._prefix is not None and vi._prefix.shape == (400, 8)
    q = mat[17]
    near = vi.search(q, 5)
    full = mat @ q
    assert sorted(near.ids.tolist()) == sorted(np.argsort(-full)[:5].tolist())
    assert np.allclose(near.sims, full[near.ids], atol=1e-5)  # rescored with all 32 dimensions
    more_ids, more_sims = near.more([399, 17])
    assert more_ids.tolist() == [399] and np.allclose(more_sims, full[[399]], atol=1e-5)
    # Below the threshold, or for a model without Matryoshka structure, the scan is exact.
    assert VectorIndex(32)._prefix is None


def test_ranking_makes_hits_only_for_what_is_read():
    r = Ranking(np.array([5, 3, 9]), np.array([0.9, 0.5, 0.1]), np.array([1.0, 0.0, 0.2]), np.array([0.3, np.nan, 0.1]))
    assert len(r) == 3 and bool(r)
    assert [h.chunk_id for h in r[1:]] == [3, 9]
    assert r[-1].chunk_id == 9 and r[1].semantic is None and r[0].semantic == pytest.approx(0.3)
    with pytest.raises(IndexError):
        r[3]
    assert [h.chunk_id for h in r] == [5, 3, 9]
    assert len(Ranking.empty()) == 0 and not Ranking.empty()


def _service(tmp_path: Path, folder: Path, model: str) -> FolderService:
    svc: FolderService = indexed_service(tmp_path, folder, model)
    return svc


def _corpus(root: Path) -> Path:
    root.mkdir()
    for i in range(40):
        extra = " The okapi grazes quietly." if i % 10 == 0 else ""
        (root / f"note{i:02}.txt").write_text(
            f"Note {i}: the common river flows past the common bridge near house {i}.{extra}\n", encoding="utf-8")
    (root / "zoo.txt").write_text("The okapi is a forest giraffe; the okapi eats leaves by the river.\n", encoding="utf-8")
    return root


def _chunk_of(st, path: str) -> int:
    with st.store.reader() as conn:
        return conn.execute("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path = ?",
                            (path,)).fetchone()[0]


def test_fusion_matches_the_formula(tmp_path):
    """rank() equals (1 - w) * bm25 / best_bm25 + w * min-max-scaled cosine, computed here the slow way."""
    svc = _service(tmp_path, _corpus(tmp_path / "c"), "wordllama")
    try:
        st = next(iter(svc.folders.values()))
        engine: SearchEngine = st.engine
        query, w = "okapi near the river bridge", 0.4
        with st.store.reader() as conn:
            kw = dict(conn.execute("SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank",
                                   (fts_or(query),)).fetchall())
        ids, mat = st.vectors.snapshot()
        q = svc.embedder.embed_query(query)  # the query vector leaves out stop words (embed.py)
        cos = dict(zip(ids.tolist(), (mat @ q).tolist(), strict=True))
        lo, hi = min(cos.values()), max(cos.values())
        best = max(kw.values())
        expect = {c: (1 - w) * kw.get(c, 0.0) / best + w * (cos[c] - lo) / (hi - lo) for c in cos}
        expect = {c: s for c, s in expect.items() if s > 0}
        hits = engine.rank(query, [], weight=w)
        assert len(hits) == len(expect)
        for h in hits:
            assert h.score == pytest.approx(expect[h.chunk_id], abs=1e-6)
            assert h.keyword == pytest.approx(kw.get(h.chunk_id, 0.0) / best)
            assert h.semantic == pytest.approx(cos[h.chunk_id], abs=1e-6)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        # Exact terms filter first; concepts still score the survivors.
        only = engine.rank("river", ["forest giraffe"])
        assert [h.chunk_id for h in only] == [_chunk_of(st, "zoo.txt")]
        assert only[0].keyword == pytest.approx(1.0) and only[0].semantic is not None
    finally:
        svc.stop()
