"""The key catalog: Apple's 120 ``kVK_*`` constants joined with names, categories and aliases.

Built once, on first use, from the package data (``data/kvk.json`` and
``data/fkeys.json``, copies of the project's reference files) and
:mod:`plexor_keyboard.names`. Every lookup after that is a dictionary probe on a
normalised form of the input, which is why exact lookups cost microseconds.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from plexor import InvalidArgument, NotFound
from plexor_keyboard import names

__all__ = [
    "DEFAULT_LAYOUT",
    "Catalog",
    "CatalogError",
    "Entry",
    "Key",
    "get_catalog",
    "norm",
]

DEFAULT_LAYOUT = "apple_silicon_2020plus"
MAX_INPUT = 200

_JOIN = re.compile(r"(?<=[^\W_])[\s_\-]+(?=[^\W_])")
_SPACE = re.compile(r"\s+")
_HEX = re.compile(r"^0x([0-9a-f]{1,8})$")
_CODE = re.compile(r"^(?:code|keycode|kc|vk)[:=#]?(0x[0-9a-f]{1,8}|\d{1,9})$")
_DEC = re.compile(r"^\d{1,9}$")
_NEGATIVE = re.compile(r"^-(?:0x[0-9a-f]+|\d+)$")
_FPLUS = re.compile(r"^f(\d{1,3})\+$")
_FILLER = ("key", "button")


class CatalogError(Exception):
    """The curated names contradict themselves (a test-time error, never seen by users)."""


def norm(text: str) -> str:
    """The form every lookup compares: case-folded, NFKC, word separators between letters removed.

    ``"Page-Down"`` and ``"page down"`` both become ``"pagedown"``; ``"keypad -"``
    becomes ``"keypad-"`` (a separator next to a symbol is kept as that symbol).
    """
    text = unicodedata.normalize("NFKC", text).casefold().replace("\ufe0f", "").replace("\ufe0e", "")
    return _SPACE.sub("", _JOIN.sub("", text.strip()))


@dataclass(frozen=True, slots=True)
class Key:
    """One virtual key: Apple's constant and code, and the names people use for it."""

    constant: str
    code: int
    name: str
    category: str
    symbol: str
    apple_group: str
    aliases: tuple[str, ...]

    @property
    def hex(self) -> str:
        return f"0x{self.code:02X}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "constant": self.constant,
            "code": self.code,
            "hex": self.hex,
            "category": self.category,
            "aliases": list(self.aliases),
            "symbol": self.symbol,
            "apple_group": self.apple_group,
        }


