"""Hybrid ranking: FTS5 BM25 and embedding cosine, fused with one weight.

Keyword scores are divided by the best keyword score among the candidates; semantic scores (cosine) are
min-max scaled over the candidates; the fused score is ``(1 - w) * keyword + w * semantic``, ``w`` tuned on
SciFact's *train* judgements (``bench/folder_search.py --tune``); with no model the ranking is keyword-only.

Latency: the keyword query (:mod:`~plexor_folder_search.keywords`, which keeps
it fast on large indexes) runs on a worker thread while this thread embeds the
query and scans the vectors (SQLite and numpy both release the GIL), and the
fusion is done on numpy arrays. Each side contributes its best 1,000 chunks.
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from plexor_folder_search.diversity import DIVERSIFY_TOP, REPEAT_FACTOR, diversify
from plexor_folder_search.keywords import (
    KEYWORD_ROW_BUDGET,
    MATCH_SQL,
    STOPWORDS,
    KeywordSide,
    fts_or,
    query_words,
    quote,
)

_WORD = re.compile(r"\w+", re.UNICODE)

__all__ = ["Hit", "Ranking", "SearchEngine", "fts_or", "fts_phrase", "make_snippet", "normalise", "query_words"]

DEFAULT_WEIGHT = 0.4

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="folder-search-query")
        return _POOL


@dataclass(slots=True)
class Hit:
    chunk_id: int
    score: float
    keyword: float
    semantic: float | None


class Ranking(Sequence[Hit]):
    """Ranked hits held as arrays; :class:`Hit` objects are made only for the items looked at."""

    __slots__ = ("ids", "scores", "keyword", "semantic")

    def __init__(self, ids: Any, scores: Any, keyword: Any, semantic: Any) -> None:
        self.ids, self.scores, self.keyword, self.semantic = ids, scores, keyword, semantic

    @classmethod
    def empty(cls) -> Ranking:
        import numpy as np

        z = np.empty(0)
        return cls(np.empty(0, dtype=np.int64), z, z, None)

    def __len__(self) -> int:
        return len(self.ids)

    def _hits(self, sl: slice) -> list[Hit]:
        ids, sc, kp = self.ids[sl].tolist(), self.scores[sl].tolist(), self.keyword[sl].tolist()
        if self.semantic is None:
            return [Hit(c, s, k, None) for c, s, k in zip(ids, sc, kp, strict=True)]
        sr = self.semantic[sl].tolist()
        return [Hit(c, s, k, None if r != r else r) for c, s, k, r in zip(ids, sc, kp, sr, strict=True)]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._hits(index)
        n = len(self.ids)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(index)
        return self._hits(slice(i, i + 1))[0]

    def __iter__(self) -> Iterator[Hit]:
        return iter(self._hits(slice(None)))


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def fts_phrase(term: str) -> str | None:
    """An FTS5 phrase for ``term`` (None when it has no word characters)."""
    words = _WORD.findall(term.lower())
    return quote(" ".join(words)) if words else None


def concept_words(text: str) -> list[str]:
    return [t for t in dict.fromkeys(_WORD.findall(text.lower())) if len(t) > 2 and t not in STOPWORDS]


class SearchEngine:
    """Ranks one folder's chunks for a query."""

    def __init__(self, store: Any, vectors: Any, embedder: Any, weight: float = DEFAULT_WEIGHT,
                 keyword_candidates: int = 1000, semantic_candidates: int = 1000,
                 keyword_row_budget: int | None = None, min_similarity: float | None = None) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        #: A passage that matches no keyword is a result only this similar to the query or more (the model's floor).
        self.min_similarity = float(getattr(embedder, "similarity_floor", 0.0) if min_similarity is None
                                    else min_similarity)
        self.weight = weight
        self.kw_k = keyword_candidates
        self.sem_k = semantic_candidates
        self.keywords = KeywordSide(store, KEYWORD_ROW_BUDGET if keyword_row_budget is None else keyword_row_budget)
        self.repeat_factor = REPEAT_FACTOR  # a document's repeated passages among the best (diversity.py); 1.0: off
        self._stats_lock = threading.Lock()
        self._qvec: collections.OrderedDict[str, Any] = collections.OrderedDict()

    @property
    def semantic_available(self) -> bool:
        return self.embedder is not None and self.vectors is not None

    # ------------------------------------------------------------------ keyword side
    @property
    def row_budget(self) -> int:
        """Above this many chunks in the index, a query's rare words choose the rows to score (keywords.py)."""
        return self.keywords.row_budget

    @row_budget.setter
    def row_budget(self, value: int) -> None:
        self.keywords.row_budget = value

    def keyword_query(self, conn: Any, words: list[str]) -> str | None:
        """The FTS5 expression scored exactly for ``words`` (see :mod:`~plexor_folder_search.keywords`)."""
        return self.keywords.expression(conn, words)

    def _keyword(self, concepts: str) -> tuple[Any, Any]:
        return self.keywords.search(query_words(concepts), self.kw_k)

    def _exact(self, concepts: str | None, exact: list[str]) -> tuple[Any, Any]:
        """Chunks containing every phrase of ``exact`` (case-insensitive), scored by BM25 of phrases + concepts."""
        import numpy as np

        phrases = [p for p in (fts_phrase(t) for t in exact) if p]
        needles = [normalise(t) for t in exact]
        kw: dict[int, float] = {}
        with self.store.reader() as conn:
            if phrases:
                rows = conn.execute(
                    "SELECT rowid, -rank, body FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT 20000",
                    (" AND ".join(phrases),),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT id, 1.0, body FROM chunks WHERE instr(lower(body), ?) > 0 LIMIT 20000", (needles[0],)
                ).fetchall()
            for cid, score, body in rows:
                flat = normalise(body)
                if all(n in flat for n in needles):
                    kw[cid] = float(score)
            expr = fts_or(concepts) if concepts else None
            if expr and kw:
                # Concept words also count on the keyword side, among the chunks that passed the filter: BM25 of
                # "(phrases) AND (concept words)" is the phrases' score plus the concept words' score.
                if phrases:
                    query, limit = f"({' AND '.join(phrases)}) AND ({expr})", 20000
                    extra = conn.execute(MATCH_SQL, (query, limit)).fetchall()
                    for cid, score in extra:
                        if cid in kw:
                            kw[cid] = float(score)
                else:
                    extra = conn.execute(MATCH_SQL, (expr, max(self.kw_k * 5, 5000))).fetchall()
                    for cid, score in extra:
                        if cid in kw:
                            kw[cid] += float(score)
        if not kw:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        return np.fromiter(kw.keys(), dtype=np.int64, count=len(kw)), np.fromiter(kw.values(), dtype=np.float64, count=len(kw))

    # ------------------------------------------------------------------ semantic side
    def query_vector(self, text: str) -> Any:
        """The query's embedding (the last few hundred are kept)."""
        with self._stats_lock:
            vec = self._qvec.get(text)
            if vec is not None:
                self._qvec.move_to_end(text)
                return vec
        vec = self.embedder.embed_query(text)
        with self._stats_lock:
            self._qvec[text] = vec
            while len(self._qvec) > 256:
                self._qvec.popitem(last=False)
        return vec

    # ------------------------------------------------------------------ fusion
    def rank(self, concepts: str | None, exact: list[str], cap: int = 1000,
             weight: float | None = None) -> Ranking:
        """Rank chunks: ``exact`` phrases must all appear; ``concepts`` drive meaning and BM25."""
        import numpy as np

        w = self.weight if weight is None else weight
        concepts = (concepts or "").strip() or None
        exact = [t for t in (e.strip() for e in exact) if t]
        if not concepts and not exact:
            return Ranking.empty()
        use_sem = self.semantic_available and w > 0 and len(self.vectors) > 0
        kw_ids, kw_sc, s_ids, s_sims = self._candidates(concepts, exact, use_sem)
        cand = np.union1d(kw_ids, s_ids)
        if not len(cand):
            return Ranking.empty()
        top_kw = float(kw_sc.max()) if len(kw_sc) else 0.0
        k_part = np.zeros(len(cand), dtype=np.float64)
        if top_kw > 0:
            k_part[np.searchsorted(cand, kw_ids)] = kw_sc / top_kw
        s_raw = None
        if use_sem and len(s_ids):
            sims = s_sims.astype(np.float64)
            lo, hi = float(sims.min()), float(sims.max())
            span = hi - lo if hi > lo else 1.0
            s_raw = np.full(len(cand), np.nan)
            s_raw[np.searchsorted(cand, s_ids)] = sims
            s_part = np.where(np.isnan(s_raw), 0.0, (s_raw - lo) / span)
            score = (1 - w) * k_part + w * s_part
        else:
            score = k_part
        # A candidate scoring zero matched no keyword and was the least similar: not a result. Nor is one that
        # matched no keyword and is less similar than the model's floor: the nearest neighbours of nonsense are
        # still "nearest", and counting them made every query report the candidate cap as its matches.
        keep = score > 0
        if s_raw is not None and self.min_similarity > 0:
            keyword_hit = np.zeros(len(cand), dtype=bool)
            keyword_hit[np.searchsorted(cand, kw_ids)] = True
            keep &= keyword_hit | (np.nan_to_num(s_raw, nan=-1.0) >= self.min_similarity)
        cand, score, k_part = cand[keep], score[keep], k_part[keep]
        s_raw = None if s_raw is None else s_raw[keep]
        order = np.lexsort((cand, -score))
        if self.repeat_factor < 1.0 and len(order) > 1:
            score = diversify(self.store, cand, score, order[:DIVERSIFY_TOP], self.repeat_factor)
            order = np.lexsort((cand, -score))
        order = order[:cap]
        return Ranking(cand[order], score[order], k_part[order], None if s_raw is None else s_raw[order])

    def _candidates(self, concepts: str | None, exact: list[str], use_sem: bool) -> tuple[Any, Any, Any, Any]:
        """The keyword side's chunk ids and scores, and the semantic side's ids and similarities.

        With ``exact`` phrases only chunks holding them all are candidates (their similarity is looked up);
        otherwise the keyword search runs beside the nearest-neighbour search, when semantic search is on.
        """
        import numpy as np

        s_ids = np.empty(0, dtype=np.int64)
        s_sims = np.empty(0, dtype=np.float32)
        if exact:
            kw_ids, kw_sc = self._exact(concepts, exact)
            if use_sem and len(kw_ids):
                q = self.query_vector(concepts or " ".join(exact))
                s_ids, s_sims = self.vectors.search(q, 0).more(kw_ids)
        elif use_sem:
            assert concepts is not None
            future = _pool().submit(self._keyword, concepts)
            try:
                near = self.vectors.search(self.query_vector(concepts), self.sem_k)
            finally:
                kw_ids, kw_sc = future.result()
            m_ids, m_sims = near.more(kw_ids)
            s_ids = np.concatenate([near.ids, m_ids])
            s_sims = np.concatenate([near.sims, m_sims])
        else:
            assert concepts is not None
            kw_ids, kw_sc = self._keyword(concepts)
        return kw_ids, kw_sc, s_ids, s_sims

    def rank_documents(self, query: str, cap: int = 1000, weight: float | None = None) -> list[tuple[int, Hit]]:
        """Documents ranked by their best chunk: ``[(file_id, best_hit)]``."""
        import json

        hits = self.rank(query, [], cap=max(cap * 4, 2000), weight=weight)
        if not hits:
            return []
        with self.store.reader() as conn:
            owner = dict(conn.execute(
                "SELECT id, file_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(hits.ids.tolist()),),
            ).fetchall())
        best: dict[int, Hit] = {}
        for h in hits:
            fid = owner.get(h.chunk_id)
            if fid is not None and fid not in best:
                best[fid] = h
        return list(best.items())[:cap]


