"""The keyword side of a search: SQLite FTS5's BM25 over the chunks, kept fast on large indexes.

FTS5 computes BM25 for *every* row that matches a query before it can sort, at a few microseconds a row: a
word found in half a million chunks costs seconds. Below ``row_budget`` chunks in the whole index the query
is run as it is (an OR of its words), which covers SciFact and every folder of ordinary size. Above it:

* **Rare words choose rows.** The query's rarest words, by document frequency, together matching at most
  ``row_budget`` chunks, choose the rows FTS5 scores, and every word of the query still scores them:
  ``(rare) AND (rare OR common)`` (the choosing words thus count twice).
* **Common words bring their best chunks.** A word in more than ``row_budget`` chunks is never scanned at
  query time. Its best chunks for that word alone (the ``TOP`` highest single-word BM25 scores: its
  *impact list*) are computed once, kept, and brought up to date cheaply: chunks added since are scored
  alone (``rowid > last``), and chunks that are gone drop out. A chunk that only common words reach scores
  the sum of its impacts on the lists it is on. That is an approximation of the OR-query (a chunk with a
  middling score for several common words may be missed), measured in BENCH.md against the exact query.

Document frequencies are counted once per word and recounted when the index has grown or shrunk by more
than a twentieth.
"""

from __future__ import annotations

import collections
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["KEYWORD_ROW_BUDGET", "STOPWORDS", "KeywordSide", "fts_or", "query_words", "quote"]

KEYWORD_ROW_BUDGET = 20_000
TOP = 1000  # chunks kept per common word
_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the to was were will with this these "
    "those which what when where who how not no but if then than so such into about".split()
)
_MATCH = "SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT ?"


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


class KeywordSide:
    """Ranks one index's chunks by BM25 for a list of words (see the module doc for large indexes)."""

    def __init__(self, store: Any, row_budget: int = KEYWORD_ROW_BUDGET, top: int = TOP) -> None:
        self.store = store
        self.row_budget = row_budget
        self.top = top
        self._lock = threading.Lock()
        self._rows_gen: int | None = None
        self._rows = 0
        self._df: dict[str, tuple[int, int]] = {}  # word -> (chunks containing it, index rows when counted)
        self._impacts: collections.OrderedDict[str, _Impacts] = collections.OrderedDict()
        self._word_locks: dict[str, threading.Lock] = {}

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
        with self._lock:
            known = self._df.get(word)
        if known is not None and abs(known[1] - rows) * 20 <= max(rows, 1):
            return known[0]
        n = int(conn.execute("SELECT count(*) FROM chunk_fts WHERE chunk_fts MATCH ?", (quote(word),)).fetchone()[0])
        with self._lock:
            if len(self._df) > 20_000:
                self._df.clear()
            self._df[word] = (n, rows)
        return n

    # ------------------------------------------------------------------ the query
    def split(self, conn: Any, words: list[str]) -> tuple[list[str], list[str]]:
        """``(rare, common)``: the words that choose rows (together within the budget) and the others.

        Words found nowhere are left out of both. On an index within the budget every word is "rare".
        """
        rows = self.rows(conn)
        if rows <= self.row_budget:
            return list(words), []
        counted = sorted((d, w) for w in words if (d := self.df(conn, w, rows)))
        rare: list[str] = []
        total = 0
        for d, w in counted:
            if total + d > self.row_budget:
                break
            rare.append(w)
            total += d
        return rare, [w for _d, w in counted[len(rare):]]

    def expression(self, conn: Any, words: list[str]) -> str | None:
        """The FTS5 expression FTS5 scores exactly for ``words`` (None when no rare word chooses rows)."""
        if not words:
            return None
        rare, common = self.split(conn, words)
        if not rare:
            return None
        chosen = " OR ".join(quote(w) for w in rare)
        if not common:
            return chosen
        return f"({chosen}) AND ({chosen} OR {' OR '.join(quote(w) for w in common)})"

    def search(self, words: list[str], k: int) -> tuple[Any, Any]:
        """The best ``k`` chunks for ``words``: ``(ids, scores)`` as numpy arrays, in no particular order."""
        import numpy as np

        if not words:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        with self.store.reader() as conn:
            rare, common = self.split(conn, words)
            scored: dict[int, float] = {}
            if common:
                for w in common:
                    imp = self._impacts_of(conn, w)
                    for cid, s in zip(imp.ids.tolist(), imp.scores.tolist(), strict=True):
                        scored[cid] = scored.get(cid, 0.0) + s
            if rare:
                expr = self.expression(conn, words)
                for cid, s in conn.execute(_MATCH, (expr, k)).fetchall():
                    scored[cid] = float(s)  # exact: every word of the query scored it
        if not scored:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        ids = np.fromiter(scored.keys(), dtype=np.int64, count=len(scored))
        scores = np.fromiter(scored.values(), dtype=np.float64, count=len(scored))
        if len(ids) > k:
            keep = np.argpartition(-scores, k - 1)[:k]
            ids, scores = ids[keep], scores[keep]
        return ids, scores

    # ------------------------------------------------------------------ impact lists
    def _impacts_of(self, conn: Any, word: str) -> _Impacts:
        """``word``'s best chunks, computed once and brought up to date with the chunks added since."""
        import numpy as np

        with self._lock:
            lock = self._word_locks.setdefault(word, threading.Lock())
        with lock:  # two queries with the same new common word compute its list once
            with self._lock:
                imp = self._impacts.get(word)
                if imp is not None:
                    self._impacts.move_to_end(word)
            last = int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])
            if imp is not None and imp.upto == last:
                return imp
            if imp is None:
                rows = conn.execute(_MATCH, (quote(word), self.top)).fetchall()
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                scores = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
            else:
                # Chunks added since (a changed file's chunks are new rows), scored alone; chunks gone drop out.
                new = conn.execute(
                    "SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? AND rowid > ? ORDER BY rank LIMIT ?",
                    (quote(word), imp.upto, self.top)).fetchall()
                alive = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                                                    (json.dumps(imp.ids.tolist()),))}
                keep = np.fromiter((c in alive for c in imp.ids.tolist()), dtype=bool, count=len(imp.ids))
                ids = np.concatenate([imp.ids[keep], np.fromiter((r[0] for r in new), dtype=np.int64, count=len(new))])
                scores = np.concatenate([imp.scores[keep],
                                         np.fromiter((r[1] for r in new), dtype=np.float64, count=len(new))])
                order = np.argsort(-scores, kind="stable")[: self.top]
                ids, scores = ids[order], scores[order]
            imp = _Impacts(last, ids, scores)
            with self._lock:
                self._impacts[word] = imp
                while len(self._impacts) > 4096:
                    self._impacts.popitem(last=False)
            return imp

    def warm(self, words: list[str]) -> None:
        """Compute the impact lists of those of ``words`` that are common (a background warm-up)."""
        with self.store.reader() as conn:
            _rare, common = self.split(conn, words)
            for w in common:
                self._impacts_of(conn, w)
