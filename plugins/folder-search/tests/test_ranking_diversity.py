"""A document's second and later passages are ranked lower among the best, so the first page shows more documents."""

from __future__ import annotations

from pathlib import Path

from plexor import Settings
from plexor_folder_search.search import REPEAT_FACTOR
from plexor_folder_search.service import FolderService


def _service(tmp_path: Path) -> FolderService:
    root = tmp_path / "c"
    root.mkdir()
    # One long document whose every section is about the okapi, and short ones that mention it once among other words.
    sections = [f"## Section {i}\n\nThe okapi okapi okapi eats leaves; okapi calves hide. Okapi note {i}.\n" for i in range(12)]
    (root / "long.md").write_text("# Okapi handbook\n\n" + "\n".join(s * 6 for s in sections), encoding="utf-8")
    for i in range(4):
        (root / f"short{i}.txt").write_text(f"Field report {i}: an okapi okapi near the river, then giraffes and "
                                            f"zebras by the water.\n", encoding="utf-8")
    svc = FolderService(Settings("folder-search", {"folders": [str(root)], "model": "none", "chunk_size": 400,
                                                   "chunk_overlap": 0, "watch": False}, tmp_path / "data"))
    svc.open()
    svc.index_folder(next(iter(svc.folders.values())))
    return svc


def test_repeated_documents_are_ranked_lower_among_the_best(tmp_path):
    svc = _service(tmp_path)
    try:
        st = next(iter(svc.folders.values()))
        engine = st.engine
        assert 0 < REPEAT_FACTOR < 1 and engine.repeat_factor == REPEAT_FACTOR
        engine.repeat_factor = 1.0
        plain = engine.rank("okapi", [])
        engine.repeat_factor = REPEAT_FACTOR
        diverse = engine.rank("okapi", [])

        def paths(ranking) -> list[str]:
            return [svc._chunk_rows(st, [c])[c]["path"] for c in ranking.ids.tolist()[:10]]

        # Without it the long document fills the first page; with it the short ones come up among the first ten.
        assert set(paths(plain)) == {"long.md"}
        first = paths(diverse)
        assert first[0] == "long.md" and {f"short{i}.txt" for i in range(4)} <= set(first)
        # The same chunks, scores still in order; a repeated passage's score is its plain score times the factor.
        assert sorted(plain.ids.tolist()) == sorted(diverse.ids.tolist())
        scores = diverse.scores.tolist()
        assert scores == sorted(scores, reverse=True)
        before = dict(zip(plain.ids.tolist(), plain.scores.tolist(), strict=True))
        seen: set[str] = set()
        for cid, score in zip(diverse.ids.tolist()[:10], scores[:10], strict=True):
            path = svc._chunk_rows(st, [cid])[cid]["path"]
            expect = before[cid] * (REPEAT_FACTOR if path in seen else 1.0)
            assert abs(score - expect) < 1e-9
            seen.add(path)
        # Documents are ranked by their best passage, which is never the one lowered.
        engine.repeat_factor = 1.0
        docs_plain = [fid for fid, _h in engine.rank_documents("okapi")]
        engine.repeat_factor = REPEAT_FACTOR
        assert [fid for fid, _h in engine.rank_documents("okapi")] == docs_plain
    finally:
        svc.stop()
