"""The steps that turn the packaged data and the curated names into the catalog's tables.

:func:`plexor_keyboard.catalog.build` runs them in order:

1. :func:`read_constants` reads Apple's constants and pairs each with its curated name;
2. :func:`index_names` plans every name a key answers to (its name, constant, curated
   aliases, side and keypad forms, ambiguous names) and refuses contradictions;
3. :func:`read_categories`, :func:`read_layouts` and :func:`read_fkeys` check the rest of
   the data against the keys.

Each step raises :class:`~plexor_keyboard.model.CatalogError` when the data contradicts itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from importlib import resources
from typing import Any, NamedTuple

from plexor_keyboard import names
from plexor_keyboard.layouts import LAYOUT_ALIASES, LAYOUT_IDS
from plexor_keyboard.model import CatalogError, Entry, Key, norm

__all__ = [
    "index_names",
    "load_json",
    "read_categories",
    "read_constants",
    "read_fkeys",
    "read_layouts",
    "search_forms",
    "unused_codes",
]


class _Planned(NamedTuple):
    """What a normalised name will resolve to."""

    constant: str
    kind: str
    alias: str
    alternatives: tuple[str, ...] = ()
    note: str | None = None


def load_json(name: str) -> Any:
    """One of the package's data files."""
    return json.loads(resources.files("plexor_keyboard").joinpath("data").joinpath(name).read_text(encoding="utf-8"))


def read_constants(constants: list[dict[str, Any]]) -> dict[str, Key]:
    """Apple's constants (kvk.json) as keys with their curated names but no aliases yet, in the file's order."""
    given = {c["constant"] for c in constants}
    described = set(names.KEYS)
    if described != given:
        raise CatalogError(f"names.KEYS and kvk.json differ: missing {sorted(given - described)}, "
                           f"extra {sorted(described - given)}")
    bare: dict[str, Key] = {}
    for c in constants:
        code = int(c["code"])
        if f"0x{code:02X}" != c["hex"].upper().replace("0X", "0x"):
            raise CatalogError(f"{c['constant']}: code {c['code']} and hex {c['hex']} disagree")
        name, category, symbol, _ = names.KEYS[c["constant"]]
        bare[c["constant"]] = Key(c["constant"], code, name, category, symbol, c["group"], ())
    return bare


# ---------------------------------------------------------------------------- names
class _NamePlan:
    """Every normalised name and the key it will name, filled in step by step.

    A name may be claimed once. A second claim for another key is an error unless
    the name is declared in :data:`names.AMBIGUOUS` (then its first candidate wins and
    the others become alternatives) or the claim is ``only_if_free``.
    """

    def __init__(self, bare: dict[str, Key]) -> None:
        self.bare = bare
        self.planned: dict[str, _Planned] = {}
        self.aliases: dict[str, list[str]] = {c: [] for c in bare}  # what each key lists as its aliases
        self.ambiguous = {norm(a): (a, cands, note) for a, (cands, note) in names.AMBIGUOUS.items()}

    def add(self, alias: str, constant: str, kind: str, *, only_if_free: bool = False, listed: bool = True) -> None:
        """Claim ``alias`` for ``constant``; ``listed``: shown in the key's ``aliases`` (generated forms are not)."""
        n = norm(alias)
        if not n:
            return
        if n in self.ambiguous:
            if not self._add_ambiguous(n, alias, constant, kind):
                return
        elif n in self.planned:
            if self.planned[n].constant != constant and not only_if_free:
                raise CatalogError(f"alias {alias!r} names both {self.planned[n].constant} and {constant}; "
                                   "declare it in names.AMBIGUOUS or drop one")
            return
        else:
            self.planned[n] = _Planned(constant, kind, alias)
        if listed:
            self._list(constant, alias, kind)

    def _add_ambiguous(self, n: str, alias: str, constant: str, kind: str) -> bool:
        """Claim a declared ambiguous name; ``False`` when ``constant`` is only an alternative for it."""
        _, candidates, note = self.ambiguous[n]
        if constant not in candidates:
            raise CatalogError(f"alias {alias!r} of {constant} is declared ambiguous between {candidates}")
        if constant != candidates[0]:
            return False  # it is listed as an alternative of the primary key
        held = self.planned.get(n)
        if held is None or held.kind in ("side", "constant"):  # a curated kind wins over a generated one
            self.planned[n] = _Planned(constant, kind, alias, tuple(candidates[1:]), note)
        return True

    def _list(self, constant: str, alias: str, kind: str) -> None:
        if kind in ("name", "constant") or alias == self.bare[constant].name:
            return
        if alias not in self.aliases[constant]:
            self.aliases[constant].append(alias)

    def add_unclaimed_ambiguous(self) -> None:
        """Ambiguous names no step claimed ("enter", "del", "+") go to their first candidate, listed first."""
        for n, (written, candidates, note) in self.ambiguous.items():
            if n in self.planned:
                continue
            kind = "abbreviation" if any(ch.isalnum() for ch in n) else "glyph"
            self.planned[n] = _Planned(candidates[0], kind, written, tuple(candidates[1:]), note)
            if written not in self.aliases[candidates[0]]:
                self.aliases[candidates[0]].insert(0, written)


