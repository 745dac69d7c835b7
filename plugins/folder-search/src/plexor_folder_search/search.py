"""Hybrid ranking: FTS5 BM25 and embedding cosine, fused with one weight.

Keyword scores are divided by the best keyword score among the candidates;
semantic scores (cosine) are min-max scaled over the candidates; the fused
score is ``(1 - w) * keyword + w * semantic``. ``w`` was tuned on SciFact's
*train* judgements (``bench/folder_search.py --tune``); with no embedding model
the ranking is keyword-only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Hit", "SearchEngine", "fts_or", "fts_phrase", "make_snippet", "normalise"]

DEFAULT_WEIGHT = 0.4
_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the to was were will with this these "
    "those which what when where who how not no but if then than so such into about".split()
)


@dataclass(slots=True)
class Hit:
    chunk_id: int
    score: float
    keyword: float
    semantic: float | None


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def fts_or(text: str, limit: int = 64) -> str | None:
    """An FTS5 OR-query of the distinct words of ``text`` (None when it has no words)."""
    seen: list[str] = []
    words = _WORD.findall(text.lower())
    # Stop words match nearly every chunk and make BM25 score them all; they add almost nothing to the ranking.
    content = [w for w in words if w not in STOPWORDS]
    for tok in content or words:
        if tok not in seen:
            seen.append(tok)
        if len(seen) >= limit:
            break
    return " OR ".join(_quote(t) for t in seen) if seen else None


def fts_phrase(term: str) -> str | None:
    """An FTS5 phrase for ``term`` (None when it has no word characters)."""
    words = _WORD.findall(term.lower())
    return _quote(" ".join(words)) if words else None


def concept_words(text: str) -> list[str]:
    return [t for t in dict.fromkeys(_WORD.findall(text.lower())) if len(t) > 2 and t not in STOPWORDS]


class SearchEngine:
    """Ranks one folder's chunks for a query."""

    def __init__(self, store: Any, vectors: Any, embedder: Any, weight: float = DEFAULT_WEIGHT,
                 keyword_candidates: int = 1000, semantic_candidates: int = 1000) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = embedder
        self.weight = weight
        self.kw_k = keyword_candidates
        self.sem_k = semantic_candidates

    @property
    def semantic_available(self) -> bool:
        return self.embedder is not None and self.vectors is not None

    def rank(self, concepts: str | None, exact: list[str], cap: int = 1000,
             weight: float | None = None) -> list[Hit]:
        """Rank chunks: ``exact`` phrases must all appear; ``concepts`` drive meaning and BM25."""
        import numpy as np

        w = self.weight if weight is None else weight
        concepts = (concepts or "").strip() or None
        exact = [t for t in (e.strip() for e in exact) if t]
        kw: dict[int, float] = {}
        must_filter = bool(exact)
        with self.store.reader() as conn:
            if exact:
                phrases = [p for p in (fts_phrase(t) for t in exact) if p]
                needles = [normalise(t) for t in exact]
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
                if concepts:
                    # Concept words also count on the keyword side, among the chunks that passed the filter.
                    expr = fts_or(concepts)
                    if expr and kw:
                        extra = conn.execute(
                            "SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT ?",
                            (expr, max(self.kw_k * 5, 5000)),
                        ).fetchall()
                        for cid, score in extra:
                            if cid in kw:
                                kw[cid] += float(score)
            elif concepts:
                expr = fts_or(concepts)
                if expr:
                    for cid, score in conn.execute(
                        "SELECT rowid, -rank FROM chunk_fts WHERE chunk_fts MATCH ? ORDER BY rank LIMIT ?",
                        (expr, self.kw_k),
                    ):
                        kw[cid] = float(score)
            else:
                return []
        sem: dict[int, float] = {}
        use_sem = self.semantic_available and w > 0
        if use_sem:
            ids, mat = self.vectors.snapshot()
            if len(ids):
                q = self.embedder.embed([concepts or " ".join(exact)])[0]
                if must_filter:
                    cand = np.fromiter(kw.keys(), dtype=np.int64, count=len(kw))
                    pos = np.searchsorted(ids, cand)
                    pos = np.clip(pos, 0, len(ids) - 1)
                    ok = ids[pos] == cand
                    if ok.any():
                        sims = mat[pos[ok]] @ q
                        sem = dict(zip(cand[ok].tolist(), sims.tolist(), strict=True))
                else:
                    sims = mat @ q
                    k = min(self.sem_k, len(sims))
                    top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
                    sem = dict(zip(ids[top].tolist(), sims[top].tolist(), strict=True))
                    missing = [c for c in kw if c not in sem]
                    if missing:
                        cand = np.asarray(missing, dtype=np.int64)
                        pos = np.clip(np.searchsorted(ids, cand), 0, len(ids) - 1)
                        ok = ids[pos] == cand
                        sem.update(zip(cand[ok].tolist(), sims[pos[ok]].tolist(), strict=True))
            else:
                use_sem = False
        top_kw = max(kw.values(), default=0.0)
        candidates = set(kw) | set(sem)
        if sem:
            lo, hi = min(sem.values()), max(sem.values())
            span = hi - lo if hi > lo else 1.0
        hits: list[Hit] = []
        for cid in candidates:
            k_part = kw.get(cid, 0.0) / top_kw if top_kw > 0 else 0.0
            if use_sem and sem:
                s_raw = sem.get(cid)
                s_part = (s_raw - lo) / span if s_raw is not None else 0.0
                score = (1 - w) * k_part + w * s_part
                hits.append(Hit(cid, score, k_part, s_raw))
            else:
                hits.append(Hit(cid, k_part, k_part, None))
        # A candidate scoring zero matched no keyword and was the least similar: not a result.
        hits = [h for h in hits if h.score > 0]
        hits.sort(key=lambda h: (-h.score, h.chunk_id))
        return hits[:cap]

    def rank_documents(self, query: str, cap: int = 1000, weight: float | None = None) -> list[tuple[int, Hit]]:
        """Documents ranked by their best chunk: ``[(file_id, best_hit)]``."""
        import json

        hits = self.rank(query, [], cap=max(cap * 4, 2000), weight=weight)
        if not hits:
            return []
        with self.store.reader() as conn:
            owner = dict(conn.execute(
                "SELECT id, file_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([h.chunk_id for h in hits]),),
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
