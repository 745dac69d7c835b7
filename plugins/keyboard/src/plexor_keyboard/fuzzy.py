"""Typo-tolerant matching of key names, on RapidFuzz (imported only when a lookup misses).

The distance is Damerau-Levenshtein: a deletion ("escpe"), an insertion
("esscape"), a substitution ("escapr") and a transposition of neighbours
("escpae", "retrun") each cost one edit. Plain Levenshtein, or difflib's ratio
that the original server used, counts a transposition as two edits and ranks
"retrun" too far from "return". RapidFuzz computes the distance in C++ over
every alias in one call (``process.extract``), which keeps a miss well under a
millisecond; a pure-Python Damerau-Levenshtein over the ~1,400 aliases would
cost tens of milliseconds per query.

Confidence is the normalised similarity ``1 - distance / max(len(a), len(b))``,
so one typo in a six-letter name scores 0.83 and an exact match 1.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from plexor_keyboard.model import Entry, Key

__all__ = ["MIN_CONFIDENCE", "FuzzyIndex"]

MIN_CONFIDENCE = 0.55


class FuzzyIndex:
    """Every alphanumeric alias of at least two characters, matched by Damerau-Levenshtein similarity."""

    def __init__(self, index: dict[str, Entry]) -> None:
        from rapidfuzz.distance import DamerauLevenshtein

        self._scorer = DamerauLevenshtein.normalized_similarity
        self.choices: list[str] = []
        self.entries: list[Entry] = []
        for form, entry in index.items():
            if len(form) >= 2 and any(ch.isalnum() for ch in form):
                self.choices.append(form)
                self.entries.append(entry)

    def nearest(self, query: str, limit: int = 5) -> list[tuple[Key, str, float]]:
        """The ``limit`` best keys for ``query`` (already normalised): ``(key, alias, confidence)``, best first."""
        if not query:
            return []
        from rapidfuzz import process

        hits = process.extract(query, self.choices, scorer=self._scorer, limit=None,
                               score_cutoff=MIN_CONFIDENCE)
        # One suggestion per key (its best alias); on equal scores prefer the key's own name,
        # then the shorter alias, then the lower code, so the order is stable.
        best: dict[str, tuple[float, int, int, int, str, Key]] = {}
        for _, score, i in hits:
            entry = self.entries[i]
            key = entry.key
            rank = (score, 1 if entry.kind == "name" else 0, -len(self.choices[i]), -key.code, entry.alias, key)
            if key.constant not in best or rank[:4] > best[key.constant][:4]:
                best[key.constant] = rank
        ordered = sorted(best.values(), key=lambda r: r[:4], reverse=True)[:limit]
        return [(r[5], r[4], float(r[0])) for r in ordered]
