"""The key catalog: Apple's 120 ``kVK_*`` constants joined with names, categories and aliases.

Built once, on first use, from the package data (``data/kvk.json`` and
``data/fkeys.json``, copies of the project's reference files) and
:mod:`plexor_keyboard.names`; :func:`build` lists the steps, which live in
:mod:`plexor_keyboard.builder`. Every lookup after that is a dictionary probe on a
normalised form of the input, which is why exact lookups cost microseconds.

What else a lookup may answer lives beside this module: codes in
:mod:`~plexor_keyboard.codes`, F-key functions in :mod:`~plexor_keyboard.fkeys`,
browsing in :mod:`~plexor_keyboard.browse`, layouts in :mod:`~plexor_keyboard.layouts`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plexor import InvalidArgument, NotFound
from plexor_keyboard import browse, builder
from plexor_keyboard.codes import answer_code, code_of, is_negative_code
from plexor_keyboard.fkeys import answer_fkey_plus, secondary
from plexor_keyboard.layouts import DEFAULT_LAYOUT, find_layout, layout_id
from plexor_keyboard.model import MAX_INPUT, CatalogError, Entry, Key, norm

if TYPE_CHECKING:  # pragma: no cover
    from plexor_keyboard.fuzzy import FuzzyIndex

__all__ = [
    "DEFAULT_LAYOUT",
    "MAX_INPUT",
    "Catalog",
    "CatalogError",
    "Entry",
    "Key",
    "build",
    "get_catalog",
    "norm",
]

_FPLUS = re.compile(r"^f(\d{1,3})\+$")
_FILLER = ("key", "button")


@dataclass
class Catalog:
    """All keys and every way of naming them."""

    keys: tuple[Key, ...]
    by_constant: dict[str, Key]
    by_code: dict[int, list[Key]]
    index: dict[str, Entry]
    categories: dict[str, dict[str, Any]]
    category_names: dict[str, str]
    layouts: dict[str, dict[str, Any]]
    fkeys: dict[int, dict[str, Any]]
    caveats: list[str]
    unused_codes: tuple[int, ...]
    undocumented_codes: dict[int, tuple[str, str]]
    search_forms: dict[str, tuple[str, tuple[str, ...], str]]
    _fuzzy: FuzzyIndex | None = None

    # ------------------------------------------------------------------ lookup
    def exact(self, text: str) -> Entry | None:
        """The entry for a name, alias, glyph or constant, or ``None``; no code or fuzzy logic."""
        return self._probe(norm(text))

    def _probe(self, q: str) -> Entry | None:
        """:meth:`exact` on a normalised query; also tries it without "the ..." and "... key"."""
        entry = self.index.get(q)
        if entry is None and q:
            for filler in _FILLER:
                if q.endswith(filler) and len(q) > len(filler):
                    entry = self.index.get(q[: -len(filler)])
                    if entry is not None:
                        break
            if entry is None and q.startswith("the") and len(q) > 3:
                entry = self.index.get(q[3:])
        return entry

    def lookup(
        self,
        key_name: str,
        *,
        fuzzy: bool = False,
        layout: str | None = None,
        default_layout: str | None = DEFAULT_LAYOUT,
    ) -> dict[str, Any]:
        """Resolve ``key_name`` the way ``keyboard_lookup_keycode`` documents; returns the result object.

        In order: a blank is the space bar, "F{n}+" an F-key's secondary function, a
        code a reverse lookup, then names; a miss gives suggestions or a not-found error.
        ``layout`` and ``default_layout`` take any form of the layout vocabulary.
        """
        raw = key_name
        _check_key_name(raw)
        explicit = layout is not None and bool(str(layout).strip())
        layout_id = self.resolve_layout(layout) if explicit else self.resolve_layout(default_layout)
        if raw.strip() == "":  # " " or a no-break space: the space bar itself
            return self._answer(raw, self.index["space"], layout_id, explicit_layout=explicit)
        q = norm(raw)
        m = _FPLUS.match(q)
        if m:
            n = int(m.group(1))
            return answer_fkey_plus(raw, self.by_constant.get(f"kVK_F{n}"), n, self.secondary(n, layout_id))
        code = code_of(q)
        if code is not None:
            return answer_code(raw, code, self.by_code, self.unused_codes, self.undocumented_codes)
        if is_negative_code(q):
            raise InvalidArgument(
                f"{raw!r} is not a key code: codes are never negative",
                "macOS virtual key codes run from 0 to 126 (0x00-0x7E); pass one of those, or a key name.",
            )
        entry = self._probe(q)
        if entry is None:
            return self._miss(raw, fuzzy)
        result = self._answer(raw, entry, layout_id, explicit_layout=explicit)
        if len(q) == 1 and q.isdigit():
            self._offer_the_code_reading(result, int(q))
        return result

    def _answer(self, raw: str, entry: Entry, layout_id: str, *, explicit_layout: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "found": True,
            "query": raw,
            "match": entry.kind,
            "matched_alias": entry.alias,
            "key": entry.key.to_dict(),
            "alternatives": [k.to_dict() for k in entry.alternatives],
        }
        if entry.note:
            out["note"] = entry.note
        if entry.shifted:
            out["shift_required"] = True
            out["note"] = (f"{entry.alias!r} is typed with Shift + {entry.key.name} (US layout); "
                           f"the key code is the {entry.key.name} key's.")
        if explicit_layout and entry.key.category == "function-keys":
            out["secondary_function"] = self.secondary(int(entry.key.name[1:]), layout_id)
        return out

    def _offer_the_code_reading(self, result: dict[str, Any], digit: int) -> None:
        """"5" names the key labelled 5, but could mean code 5: offer that too."""
        coded = self.by_code.get(digit, [])
        result["alternatives"] += [dict(k.to_dict(), reason=f"the key whose code is {digit}") for k in coded]
        result["note"] = (f"'{digit}' is taken as the key labelled {digit}; the key with code {digit} is "
                          f"{coded[0].name if coded else 'none'}. Ask '0x{digit:02X}' or 'code {digit}' "
                          f"to look up by code.")

    def _miss(self, raw: str, fuzzy: bool) -> dict[str, Any]:
        """No key has this name: the suggestions with ``fuzzy``, else a not-found error naming the closest."""
        suggestions = self.suggest(raw)
        if fuzzy:
            return {"found": False, "query": raw, "suggestions": suggestions}
        if not suggestions:
            raise NotFound(
                f"no key is named {raw!r}, and nothing is close",
                "Check the spelling, or call keyboard_search_keys (by category: keyboard_list_categories) to browse "
                "the 120 keys. Names, aliases ('cmd', 'pgdn'), glyphs ('⌘'), constants ('kVK_Space') and codes "
                "('49', '0x31') are all accepted.",
                data={"query": raw},
            )
        best = suggestions[0]
        k = best["key"]
        raise NotFound(
            f"no key is named {raw!r}",
            f"The closest is {k['name']!r} ({k['constant']}, code {k['code']} / {k['hex']}, "
            f"confidence {best['confidence']}). Pass fuzzy=true to get up to five ranked suggestions with "
            f"confidence, or call keyboard_search_keys to browse.",
            data={"query": raw, "best_suggestion": best},
        )

    # ----------------------------------------------------------- F-keys
    def resolve_layout(self, layout: str | None) -> str:
        """A layout id from its id or a short form ('intel', 'external'); see :mod:`plexor_keyboard.layouts`."""
        if layout is None or not str(layout).strip():
            return DEFAULT_LAYOUT
        text = str(layout)
        return find_layout(text) or layout_id(text)

    def secondary(self, n: int, layout_id: str) -> dict[str, Any]:
        """F{n}'s printed secondary function on ``layout_id`` and on every other layout."""
        return secondary(n, layout_id, self.layouts, self.fkeys)

    # ----------------------------------------------------------- fuzzy
    def suggest(self, text: str, limit: int = 5) -> list[dict[str, Any]]:
        """Up to ``limit`` keys nearest to ``text``, each with the alias matched and a 0-1 confidence."""
        from plexor_keyboard.fuzzy import FuzzyIndex

        if self._fuzzy is None:
            self._fuzzy = FuzzyIndex(self.index)
        return [
            {"key": key.to_dict(), "matched": alias, "confidence": round(score, 3)}
            for key, alias, score in self._fuzzy.nearest(norm(text), limit)
        ]

    # ----------------------------------------------------------- browse
    def resolve_category(self, category: str) -> str:
        """A category id from its id, title or another name ('numpad'); an unknown one gets a did-you-mean."""
        return browse.resolve_category(category, self.category_names, self.categories)

    def in_category(self, category_id: str) -> list[Key]:
        return [k for k in self.keys if k.category == category_id]

    def search(self, query: str | None, category: str | None) -> dict[str, Any]:
        """Keys whose names contain ``query``, best first, within ``category`` when given."""
        cat = self.resolve_category(category) if category is not None and category.strip() else None
        pool = self.in_category(cat) if cat else list(self.keys)
        if query is None or query == "":
            return {"found": bool(pool), "query": query, "category": cat, "count": len(pool),
                    "keys": [k.to_dict() for k in pool]}
        if len(query) > MAX_INPUT:
            raise InvalidArgument(f"query is {len(query)} characters long", f"Keep it under {MAX_INPUT} characters.")
        q = norm(query) if query.strip() else "space"
        ranks = self._exact_ranks(q, query)
        browse.rank_by_text(q, pool, self.search_forms, ranks)
        hits = sorted((k for k in pool if k.constant in ranks), key=lambda k: (ranks[k.constant], k.code))
        out: dict[str, Any] = {"found": bool(hits), "query": query, "category": cat, "count": len(hits),
                               "keys": [k.to_dict() for k in hits]}
        if not hits:
            out["suggestions"] = [s for s in self.suggest(query) if cat is None or s["key"]["category"] == cat]
        return out

    def _exact_ranks(self, q: str, query: str) -> dict[str, int]:
        """Rank 0 for the keys ``q`` names exactly or by code, 1 for an ambiguous name's alternatives."""
        ranks: dict[str, int] = {}
        code = code_of(q)
        if code is not None:
            for k in self.by_code.get(code, []):
                ranks[k.constant] = 0
        entry = self._probe(q) if query.strip() else self.index.get(q)
        if entry is not None:
            ranks.setdefault(entry.key.constant, 0)
            for alt in entry.alternatives:
                ranks.setdefault(alt.constant, 1)
        return ranks

    def categories_summary(self) -> list[dict[str, Any]]:
        return browse.categories_summary(self.categories, self.in_category)

    def aliases_table(self) -> dict[str, Any]:
        """Every alias (as written) with the key it names, its kind, and for ambiguous ones the others."""
        return browse.aliases_table(self.index)


