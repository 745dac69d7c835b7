"""The keyword side of a search: SQLite FTS5's BM25 over the chunks, kept fast on large indexes.

FTS5 computes BM25 for *every* row that matches a query before it can sort, at several microseconds a row,
and BM25 also counts each word's rows once per query: a word found in half a million chunks costs seconds.
Below ``row_budget`` chunks in the whole index the query is run as it is (an OR of its words), which covers
SciFact and every folder of ordinary size. Above it, the query's words are split by document frequency:

* **Rare words choose and score rows.** The rarest words, together found in at most ``row_budget`` chunks,
  are run as an OR-query: every chunk containing one of them is scored exactly for them.
* **Common words bring their impact lists.** A word in more chunks is never scanned at query time. Its best
  chunks for that word alone (the ``top`` highest single-word BM25 scores: its *impact list*) are computed
  once, kept in the index (table ``term_impacts``) and brought up to date cheaply: chunks added since are
  scored alone (``rowid > upto``), and chunks that are gone drop out. BM25 is a sum over the query's words,
  so a chunk's score is its rare-word score plus its impact on each common word's list it is on. That is an
  approximation of the OR-query - a chunk's common words count only where it is among their best ``top``
  chunks - measured in BENCH.md against the exact query.

An impact list costs a full scoring of the word once (seconds for the commonest words of a million-chunk
index), so after a large folder is indexed :meth:`KeywordSide.prepare` computes the lists of all its common
words in the background, at most half a core, before any query needs them.
"""

from __future__ import annotations

import collections
import json
import math
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from plexor_folder_search.store import FTS_TOKENIZE

__all__ = ["KEYWORD_ROW_BUDGET", "MATCH_SQL", "STOPWORDS", "KeywordSide", "fts_or", "query_words", "quote"]

KEYWORD_ROW_BUDGET = 20_000
TOP = 1000  # chunks kept per common word
RARE_ROWS = 4000  # rows the rare words choose, best first, when the query also has common words
RECHECK = 2000  # rows before a list's last one that are scored again when it is brought up to date
_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the to was were will with this these "
    "those which what when where who how not no but if then than so such into about".split()
)
MATCH_SQL = "SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT ?"


def quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def query_words(text: str, limit: int = 64) -> list[str]:
    """The distinct words of ``text`` for the keyword side, stop words left out (unless there is nothing else)."""
    words = _WORD.findall(text.lower())
    # Stop words match nearly every chunk and make BM25 score them all; they add almost nothing to the ranking.
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))[:limit]


def fts_or(text: str, limit: int = 64) -> str | None:
    """An FTS5 OR-query of the distinct words of ``text`` (None when it has no words)."""
    seen = query_words(text, limit)
    return " OR ".join(quote(t) for t in seen) if seen else None


@dataclass(slots=True)
class _Impacts:
    """One common word's best chunks for that word alone, as of chunk id ``upto``."""

    upto: int
    ids: Any  # int64, best first
    scores: Any  # float64
    generation: int = -1  # the store's generation it was made at (read from the index: unknown)