def _claim_names_and_constants(plan: _NamePlan) -> None:
    for constant, key in plan.bare.items():
        plan.add(key.name, constant, "name")
    for constant in plan.bare:
        plan.add(constant, constant, "constant")
        tail = constant[len("kVK_"):]
        plan.add(tail, constant, "constant", only_if_free=True)  # "Space", "ANSI_A"
        for prefix in ("ANSI_", "ISO_", "JIS_"):
            if tail.startswith(prefix):
                plan.add(tail[len(prefix):], constant, "constant", only_if_free=True)


def _claim_curated(plan: _NamePlan) -> None:
    for constant, (_, category, symbol, kinds) in names.KEYS.items():
        if category in ("punctuation", "iso-jis"):
            plan.add(symbol, constant, "symbol")
        for kind, words in kinds.items():
            for word in words:
                plan.add(word, constant, kind)


def _side_forms(side: str, word: str, position: int) -> Iterator[tuple[str, bool]]:
    """The names of one side of a modifier ("right cmd", "cmd right", "rcmd"...), each with whether it is listed."""
    yield f"{side} {word}", position < 2 or not word.isalpha()
    yield f"{word} {side}", False
    if word.isascii() and word.isalpha():
        yield f"{side[0]}{word}", position == 1
        yield f"{word}_{side[0]}", False
    yield f"{side}{word}", False


def _claim_sides(plan: _NamePlan) -> None:
    for left, right, words in names.SIDES.values():
        for position, word in enumerate(words):
            for side, constant in (("left", left), ("right", right)):
                for form, listed in _side_forms(side, word, position):
                    plan.add(form, constant, "side", listed=listed)


def _claim_keypad(plan: _NamePlan) -> None:
    for constant, parts in names.KEYPAD_PARTS.items():
        for prefix in names.KEYPAD_PREFIXES:
            for position, part in enumerate(parts):
                listed = prefix in ("keypad", "numpad") and position < 2
                plan.add(f"{prefix} {part}", constant, "keypad", listed=listed)


def index_names(bare: dict[str, Key]) -> tuple[dict[str, Key], dict[str, Entry]]:
    """The keys with their aliases, and the index from every normalised name to what it resolves to.

    The order of the steps matters: a key's own name is claimed first, curated aliases
    before generated forms, so a generated form never takes a name from a curated one.
    """
    plan = _NamePlan(bare)
    _claim_names_and_constants(plan)
    _claim_curated(plan)
    _claim_sides(plan)
    _claim_keypad(plan)
    plan.add_unclaimed_ambiguous()
    keys = {constant: replace(key, aliases=tuple(plan.aliases[constant])) for constant, key in bare.items()}
    index = {
        n: Entry(keys[p.constant], p.kind, p.alias, tuple(keys[a] for a in p.alternatives), p.note)
        for n, p in plan.planned.items()
    }
    return keys, index


# ------------------------------------------------------------------- the other tables
def read_categories(keys: tuple[Key, ...]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The categories (id -> name, description) and every name a caller may use for one (normal form -> id)."""
    categories = {cid: {"name": title, "description": desc} for cid, title, desc, _ in names.CATEGORIES}
    category_names = {norm(form): cid for cid, title, _, extra in names.CATEGORIES for form in (cid, title, *extra)}
    unknown = {k.category for k in keys} - set(categories)
    if unknown:
        raise CatalogError(f"keys use undeclared categories {sorted(unknown)}")
    return categories, category_names


def read_layouts(fkeys_data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The layouts of fkeys.json, which must be the ids the layout vocabulary names."""
    layouts = dict(fkeys_data["layouts"])
    if tuple(layouts) != LAYOUT_IDS:
        raise CatalogError(f"fkeys.json has the layouts {list(layouts)}; layouts.LAYOUT_IDS says {list(LAYOUT_IDS)}")
    for form, lid in LAYOUT_ALIASES.items():
        if lid not in layouts:
            raise CatalogError(f"layout alias {form!r} points at unknown layout {lid!r}")
    return layouts


def read_fkeys(
    fkeys_data: dict[str, Any], keys: dict[str, Key]
) -> tuple[dict[int, dict[str, Any]], dict[int, tuple[str, str]]]:
    """F1-F12 by number, and the codes third parties observed for secondary functions (code -> (F-key, function))."""
    fkeys: dict[int, dict[str, Any]] = {}
    undocumented: dict[int, tuple[str, str]] = {}
    for item in fkeys_data["fkeys"]:
        fkeys[int(item["fkey"][1:])] = item
        primary = keys[item["primary"]["constant"]]
        if primary.code != item["primary"]["code"]:
            raise CatalogError(f"fkeys.json gives {item['fkey']} code {item['primary']['code']}, kvk.json {primary.code}")
        vk = item["event_for_secondary"].get("undocumented_virtual_keycode")
        if vk:
            undocumented[int(vk, 16)] = (item["fkey"], item["secondary_modern"])
    return fkeys, undocumented


def unused_codes(by_code: dict[int, list[Key]]) -> tuple[int, ...]:
    """The codes up to the highest one that no constant uses."""
    return tuple(c for c in range(0, max(by_code) + 1) if c not in by_code)


def search_forms(keys: tuple[Key, ...]) -> dict[str, tuple[str, tuple[str, ...], str]]:
    """Each key's name, aliases and constant in normal form, for substring search."""
    return {k.constant: (norm(k.name), tuple(norm(a) for a in k.aliases), norm(k.constant)) for k in keys}
