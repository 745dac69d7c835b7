"""Browsing the keys: categories, substring search ranks, and the table of every alias."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plexor import InvalidArgument
from plexor_keyboard.model import Entry, Key, norm

__all__ = ["aliases_table", "categories_summary", "rank_by_text", "resolve_category"]


def resolve_category(category: str, category_names: dict[str, str], categories: dict[str, Any]) -> str:
    """The category id ``category`` names (its id, title or another name), or an error with a did-you-mean."""
    q = norm(category)
    found = category_names.get(q)
    if found is None:
        import difflib

        near = difflib.get_close_matches(q, list(category_names), n=1, cutoff=0.6)
        hint = f"Did you mean {category_names[near[0]]!r}? " if near else ""
        raise InvalidArgument(
            f"unknown category {category!r}",
            hint + "Categories: " + ", ".join(categories) + " (keyboard_list_categories describes them).",
            data={"categories": list(categories)},
        )
    return found


def _text_rank(q: str, name: str, aliases: tuple[str, ...], constant: str) -> int | None:
    """How well ``q`` matches a key's normalised forms: 2 (name starts with it) to 6 (in its constant)."""
    if name.startswith(q):
        return 2
    if q in name:
        return 3
    if any(a.startswith(q) for a in aliases):
        return 4
    if any(q in a for a in aliases):
        return 5
    if q in constant:
        return 6
    return None


def rank_by_text(
    q: str, pool: list[Key], search_forms: dict[str, tuple[str, tuple[str, ...], str]], ranks: dict[str, int]
) -> None:
    """Add to ``ranks`` (constant -> rank, lower is better) every key of ``pool`` whose forms contain ``q``."""
    for key in pool:
        rank = _text_rank(q, *search_forms[key.constant])
        if rank is not None:
            ranks[key.constant] = min(rank, ranks.get(key.constant, rank))


def categories_summary(
    categories: dict[str, dict[str, Any]], members_of: Callable[[str], list[Key]]
) -> list[dict[str, Any]]:
    """Each category with its description, how many keys it has and a few of them."""
    out = []
    for cid, info in categories.items():
        members = members_of(cid)
        out.append({
            "id": cid,
            "name": info["name"],
            "description": info["description"],
            "count": len(members),
            "examples": [k.name for k in members[:5]],
            "resource": f"keycode://category/{cid}",
        })
    return out


def aliases_table(index: dict[str, Entry]) -> dict[str, Any]:
    """Every alias (as written) with the key it names, its kind, and for ambiguous ones the others."""
    table: dict[str, Any] = {}
    for entry in index.values():
        if entry.kind == "constant":
            continue
        item: dict[str, Any] = {"constant": entry.key.constant, "name": entry.key.name, "code": entry.key.code,
                                "kind": entry.kind}
        if entry.alternatives:
            item["alternatives"] = [k.constant for k in entry.alternatives]
        table.setdefault(entry.alias, item)
    return table
