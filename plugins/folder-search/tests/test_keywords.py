"""The keyword side on a large index: rare words choose rows, common words bring their impact lists."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import indexed_service

from plexor_folder_search.keywords import KeywordSide, fts_or
from plexor_folder_search.search import SearchEngine
from plexor_folder_search.service import FolderService


def _service(tmp_path: Path, folder: Path) -> FolderService:
    svc: FolderService = indexed_service(tmp_path, folder)
    return svc


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[tuple[Path, FolderService, Any]]:
    """The small corpus below, indexed without a model: ``(folder, service, its folder state)``."""
    folder = _corpus(tmp_path / "c")
    svc = _service(tmp_path, folder)
    try:
        yield folder, svc, next(iter(svc.folders.values()))
    finally:
        svc.stop()


def _corpus(root: Path) -> Path:
    root.mkdir()
    for i in range(40):
        extra = " The okapi grazes quietly." if i % 10 == 0 else ""
        rivers = " river" * (i % 7)  # the common word, as often as i mod 7 (besides the one every note has)
        (root / f"note{i:02}.txt").write_text(
            f"Note {i}: the common river flows past the common bridge near house {i}.{extra}{rivers}\n",
            encoding="utf-8")
    (root / "zoo.txt").write_text("The okapi is a forest giraffe; the okapi eats leaves by the river.\n", encoding="utf-8")
    return root


def _ids(st, *paths: str) -> dict[str, int]:
    with st.store.reader() as conn:
        return {p: conn.execute("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path = ?",
                                (p,)).fetchone()[0] for p in paths}


def _or_query(st, words: str, limit: int = 1000) -> list[tuple[int, float]]:
    """The exact answer: FTS5's OR-query over the whole index."""
    with st.store.reader() as conn:
        return conn.execute("SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT ?",
                            (fts_or(words), limit)).fetchall()


def test_rare_words_choose_rows_and_a_common_word_brings_its_best_chunks(indexed):
    folder, svc, st = indexed
    engine: SearchEngine = st.engine
    with st.store.reader() as conn:
        # Under the budget (the whole index is smaller): the plain OR-query.
        assert engine.keyword_query(conn, ["river", "okapi"]) == fts_or("river okapi")
        engine.row_budget = 10  # now 41 chunks > 10: narrowed
        assert engine.keywords.split(conn, ["river", "okapi", "nowhere"]) == (["okapi"], ["river"])
        # Only the rare word is run through FTS5: a common word in the query would make BM25 count its rows.
        assert engine.keyword_query(conn, ["river", "okapi", "nowhere"]) == '"okapi"'
        assert engine.keyword_query(conn, ["okapi"]) == '"okapi"'
        assert engine.keyword_query(conn, ["nowhere"]) is None
        assert engine.keyword_query(conn, ["river"]) is None  # only common words: nothing scanned
    engine.keywords.top = 8
    hits = engine.rank("river okapi", [])
    okapi = {c for c, _s in _or_query(st, "okapi")}
    assert len(okapi) == 5
    # The five chunks with the rare word come first, the one that says it twice leading; then the
    # river-only chunks from the river's impact list (its best 8).
    assert hits[0].chunk_id == _ids(st, "zoo.txt")["zoo.txt"]
    assert {h.chunk_id for h in hits[:5]} == okapi
    rest = [h.chunk_id for h in hits[5:]]
    river_best = [c for c, _s in _or_query(st, "river") if c not in okapi][: 8]
    assert set(rest) <= {c for c, _s in _or_query(st, "river", 8)} and len(rest) >= 1
    assert set(rest) <= set(river_best) | okapi
    assert all(h.semantic is None for h in hits)
    assert len(engine.rank("  ", [])) == 0


def test_a_common_words_list_is_the_exact_answer_and_follows_changes(indexed):
    folder, svc, st = indexed
    side = KeywordSide(st.store, row_budget=10, top=6)
    ids, scores = side.search(["river"], 1000)
    exact = _or_query(st, "river", 6)
    # One common word: its impact list is exactly the best of the OR-query.
    assert sorted(zip(ids.tolist(), scores.tolist(), strict=True)) == sorted(exact)
    assert side._impacts["river"].upto == max(c for c, _s in _or_query(st, "river"))
    # A new file that says "river" most often enters the list; a deleted file's chunk leaves it.
    (folder / "flood.txt").write_text("river " * 40 + "\n", encoding="utf-8")
    gone = max(exact, key=lambda r: r[1])[0]
    with st.store.reader() as conn:
        gone_path = conn.execute("SELECT f.path FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = ?",
                                 (gone,)).fetchone()[0]
    (folder / gone_path).unlink()
    svc.index_folder(st)
    ids2, _ = side.search(["river"], 1000)
    flood = _ids(st, "flood.txt")["flood.txt"]
    assert flood in ids2.tolist() and gone not in ids2.tolist()
    assert side._impacts["river"].upto >= flood
    # Several common words: a chunk scores the sum of its impacts, and the best of each list is found.
    side.top = 1000
    side.forget()  # the lists of 6 are kept in the index too
    both_ids, both_scores = side.search(["river", "common"], 1000)
    exact_both = dict(_or_query(st, "river common"))
    got = dict(zip(both_ids.tolist(), both_scores.tolist(), strict=True))
    assert got.keys() == exact_both.keys()  # every chunk is on both complete lists here: exact sums
    assert all(abs(got[c] - exact_both[c]) < 1e-9 for c in got)