class KeywordSide:
    """Ranks one index's chunks by BM25 for a list of words (see the module doc for large indexes)."""

    def __init__(self, store: Any, row_budget: int = KEYWORD_ROW_BUDGET, top: int = TOP) -> None:
        self.store = store
        self.row_budget = row_budget
        self.top = top
        self.rare_rows = RARE_ROWS
        self._lock = threading.Lock()
        self._rows_gen: int | None = None
        self._rows = 0
        self._df: dict[str, tuple[int, int]] = {}  # word -> (chunks containing it, index rows when counted)
        self._impacts: collections.OrderedDict[str, _Impacts] = collections.OrderedDict()
        self._word_locks: dict[str, threading.Lock] = {}
        self._keys: dict[str, str] = {}
        self._tok: Any = None
        self._tok_lock = threading.Lock()

    def key(self, word: str) -> str:
        """What the index holds for ``word``: its tokens as FTS5's tokenizer makes them ("errors" -> "error")."""
        with self._lock:
            known = self._keys.get(word)
        if known is not None:
            return known
        import sqlite3

        with self._tok_lock:
            if self._tok is None:
                self._tok = sqlite3.connect(":memory:", check_same_thread=False)
                self._tok.execute(f"CREATE VIRTUAL TABLE tok USING fts5(x, tokenize='{FTS_TOKENIZE}')")
                self._tok.execute("CREATE VIRTUAL TABLE tokv USING fts5vocab(tok, instance)")
            self._tok.execute("INSERT INTO tok(rowid, x) VALUES (1, ?)", (word,))
            terms = [r[0] for r in self._tok.execute("SELECT term FROM tokv WHERE doc = 1 ORDER BY offset")]
            self._tok.execute("DELETE FROM tok")
        key = " ".join(terms)
        with self._lock:
            if len(self._keys) > 50_000:
                self._keys.clear()
            self._keys[word] = key
        return key

    # ------------------------------------------------------------------ statistics
    def rows(self, conn: Any) -> int:
        gen = self.store.generation
        with self._lock:
            if self._rows_gen == gen:
                return self._rows
        rows = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        with self._lock:
            self._rows_gen, self._rows = gen, rows
        return int(rows)

    def df(self, conn: Any, word: str, rows: int) -> int:
        key = self.key(word)
        with self._lock:
            known = self._df.get(key)
        if known is not None and abs(known[1] - rows) * 20 <= max(rows, 1):
            return known[0]
        n = int(conn.execute("SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH ?", (quote(word),)).fetchone()[0])
        with self._lock:
            if len(self._df) > 20_000:
                self._df.clear()
            self._df[key] = (n, rows)
        return n

    def _idf(self, conn: Any, word: str) -> float:
        """FTS5's BM25 weight of ``word`` (its inverse document frequency, as FTS5 computes it)."""
        rows = self.rows(conn)
        hits = self.df(conn, word, rows)
        return max(1e-6, math.log((rows - hits + 0.5) / (hits + 0.5)))

    # ------------------------------------------------------------------ the query
    def split(self, conn: Any, words: list[str]) -> tuple[list[str], list[str]]:
        """``(rare, common)``: the words that choose rows (together within the budget) and the others.

        Words found nowhere are left out of both. On an index within the budget every word is "rare".
        """
        rows = self.rows(conn)
        if rows <= self.row_budget:
            return list(words), []
        distinct = list({self.key(w): w for w in reversed(words)}.values())[::-1]  # "error" and "errors" once
        counted = sorted((d, w) for w in distinct if (d := self.df(conn, w, rows)))
        rare: list[str] = []
        total = 0
        for d, w in counted:
            if total + d > self.row_budget:
                break
            rare.append(w)
            total += d
        return rare, [w for _d, w in counted[len(rare):]]

    def expression(self, conn: Any, words: list[str]) -> str | None:
        """The FTS5 query run for ``words``: an OR of its rare words (None when none is found anywhere)."""
        rare, _common = self.split(conn, words) if words else ([], [])
        return " OR ".join(quote(w) for w in rare) if rare else None

    def search(self, words: list[str], k: int) -> tuple[Any, Any]:
        """The best ``k`` chunks for ``words``: ``(ids, scores)`` as numpy arrays, in no particular order."""
        import numpy as np

        if not words:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        with self.store.reader() as conn:
            rare, common = self.split(conn, words)
            parts_ids: list[Any] = []
            parts_scores: list[Any] = []
            chosen = np.empty(0, dtype=np.int64)
            expr = " OR ".join(quote(w) for w in rare)
            if rare:
                # More rows than asked for: common words can lift a row that the rare words alone rank lower.
                rows = conn.execute(MATCH_SQL, (expr, self.rare_rows if common else k)).fetchall()
                if rows:
                    arr = np.array(rows, dtype=np.float64)
                    chosen = arr[:, 0].astype(np.int64)
                    parts_ids.append(chosen)
                    parts_scores.append(arr[:, 1])
            for w in common:
                imp = self._impacts_of(conn, w)
                parts_ids.append(imp.ids)
                parts_scores.append(imp.scores)
                if len(chosen):
                    # The chosen rows that also hold this common word but are not on its list: the word's weight
                    # for one occurrence in a passage of average length (FTS5 finds which rows hold it by seeking,
                    # without the full count that scoring it would cost).
                    held = np.fromiter((r[0] for r in conn.execute(
                        "SELECT rowid FROM chunk_fts WHERE chunk_fts MATCH ?", (f"{quote(w)} AND ({expr})",))),
                        dtype=np.int64)
                    held = held[np.isin(held, chosen) & ~np.isin(held, imp.ids)]
                    parts_ids.append(held)
                    parts_scores.append(np.full(len(held), self._idf(conn, w)))
        if not parts_ids:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        all_ids = np.concatenate(parts_ids)
        ids, inverse = np.unique(all_ids, return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(parts_scores), minlength=len(ids))
        if len(ids) > k:
            keep = np.argpartition(-scores, k - 1)[:k]
            ids, scores = ids[keep], scores[keep]
        return ids, scores

    # ------------------------------------------------------------------ impact lists
    def _impacts_of(self, conn: Any, word: str) -> _Impacts:
        """``word``'s best chunks, computed once and brought up to date with the chunks added since."""
        import numpy as np

        key = self.key(word)
        with self._lock:
            lock = self._word_locks.setdefault(key, threading.Lock())
        with lock:  # two queries with the same new common word compute its list once
            with self._lock:
                imp = self._impacts.get(key)
                if imp is not None:
                    self._impacts.move_to_end(key)
            if imp is None:
                imp = self._stored(conn, key)
            generation = self.store.generation
            if imp is not None and imp.generation == generation:
                self._remember(key, imp)
                return imp
            last = int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])
            scratch = imp is None or last < imp.upto - RECHECK
            if scratch:
                rows = conn.execute(MATCH_SQL, (quote(word), self.top)).fetchall()
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                scores = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
            else:
                assert imp is not None
                # Chunks added since (a changed file's chunks are new rows) are scored alone, and so are the last
                # RECHECK rows before them: SQLite gives a new row the id after the highest one left, so a file
                # re-indexed at the end of the table gets its old ids back. Chunks that are gone drop out.
                since = max(0, imp.upto - RECHECK)
                new = conn.execute(
                    "SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? AND rowid > ? ORDER BY rank LIMIT ?",
                    (quote(word), since, self.top)).fetchall()
                old = imp.ids <= since
                alive = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                                                    (json.dumps(imp.ids[old].tolist()),))}
                keep = old & np.fromiter((c in alive for c in imp.ids.tolist()), dtype=bool, count=len(imp.ids))
                ids = np.concatenate([imp.ids[keep], np.fromiter((r[0] for r in new), dtype=np.int64, count=len(new))])
                scores = np.concatenate([imp.scores[keep],
                                         np.fromiter((r[1] for r in new), dtype=np.float64, count=len(new))])
                order = np.argsort(-scores, kind="stable")[: self.top]
                ids, scores = ids[order], scores[order]
            imp = _Impacts(last, ids, scores, generation)
            self._remember(key, imp)
            if scratch:  # kept in the index, so that a restart need not score the word again (never waits on a writer)
                self.store.side_write(
                    "INSERT OR REPLACE INTO term_impacts(word, upto, ids, scores) VALUES (?, ?, ?, ?)",
                    (key, last, ids.astype("<i8").tobytes(), scores.astype("<f8").tobytes()), wait=0.05)
            return imp

    def forget(self) -> None:
        """Drop every impact list (the index was emptied: its chunk ids start again)."""
        with self._lock:
            self._impacts.clear()
            self._df.clear()
        self.store.side_write("DELETE FROM term_impacts")

    def _remember(self, word: str, imp: _Impacts) -> None:
        with self._lock:
            self._impacts[word] = imp
            self._impacts.move_to_end(word)
            while len(self._impacts) > 4096:
                self._impacts.popitem(last=False)

    def _stored(self, conn: Any, word: str) -> _Impacts | None:
        import numpy as np

        row = conn.execute("SELECT upto, ids, scores FROM term_impacts WHERE word = ?", (word,)).fetchone()
        if row is None:
            return None
        return _Impacts(int(row[0]), np.frombuffer(row[1], dtype="<i8").astype(np.int64),
                        np.frombuffer(row[2], dtype="<f8").astype(np.float64))

    def prepare(self, stop: threading.Event | None = None, duty: float = 0.5) -> int:
        """Compute (or bring up to date) the impact list of every common word; returns how many were done.

        Meant for a background thread once a large folder is indexed: the words come from FTS5's vocabulary,
        commonest first, and after each one the thread rests so that it uses at most ``duty`` of a core.
        Their document frequencies are remembered too, so queries need not count them.
        """
        with self.store.reader() as conn:
            rows = self.rows(conn)
            if rows <= self.row_budget:
                return 0
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_vocab USING fts5vocab(main, chunk_fts, row)")
            common = conn.execute("SELECT term, doc FROM temp.chunk_vocab WHERE doc > ? ORDER BY doc DESC",
                                  (self.row_budget,)).fetchall()
        # A vocabulary term is an already-stemmed token; one that stems again to something else cannot be asked
        # for as it is, and is left to the first query that uses a word with that stem.
        common = [(t, d) for t, d in common if self.key(t) == t]
        with self._lock:
            for word, doc in common:
                self._df[word] = (int(doc), rows)
        done = 0
        for word, _doc in common:
            if stop is not None and stop.is_set():
                break
            started = time.perf_counter()
            with self.store.reader() as conn:
                self._impacts_of(conn, word)
            done += 1
            if duty < 1.0:
                rest = (time.perf_counter() - started) * (1.0 - duty) / duty
                if stop is not None:
                    stop.wait(rest)
                else:
                    time.sleep(rest)
        return done