def make_snippet(body: str, exact: list[str], concepts: str | None, width: int = 320) -> tuple[str, list[str]]:
    """A window of ``body`` around the matches, with each match wrapped in ``**``; returns (snippet, matched)."""
    patterns: list[str] = []
    for term in exact:
        words = term.split()
        if words:
            patterns.append(r"\s+".join(re.escape(w) for w in words))
    for word in concept_words(concepts or ""):
        patterns.append(r"\b" + re.escape(word[: max(4, len(word) - 2)]) + r"\w*")
    spans: list[tuple[int, int]] = []
    if patterns:
        for m in re.finditer("|".join(f"(?:{p})" for p in patterns), body, re.IGNORECASE):
            if m.end() > m.start():
                spans.append((m.start(), m.end()))
    if len(body) <= width:
        start, end = 0, len(body)
    elif spans:
        starts = [s for s, _ in spans]
        best, best_count = starts[0], 0
        j = 0
        for i, s in enumerate(starts):
            while j < len(starts) and starts[j] < s + width - 40:
                j += 1
            if j - i > best_count:
                best, best_count = s, j - i
        start = max(0, best - 60)
        end = min(len(body), start + width)
    else:
        start, end = 0, width
    if start > 0:
        sp = body.rfind(" ", max(0, start - 20), start)
        start = sp + 1 if sp >= 0 else start
    if end < len(body):
        sp = body.find(" ", end, min(len(body), end + 20))
        end = sp if sp >= 0 else end
    out: list[str] = []
    matched: list[str] = []
    pos = start
    for s, e in spans:
        if e <= start or s >= end or s < pos:
            continue
        out.append(body[pos:s])
        out.append("**" + body[s:e] + "**")
        matched.append(body[s:e])
        pos = e
    out.append(body[pos:end])
    text = "".join(out).strip()
    return ("…" if start > 0 else "") + text + ("…" if end < len(body) else ""), list(dict.fromkeys(matched))