def test_keys_are_the_index_tokens_and_duplicates_count_once(indexed):
    folder, svc, st = indexed
    side = KeywordSide(st.store, row_budget=10)
    assert side.key("errors") == "error" and side.key("Running") == "run" and side.key("max_retries") == "max retri"
    with st.store.reader() as conn:
        # "rivers" is the same word as "river" to the index: counted and listed once.
        assert side.split(conn, ["rivers", "okapi", "river"]) == (["okapi"], ["rivers"])


def test_prepare_lists_every_common_word_once_and_keeps_them_in_the_index(indexed):
    folder, svc, st = indexed
    side = KeywordSide(st.store, row_budget=30, top=5)
    # Terms in more than 30 of the 41 chunks (stems; "txt" from the file names): all but "hous", which the
    # stemmer would turn into something else if it were asked for (the first query for "house" lists it).
    assert side.key("hous") != "hous"
    assert side.prepare(duty=1.0) == 9
    with st.store.reader() as conn:
        stored = dict(conn.execute("SELECT word, length(ids) FROM term_impacts").fetchall())
    assert set(stored) == {"note", "the", "common", "river", "flow", "past", "bridg", "near", "txt"}
    assert all(n == 5 * 8 for n in stored.values())
    # A new engine on the same index reads the lists instead of scoring the words again.
    fresh = KeywordSide(st.store, row_budget=30, top=5)
    with st.store.reader() as conn:
        assert fresh._stored(conn, "river") is not None
    ids, scores = fresh.search(["rivers"], 1000)
    assert sorted(zip(ids.tolist(), scores.tolist(), strict=True)) == sorted(_or_query(st, "river", 5))
    # A small index (within the budget) has no common words.
    assert KeywordSide(st.store, row_budget=1000).prepare() == 0
    # Emptying the folder's index forgets the lists with it.
    st.engine.keywords = fresh
    svc.clear(st)
    with st.store.reader() as conn:
        assert conn.execute("SELECT count(*) FROM term_impacts").fetchone()[0] == 0
    assert not fresh._impacts


def test_a_file_reindexed_at_the_end_of_the_table_is_scored_again(indexed):
    folder, svc, st = indexed
    side = KeywordSide(st.store, row_budget=10, top=3)
    (folder / "zz-last.txt").write_text("a river by the road\n", encoding="utf-8")
    svc.index_folder(st)
    last = _ids(st, "zz-last.txt")["zz-last.txt"]
    before, _ = side.search(["river"], 10)
    assert last not in before.tolist()
    # Rewritten to say "river" most: its chunk is deleted and inserted again, taking its old id back.
    (folder / "zz-last.txt").write_text("river " * 50 + "\n", encoding="utf-8")
    svc.index_folder(st)
    assert _ids(st, "zz-last.txt")["zz-last.txt"] == last  # SQLite gave the id back
    after, scores = side.search(["river"], 10)
    assert after[scores.argmax()] == last
    assert sorted(zip(after.tolist(), scores.tolist(), strict=True)) == sorted(_or_query(st, "river", 3))


def test_the_service_prepares_a_large_folders_common_words_after_indexing(indexed):
    folder, svc, st = indexed
    svc._prepare_keywords()  # 41 chunks: within the default budget, nothing to prepare
    assert _count(st, "SELECT count(*) FROM term_impacts") == 0
    st.engine.row_budget = 30
    svc._prepare_keywords()  # what the warm-up thread runs once every folder is indexed
    assert _count(st, "SELECT count(*) FROM term_impacts") == 9
    hits = st.engine.rank("river", [])
    assert len(hits) == 41 and hits[0].keyword == 1.0  # its impact list holds all 41 of its chunks


def _count(st, sql: str) -> int:
    with st.store.reader() as conn:
        return conn.execute(sql).fetchone()[0]


@pytest.mark.anyio
async def test_through_mcp_a_large_folder_answers_common_words_from_prepared_lists(plexor, plexor_config, tmp_path,
                                                                                   monkeypatch):
    import sqlite3

    from conftest import call, wait_ready

    monkeypatch.setattr("plexor_folder_search.search.KEYWORD_ROW_BUDGET", 30)  # 41 chunks: a "large" folder
    folder = _corpus(tmp_path / "c")
    plexor_config({"folder-search": {"folders": [str(folder)], "model": "none", "watch": False}})
    async with plexor.client(installed=["folder-search"]) as client:
        info = await wait_ready(client)
        index = info["folders"][0]["index_path"]
        # The warm-up prepares every common word's list in the background (9 of them here).
        for _ in range(200):
            with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM term_impacts").fetchone()[0] == 9:
                    break
            await anyio.sleep(0.05)
        else:
            raise AssertionError("the common words' lists were not prepared")
        found = await call(client, "folders_search_content", semantic_concepts="river okapi", limit=10)
        # The rare word's chunks first, the one that says it twice leading; the river-only ones after them.
        assert found["results"][0]["path"] == "zoo.txt" and found["total"] == 41
        assert {r["path"] for r in found["results"][:5]} == {"zoo.txt", "note00.txt", "note10.txt", "note20.txt",
                                                             "note30.txt"}
        only_common = await call(client, "folders_search_content", semantic_concepts="rivers", limit=5)
        # A query of one common word: its list, best first (the notes that say "river" seven times).
        assert only_common["total"] == 41
        assert only_common["results"][0]["path"] in {f"note{i:02}.txt" for i in (6, 13, 20, 27, 34)}