def _check_key_name(raw: str) -> None:
    if len(raw) > MAX_INPUT:
        raise InvalidArgument(
            f"key_name is {len(raw)} characters long; a key name is at most {MAX_INPUT}",
            "Pass one key name, glyph, constant or code, e.g. 'escape', '⌘', 'kVK_Space' or '0x31'.",
        )
    if raw == "" or (raw.strip() == "" and raw not in (" ", "\u00a0")):
        raise InvalidArgument(
            "key_name is empty",
            "Pass a key name ('return'), an alias ('esc'), a glyph ('⌘'), a constant ('kVK_Space'), "
            "a code ('49' or '0x31') or 'F4+' for an F-key's secondary function.",
        )


# ---------------------------------------------------------------------- build
def build() -> Catalog:
    """Join the packaged Apple data with the curated names; raise :class:`CatalogError` on any contradiction."""
    bare = builder.read_constants(builder.load_json("kvk.json")["constants"])
    by_constant, index = builder.index_names(bare)
    keys = tuple(sorted(by_constant.values(), key=lambda k: k.code))
    by_code: dict[int, list[Key]] = {}
    for k in keys:
        by_code.setdefault(k.code, []).append(k)
    categories, category_names = builder.read_categories(keys)
    fk = builder.load_json("fkeys.json")
    fkeys, undocumented = builder.read_fkeys(fk, by_constant)
    return Catalog(
        keys=keys,
        by_constant=by_constant,
        by_code=by_code,
        index=index,
        categories=categories,
        category_names=category_names,
        layouts=builder.read_layouts(fk),
        fkeys=fkeys,
        caveats=list(fk.get("caveats", [])),
        unused_codes=builder.unused_codes(by_code),
        undocumented_codes=undocumented,
        search_forms=builder.search_forms(keys),
    )


_lock = threading.Lock()
_catalog: Catalog | None = None


def get_catalog() -> Catalog:
    """The catalog, built on first use (thread-safe) and shared afterwards: it is immutable data."""
    global _catalog
    if _catalog is None:
        with _lock:
            if _catalog is None:
                _catalog = build()
    return _catalog