@dataclass(frozen=True, slots=True)
class Entry:
    """What one normalised name resolves to: a key, and for ambiguous names the other candidates."""

    key: Key
    kind: str  # name, constant, abbreviation, glyph, symbol, shifted, side, keypad, word
    alias: str  # the alias as written in the catalog
    alternatives: tuple[Key, ...] = ()
    note: str | None = None

    @property
    def shifted(self) -> bool:
        return self.kind == "shifted"


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
    layout_names: dict[str, str]
    fkeys: dict[int, dict[str, Any]]
    caveats: list[str]
    unused_codes: tuple[int, ...]
    undocumented_codes: dict[int, tuple[str, str]]
    search_forms: dict[str, tuple[str, tuple[str, ...], str]] = field(default_factory=dict)
    _fuzzy: Any = None

    # ------------------------------------------------------------------ lookup
    def exact(self, text: str) -> Entry | None:
        """The entry for a name, alias, glyph or constant, or ``None``; no code or fuzzy logic."""
        q = norm(text)
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
        self, key_name: str, *, fuzzy: bool = False, layout: str | None = None, default_layout: str = DEFAULT_LAYOUT
    ) -> dict[str, Any]:
        """Resolve ``key_name`` the way ``keyboard_lookup_keycode`` documents; returns the result object."""
        raw = key_name
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
        explicit = layout is not None and bool(str(layout).strip())
        layout_id = self.resolve_layout(layout) if explicit else default_layout
        if raw.strip() == "":
            return self._answer(raw, self.index[norm("space")], layout_id, explicit_layout=explicit)
        q = norm(raw)
        m = _FPLUS.match(q)
        if m:
            return self._fkey_plus(raw, int(m.group(1)), layout_id)
        code = self._code_of(q)
        if code is not None:
            return self._by_code(raw, code)
        if _NEGATIVE.match(q):
            raise InvalidArgument(
                f"{raw!r} is not a key code: codes are never negative",
                "macOS virtual key codes run from 0 to 126 (0x00-0x7E); pass one of those, or a key name.",
            )
        entry = self.exact(raw)
        if entry is not None:
            result = self._answer(raw, entry, layout_id, explicit_layout=explicit)
            if len(q) == 1 and q.isdigit():
                # "5" names the key labelled 5, but could mean code 5: offer that too.
                coded = self.by_code.get(int(q), [])
                result["alternatives"] += [dict(k.to_dict(), reason=f"the key whose code is {int(q)}") for k in coded]
                result["note"] = (f"'{q}' is taken as the key labelled {q}; the key with code {int(q)} is "
                                  f"{coded[0].name if coded else 'none'}. Ask '0x{int(q):02X}' or 'code {q}' "
                                  f"to look up by code.")
            return result
        suggestions = self.suggest(raw)
        if fuzzy:
            return {"found": False, "query": raw, "suggestions": suggestions}
        if suggestions:
            best = suggestions[0]
            k = best["key"]
            raise NotFound(
                f"no key is named {raw!r}",
                f"The closest is {k['name']!r} ({k['constant']}, code {k['code']} / {k['hex']}, "
                f"confidence {best['confidence']}). Pass fuzzy=true to get up to five ranked suggestions with "
                f"confidence, or call keyboard_search_keys to browse.",
                data={"query": raw, "best_suggestion": best},
            )
        raise NotFound(
            f"no key is named {raw!r}, and nothing is close",
            "Check the spelling, or call keyboard_search_keys (by category: keyboard_list_categories) to browse "
            "the 120 keys. Names, aliases ('cmd', 'pgdn'), glyphs ('⌘'), constants ('kVK_Space') and codes "
            "('49', '0x31') are all accepted.",
            data={"query": raw},
        )

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
            n = int(entry.key.name[1:])
            out["secondary_function"] = self.secondary(n, layout_id)
        return out

    @staticmethod
    def _code_of(q: str) -> int | None:
        m = _HEX.match(q)
        if m:
            return int(m.group(1), 16)
        m = _CODE.match(q)
        if m:
            v = m.group(1)
            return int(v, 16) if v.startswith("0x") else int(v)
        if _DEC.match(q) and len(q) >= 2:
            return int(q)
        return None

    def _by_code(self, raw: str, code: int) -> dict[str, Any]:
        keys = self.by_code.get(code)
        if keys:
            return {
                "found": True,
                "query": raw,
                "match": "code",
                "key": keys[0].to_dict(),
                "keys": [k.to_dict() for k in keys],
                "alternatives": [k.to_dict() for k in keys[1:]],
            }
        hexed = f"0x{code:02X}"
        if code in self.undocumented_codes:
            fkey, what = self.undocumented_codes[code]
            raise NotFound(
                f"no kVK constant has code {code} ({hexed})",
                f"{hexed} is not in Apple's Events.h; third-party code has observed it for {what}, the secondary "
                f"function of {fkey} on current keyboards (such keys arrive as system-defined events, not kVK "
                f"codes). Ask '{fkey}+' for details.",
                data={"code": code, "hex": hexed},
            )
        used = sorted(self.by_code)
        if 0 <= code <= max(used):
            lower = max((c for c in used if c < code), default=None)
            upper = min((c for c in used if c > code), default=None)
            near = "; ".join(f"0x{c:02X} = {self.by_code[c][0].name}" for c in (lower, upper) if c is not None)
            raise NotFound(
                f"no kVK constant has code {code} ({hexed}): it is unused in Apple's Events.h",
                f"The unused codes are {', '.join(f'0x{c:02X}' for c in self.unused_codes)}. Nearest used: {near}.",
                data={"code": code, "hex": hexed},
            )
        raise NotFound(
            f"no kVK constant has code {code} ({hexed})",
            f"macOS virtual key codes run from 0 to {max(used)} (0x00-0x{max(used):02X}). Pass a code in that range, "
            "or a key name.",
            data={"code": code, "hex": hexed},
        )

    # ----------------------------------------------------------- F-keys
    def resolve_layout(self, layout: str | None) -> str:
        """A layout id from fkeys.json, from its id or a friendly form ('intel', 'external')."""
        if layout is None or not str(layout).strip():
            return DEFAULT_LAYOUT
        q = norm(str(layout))
        found = self.layout_names.get(q)
        if found is None:
            raise InvalidArgument(
                f"unknown layout {layout!r}",
                "Use one of: " + "; ".join(
                    f"{lid} ({', '.join(info['applies_to'][:1])})" for lid, info in self.layouts.items()
                ) + f". Leave it out for {DEFAULT_LAYOUT} (current Apple silicon Macs and Magic Keyboards).",
                data={"layouts": list(self.layouts)},
            )
        return found

    def secondary(self, n: int, layout_id: str) -> dict[str, Any]:
        """F{n}'s printed secondary function on ``layout_id`` and on every other layout."""
        info = self.layouts[layout_id]
        fk = self.fkeys.get(n)
        if fk is None:
            return {
                "fkey": f"F{n}",
                "layout": layout_id,
                "function": None,
                "note": "Only F1-F12 carry printed secondary functions on Apple keyboards; "
                        f"F{n} is a plain function key.",
            }
        by_layout = fk["secondary_by_layout"]
        function = by_layout.get(layout_id)
        others = {lid: by_layout.get(lid) for lid in self.layouts if lid != layout_id}
        out: dict[str, Any] = {
            "fkey": f"F{n}",
            "layout": layout_id,
            "applies_to": list(info["applies_to"]),
            "function": function,
            "on_other_layouts": others,
            "differs_between_layouts": bool(fk["differs_in_any_layout"]),
            "event": dict(fk["event_for_secondary"]),
            "notes": list(info.get("notes", [])),
        }
        if not info["keys"]:
            out["usage"] = f"This layout has no physical F{n} key with a printed function; see notes."
        elif function is None:
            out["usage"] = f"F{n} has no printed secondary function on this layout: it only sends F{n}."
        else:
            out["usage"] = (f"By default pressing F{n} performs {function} and fn+F{n} sends F{n}; with "
                            "'Use F1, F2, etc. keys as standard function keys' turned on it is the other way round.")
        return out

    def _fkey_plus(self, raw: str, n: int, layout_id: str) -> dict[str, Any]:
        key = self.by_constant.get(f"kVK_F{n}")
        if key is None:
            raise NotFound(
                f"there is no F{n} key",
                "macOS has F1 to F20 (kVK_F1 ... kVK_F20); F1+ to F12+ give the printed secondary functions.",
                data={"query": raw},
            )
        return {
            "found": True,
            "query": raw,
            "match": "fkey_secondary",
            "key": key.to_dict(),
            "alternatives": [],
            "secondary_function": self.secondary(n, layout_id),
        }

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
        q = norm(category)
        found = self.category_names.get(q)
        if found is None:
            import difflib

            near = difflib.get_close_matches(q, list(self.category_names), n=1, cutoff=0.6)
            hint = f"Did you mean {self.category_names[near[0]]!r}? " if near else ""
            raise InvalidArgument(
                f"unknown category {category!r}",
                hint + "Categories: " + ", ".join(self.categories) + " (keyboard_list_categories describes them).",
                data={"categories": list(self.categories)},
            )
        return found

    def in_category(self, category_id: str) -> list[Key]:
        return [k for k in self.keys if k.category == category_id]

    def search(self, query: str | None, category: str | None) -> dict[str, Any]:
        cat = self.resolve_category(category) if category is not None and category.strip() else None
        pool = self.in_category(cat) if cat else list(self.keys)
        if query is None or query == "":
            return {"found": bool(pool), "query": query, "category": cat, "count": len(pool),
                    "keys": [k.to_dict() for k in pool]}
        if len(query) > MAX_INPUT:
            raise InvalidArgument(f"query is {len(query)} characters long", f"Keep it under {MAX_INPUT} characters.")
        q = norm(query) if query.strip() else norm("space")
        ranks: dict[str, int] = {}
        code = self._code_of(q)
        if code is not None:
            for k in self.by_code.get(code, []):
                ranks[k.constant] = 0
        entry = self.exact(query) if query.strip() else self.index.get(q)
        if entry is not None:
            ranks.setdefault(entry.key.constant, 0)
            for alt in entry.alternatives:
                ranks.setdefault(alt.constant, 1)
        for key in pool:
            name, aliases, constant = self.search_forms[key.constant]
            if name.startswith(q):
                rank = 2
            elif q in name:
                rank = 3
            elif any(a.startswith(q) for a in aliases):
                rank = 4
            elif any(q in a for a in aliases):
                rank = 5
            elif q in constant:
                rank = 6
            else:
                continue
            ranks[key.constant] = min(rank, ranks.get(key.constant, rank))
        hits = [k for k in pool if k.constant in ranks]
        hits.sort(key=lambda k: (ranks[k.constant], k.code))
        out: dict[str, Any] = {"found": bool(hits), "query": query, "category": cat, "count": len(hits),
                               "keys": [k.to_dict() for k in hits]}
        if not hits:
            out["suggestions"] = [s for s in self.suggest(query) if cat is None or s["key"]["category"] == cat]
        return out

    def categories_summary(self) -> list[dict[str, Any]]:
        out = []
        for cid, info in self.categories.items():
            members = self.in_category(cid)
            out.append({
                "id": cid,
                "name": info["name"],
                "description": info["description"],
                "count": len(members),
                "examples": [k.name for k in members[:5]],
                "resource": f"keycode://category/{cid}",
            })
        return out

    def aliases_table(self) -> dict[str, Any]:
        """Every alias (as written) with the key it names, its kind, and for ambiguous ones the others."""
        table: dict[str, Any] = {}
        for entry in self.index.values():
            if entry.kind == "constant":
                continue
            item: dict[str, Any] = {"constant": entry.key.constant, "name": entry.key.name, "code": entry.key.code,
                                    "kind": entry.kind}
            if entry.alternatives:
                item["alternatives"] = [k.constant for k in entry.alternatives]
            table.setdefault(entry.alias, item)
        return table


