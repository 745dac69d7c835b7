"""Lists: their pages (:func:`page`, opaque cursors) and which 2025-era sessions to tell that a list changed:
only those that saw it before the change.

A session that fetched a list (``tools/list``, ``resources/list`` or ``resources/templates/list``,
``prompts/list``) is told once when that list changes, and not again until it fetches it anew; a
session that never fetched it is told nothing. Unsolicited notifications are not free: mcp 1.x's
``ClientSession`` fails with ``BrokenResourceError`` when one arrives while it closes, and a
short-lived client (open, list tools, call, close) never asked about the resources anyway.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, MutableMapping
from typing import TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

__all__ = ["LISTING", "LISTS", "offset", "page", "saw", "unseen_change"]

LISTS = "plexor/lists"  # connection.state key: {kind: "seen" | "told"}, per list the session fetched
T = TypeVar("T")
LISTING = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resources",
           "prompts/list": "prompts"}


def saw(state: MutableMapping[str, object], method: str) -> None:
    """The session is fetching a list (``method``): a change from now on is one it has not seen."""
    if method in LISTING:
        lists = state.setdefault(LISTS, {})
        if isinstance(lists, dict):
            lists[LISTING[method]] = "seen"


def unseen_change(state: Mapping[str, object], kind: str) -> bool:
    """Whether to tell the session whose ``state`` this is that the ``kind`` list changed
    (``tools/list_changed``, ...); when so, it is noted as told until it fetches that list again."""
    lists = state.get(LISTS)
    name = kind.split("/")[0]
    if not isinstance(lists, dict) or lists.get(name) != "seen":
        return False
    lists[name] = "told"
    return True


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def offset(cursor: str | None) -> int:
    """Where the page ``cursor`` names starts (0 without one); a cursor this server did not give is refused."""
    if not cursor:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor.encode()).decode()
        if raw.startswith("o:"):
            value = int(raw[2:])
            if value >= 0:
                return value
    except (ValueError, UnicodeDecodeError):
        pass
    raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}: pass back the nextCursor of the previous page, unchanged")


def page(items: list[T], cursor: str | None, size: int) -> tuple[list[T], str | None]:
    """The page of ``items`` that ``cursor`` (a previous ``nextCursor``, or none) starts, and the next cursor."""
    start = offset(cursor)
    end = start + size
    return items[start:end], (_cursor(end) if end < len(items) else None)
