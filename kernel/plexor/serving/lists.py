"""Which 2025-era sessions to tell that a list changed: only those that saw it before the change.

A session that fetched a list (``tools/list``, ``resources/list`` or ``resources/templates/list``,
``prompts/list``) is told once when that list changes, and not again until it fetches it anew; a
session that never fetched it is told nothing. Unsolicited notifications are not free: mcp 1.x's
``ClientSession`` fails with ``BrokenResourceError`` when one arrives while it closes, and a
short-lived client (open, list tools, call, close) never asked about the resources anyway.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LISTING", "LISTS", "saw", "unseen_change"]

LISTS = "plexor/lists"  # connection.state key: {kind: "seen" | "told"}, per list the session fetched
LISTING = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resources",
           "prompts/list": "prompts"}


def saw(state: dict[str, Any], method: str) -> None:
    """The session is fetching a list (``method``): a change from now on is one it has not seen."""
    if method in LISTING:
        state.setdefault(LISTS, {})[LISTING[method]] = "seen"


def unseen_change(state: dict[str, Any], kind: str) -> bool:
    """Whether to tell the session whose ``state`` this is that the ``kind`` list changed
    (``tools/list_changed``, ...); when so, it is noted as told until it fetches that list again."""
    lists = state.get(LISTS)
    name = kind.split("/")[0]
    if not isinstance(lists, dict) or lists.get(name) != "seen":
        return False
    lists[name] = "told"
    return True