# ---------------------------------------------------------------------- build
def _load_json(name: str) -> Any:
    return json.loads(resources.files("plexor_keyboard").joinpath("data").joinpath(name).read_text(encoding="utf-8"))


def build() -> Catalog:
    """Join the packaged Apple data with the curated names; raise :class:`CatalogError` on any contradiction."""
    kvk = _load_json("kvk.json")
    fk = _load_json("fkeys.json")
    constants = kvk["constants"]
    described = set(names.KEYS)
    given = {c["constant"] for c in constants}
    if described != given:
        raise CatalogError(f"names.KEYS and kvk.json differ: missing {sorted(given - described)}, "
                           f"extra {sorted(described - given)}")

    aliases: dict[str, list[str]] = {c: [] for c in given}
    # first pass: keys without their alias lists (filled in below), so entries can point at them
    raw: dict[str, dict[str, Any]] = {}
    for c in constants:
        name, category, symbol, _ = names.KEYS[c["constant"]]
        raw[c["constant"]] = {"code": int(c["code"]), "name": name, "category": category, "symbol": symbol,
                              "group": c["group"]}
        if f"0x{int(c['code']):02X}" != c["hex"].upper().replace("0X", "0x"):
            raise CatalogError(f"{c['constant']}: code {c['code']} and hex {c['hex']} disagree")

    # (norm -> (constant, kind, alias, alternatives, note))
    plan: dict[str, tuple[str, str, str, tuple[str, ...], str | None]] = {}
    ambiguous = {norm(a): (a, cands, note) for a, (cands, note) in names.AMBIGUOUS.items()}

    def add(alias: str, constant: str, kind: str, *, only_if_free: bool = False, listed: bool = True) -> None:
        # ``listed``: shown in the key's ``aliases``; generated permutations match but are not listed
        n = norm(alias)
        if not n:
            return
        if n in ambiguous:
            written, cands, note = ambiguous[n]
            if constant not in cands:
                raise CatalogError(f"alias {alias!r} of {constant} is declared ambiguous between {cands}")
            if constant != cands[0]:
                return  # listed as an alternative of the primary key
            if n not in plan or plan[n][1] in ("side", "constant"):
                plan[n] = (constant, kind, alias, tuple(cands[1:]), note)
            if listed and alias not in aliases[constant] and kind not in ("name", "constant") \
                    and alias != raw[constant]["name"]:
                aliases[constant].append(alias)
            return
        if n in plan:
            if plan[n][0] != constant:
                if only_if_free:
                    return
                raise CatalogError(f"alias {alias!r} names both {plan[n][0]} and {constant}; "
                                   "declare it in names.AMBIGUOUS or drop one")
            return
        plan[n] = (constant, kind, alias, (), None)
        if listed and kind not in ("name", "constant") and alias not in aliases[constant]:
            aliases[constant].append(alias)

    for const, info in raw.items():
        add(info["name"], const, "name")
    for const in raw:
        add(const, const, "constant")
        tail = const[len("kVK_"):]
        add(tail, const, "constant", only_if_free=True)
        for prefix in ("ANSI_", "ISO_", "JIS_"):
            if tail.startswith(prefix):
                add(tail[len(prefix):], const, "constant", only_if_free=True)
    for const, (_, category, symbol, kinds) in names.KEYS.items():
        if category in ("punctuation", "iso-jis"):
            add(symbol, const, "symbol")
        for kind, words in kinds.items():
            for word in words:
                add(word, const, kind)
    for left, right, words in names.SIDES.values():
        for i, w in enumerate(words):
            for side, const in (("left", left), ("right", right)):
                add(f"{side} {w}", const, "side", listed=i < 2 or not w.isalpha())
                add(f"{w} {side}", const, "side", listed=False)
                if w.isascii() and w.isalpha():
                    add(f"{side[0]}{w}", const, "side", listed=i == 1)
                    add(f"{w}_{side[0]}", const, "side", listed=False)
                add(f"{side}{w}", const, "side", listed=False)
    for const, parts in names.KEYPAD_PARTS.items():
        for prefix in names.KEYPAD_PREFIXES:
            for j, part in enumerate(parts):
                add(f"{prefix} {part}", const, "keypad", listed=prefix in ("keypad", "numpad") and j < 2)
    for n, (written, cands, note) in ambiguous.items():
        if n not in plan:
            kind = "abbreviation" if any(ch.isalnum() for ch in n) else "glyph"
            plan[n] = (cands[0], kind, written, tuple(cands[1:]), note)
            if written not in aliases[cands[0]]:
                aliases[cands[0]].insert(0, written)

    keys: dict[str, Key] = {
        const: Key(const, info["code"], info["name"], info["category"], info["symbol"], info["group"],
                   tuple(aliases[const]))
        for const, info in raw.items()
    }
    index = {
        n: Entry(keys[const], kind, alias, tuple(keys[a] for a in alts), note)
        for n, (const, kind, alias, alts, note) in plan.items()
    }
    ordered = tuple(sorted(keys.values(), key=lambda k: k.code))
    by_code: dict[int, list[Key]] = {}
    for k in ordered:
        by_code.setdefault(k.code, []).append(k)

    categories = {cid: {"name": title, "description": desc} for cid, title, desc, _ in names.CATEGORIES}
    category_names: dict[str, str] = {}
    for cid, title, _, extra in names.CATEGORIES:
        for form in (cid, title, *extra):
            category_names[norm(form)] = cid
    unknown = {k.category for k in ordered} - set(categories)
    if unknown:
        raise CatalogError(f"keys use undeclared categories {sorted(unknown)}")

    layouts = dict(fk["layouts"])
    layout_names = {norm(lid): lid for lid in layouts}
    for form, lid in names.LAYOUT_ALIASES.items():
        if lid not in layouts:
            raise CatalogError(f"layout alias {form!r} points at unknown layout {lid!r}")
        layout_names[norm(form)] = lid
    fkeys: dict[int, dict[str, Any]] = {}
    undocumented: dict[int, tuple[str, str]] = {}
    for item in fk["fkeys"]:
        n = int(item["fkey"][1:])
        fkeys[n] = item
        primary = keys[item["primary"]["constant"]]
        if primary.code != item["primary"]["code"]:
            raise CatalogError(f"fkeys.json gives {item['fkey']} code {item['primary']['code']}, kvk.json {primary.code}")
        vk = item["event_for_secondary"].get("undocumented_virtual_keycode")
        if vk:
            undocumented[int(vk, 16)] = (item["fkey"], item["secondary_modern"])

    used = set(by_code)
    unused = tuple(c for c in range(0, max(used) + 1) if c not in used)

    search_forms = {
        k.constant: (norm(k.name), tuple(norm(a) for a in k.aliases), norm(k.constant)) for k in ordered
    }
    return Catalog(
        keys=ordered,
        by_constant=keys,
        by_code=by_code,
        index=index,
        categories=categories,
        category_names=category_names,
        layouts=layouts,
        layout_names=layout_names,
        fkeys=fkeys,
        caveats=list(fk.get("caveats", [])),
        unused_codes=unused,
        undocumented_codes=undocumented,
        search_forms=search_forms,
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
