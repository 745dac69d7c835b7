"""The compressed vector index that large folders use (ann.py: 4-bit codes scanned, 8-bit codes to rescore), on its
own and inside the real plugin.

The plugin switches to it from ``VectorIndex.ANN_MIN_ROWS`` vectors; the tests lower that threshold so that a
small folder takes the same path a folder of millions of chunks does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plexor import Settings
from plexor_folder_search.ann import IvfIndex, ivf_shape
from plexor_folder_search.service import FolderService
from plexor_folder_search.vectors import MODE_ANN, VectorIndex

pytest.importorskip("faiss")


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dim))
    return _unit(centres[rng.integers(0, 40, n)] + rng.normal(scale=0.6, size=(n, dim)))


def test_ivf_recall_updates_and_similarities_of_other_chunks(monkeypatch):
    monkeypatch.setattr(VectorIndex, "ANN_MIN_ROWS", 1000)
    mat = _clustered(6000, 48, 1)
    ids = np.arange(100, 6100, dtype=np.int64)
    vi = VectorIndex(48)
    vi.load(ids, mat)
    assert vi.mode == MODE_ANN and len(vi) == 6000 and vi.matrix.shape == (0, 48)
    queries = _clustered(50, 48, 2)
    hits = 0
    for q in queries:
        near = vi.search(q, 10)
        truth = set(ids[np.argsort(-(mat @ q))[:10]].tolist())
        hits += len(truth & set(near.ids.tolist()))
        # Similarities are those of the 8-bit codes: close to the exact ones.
        assert np.allclose(near.sims, mat[near.ids - 100] @ q, atol=0.02)
    assert hits / 500 >= 0.9  # synthetic clusters; the recall on real text is measured in bench/
    # Any other chunk gets its similarity; ids without a vector and ids already found are left out.
    q = queries[0]
    near = vi.search(q, 5)
    others = [int(near.ids[0]), 150, 5999, 99_999]
    more_ids, more_sims = near.more(others)
    assert sorted(more_ids.tolist()) == [150, 5999]
    assert np.allclose(more_sims, mat[[50, 5899]] @ q, atol=0.02)
    # Removed vectors are never found again; replaced ones are found with their new vector; added ones at once.
    top = int(vi.search(q, 1).ids[0])
    vi.remove([top])
    assert top not in vi.search(q, 50).ids.tolist() and len(vi) == 5999
    vi.add([top], (-q).reshape(1, 48))  # back, but now pointing away from q
    assert top not in vi.search(q, 50).ids.tolist() and len(vi) == 6000
    vi.add([7_000_000, 120], np.vstack([q, q]))
    found = vi.search(q, 2).ids.tolist()
    assert sorted(found) == [120, 7_000_000] and len(vi) == 6001
    ids_now, decoded = vi.snapshot()
    assert len(ids_now) == 6001 and float(decoded[ids_now.tolist().index(120)] @ q) > 0.98  # 8-bit codes


def test_a_matrix_that_grows_past_the_threshold_moves_into_the_ivf_index(monkeypatch):
    monkeypatch.setattr(VectorIndex, "ANN_MIN_ROWS", 3000)
    mat = _clustered(4000, 32, 3)
    vi = VectorIndex(32)
    vi.load(np.arange(2000, dtype=np.int64), mat[:2000])
    assert vi.mode == "exact"
    vi.add(range(2000, 4000), mat[2000:])
    assert len(vi) == 4000 and vi.mode == MODE_ANN
    assert vi.search(mat[3500], 1).ids.tolist() == [3500]


def test_ivf_shape_probes_every_list_and_bad_input_is_refused():
    assert ivf_shape(10) == (1, 1)
    assert ivf_shape(3_000_000) == (60, 60)  # every list probed: a query's nearest chunks are spread over all
    assert ivf_shape(10**9) == (64, 64)
    index = IvfIndex(8, 1)
    with pytest.raises(ValueError, match="needs at least"):
        index.train(np.zeros((10, 8), dtype=np.float32))
    index.train(_clustered(500, 8, 4))
    with pytest.raises(ValueError, match="3 ids need 3 vectors"):
        index.add(np.arange(3, dtype=np.int64), np.zeros((2, 8), dtype=np.float32))
    with pytest.raises(ValueError, match="same chunk id twice"):
        index.add(np.array([1, 1], dtype=np.int64), np.zeros((2, 8), dtype=np.float32))


def test_both_code_sets_follow_additions_removals_and_replacements():
    mat = _clustered(3000, 32, 6)
    ids = np.arange(0, 6000, 2, dtype=np.int64)
    index = IvfIndex(32, 2)
    index.train(mat)
    index.reserve(3000)  # room made for the codes: nothing added yet
    assert len(index) == 0 and index.search(mat[0], 5)[0].tolist() == []
    index.add(ids, mat)
    q = mat[10]
    found, sims = index.search(q, 3000)  # more than the scan's candidates: every vector, best first
    assert sorted(found.tolist()) == ids.tolist() and np.all(np.diff(sims) <= 0)
    assert found[0] == 20 and sims[0] > 0.98
    index.remove(np.array([20, 22, 7], dtype=np.int64))  # 7 was never there
    index.add(np.array([24], dtype=np.int64), -q.reshape(1, 32))  # replaced: now pointing away from q
    assert len(index) == 2998 and index.scan.ntotal == 2998 and index.ids.tolist() == sorted(set(ids.tolist()) - {20, 22})
    found, sims = index.search(q, 3000)
    assert len(found) == 2998 and found[-1] == 24 and sims[-1] < -0.98
    assert 20 not in found.tolist() and 22 not in found.tolist()
    assert index.nbytes() >= 2998 * (16 + 32)


# ---------------------------------------------------------------- through the plugin

TOPICS = [
    "volcano eruption lava magma crater ash",
    "sourdough bread yeast flour oven crust",
    "violin orchestra concerto symphony strings",
    "glacier ice melting arctic climate snow",
    "chess opening gambit bishop knight endgame",
    "python function decorator class module import",
]


def _write_corpus(root: Path) -> None:
    rng = np.random.default_rng(5)
    root.mkdir()
    for i in range(120):
        words = TOPICS[i % len(TOPICS)].split()
        body = " ".join(rng.choice(words, 40).tolist())
        (root / f"doc{i:03}.txt").write_text(f"Document {i}\n\n{body}\n", encoding="utf-8")


def _service(tmp_path: Path, folder: Path) -> FolderService:
    settings = Settings("folder-search", {
        "folders": [str(folder)], "model": "wordllama", "exclude": [], "chunk_size": 1100, "chunk_overlap": 150,
        "watch": False,
    }, tmp_path / "data")
    svc = FolderService(settings)
    svc.open()
    svc.index_folder(next(iter(svc.folders.values())))
    return svc


def _db_vector_ids(st) -> list[int]:
    with st.store.reader() as conn:
        return [r[0] for r in conn.execute("SELECT id FROM chunks WHERE vector IS NOT NULL ORDER BY id")]


def _semantic_paths(svc: FolderService, query: str) -> list[str]:
    svc._cache.clear()
    out = svc.search_content(None, query, [], 50, None)
    return [r["path"] for r in out["results"]]


def test_plugin_keeps_the_ivf_index_in_step_with_the_indexer(tmp_path, monkeypatch):
    monkeypatch.setattr(VectorIndex, "ANN_MIN_ROWS", 50)
    monkeypatch.setattr(VectorIndex, "ANN_MIN_ABSOLUTE", 50)
    folder = tmp_path / "f"
    _write_corpus(folder)
    svc = _service(tmp_path, folder)
    try:
        st = next(iter(svc.folders.values()))
        assert st.vectors.mode == MODE_ANN
        assert st.vectors.ann.ids.tolist() == _db_vector_ids(st)
        assert "doc000.txt" in _semantic_paths(svc, "lava flows from an erupting volcano")
        # Change one file, delete one, add one; the indexer updates the chunks (new ids) and the IVF index follows.
        (folder / "doc000.txt").write_text("Document 0\n\nA recipe for rye bread with a sourdough starter.\n",
                                           encoding="utf-8")
        (folder / "doc006.txt").unlink()
        (folder / "new.txt").write_text("The pianist and the cellist rehearse a sonata.\n", encoding="utf-8")
        svc.index_folder(st)
        assert st.vectors.ann.ids.tolist() == _db_vector_ids(st)
        assert len(st.vectors) == len(_db_vector_ids(st))
        volcano = _semantic_paths(svc, "lava flows from an erupting volcano")
        assert "doc000.txt" not in volcano[:10] and "doc006.txt" not in volcano
        assert "doc000.txt" in _semantic_paths(svc, "rye sourdough starter recipe")[:3]
        assert "new.txt" in _semantic_paths(svc, "cellist sonata rehearsal")[:3]
    finally:
        svc.stop()
    # Opened again, the vectors are streamed from the index file into a new IVF index: the same chunks.
    svc = FolderService(Settings("folder-search", {"folders": [str(folder)], "model": "wordllama", "watch": False},
                                 tmp_path / "data"))
    svc.open_as_is()
    try:
        st = next(iter(svc.folders.values()))
        assert st.vectors.mode == MODE_ANN
        assert st.vectors.ann.ids.tolist() == _db_vector_ids(st)
        assert "new.txt" in _semantic_paths(svc, "cellist sonata rehearsal")[:3]
    finally:
        svc.stop()


def test_an_empty_or_tiny_index_stays_exact_even_when_the_threshold_is_zero(tmp_path, monkeypatch):
    monkeypatch.setattr(VectorIndex, "ANN_MIN_ROWS", 0)
    folder = tmp_path / "f"
    folder.mkdir()
    svc = _service(tmp_path, folder)  # nothing to index: k-means would have no vectors to train on
    try:
        st = next(iter(svc.folders.values()))
        assert st.vectors.mode == "exact" and len(st.vectors) == 0
        (folder / "a.txt").write_text("Lava and ash from the volcano.\n", encoding="utf-8")
        svc.index_folder(st)
        assert st.vectors.mode == "exact" and len(st.vectors) == 1
        assert _semantic_paths(svc, "volcano lava") == ["a.txt"]
    finally:
        svc.stop()
