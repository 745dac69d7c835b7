"""F-keys' printed secondary functions ("F4+"), per keyboard generation."""

from __future__ import annotations

from typing import Any

from plexor import NotFound
from plexor_keyboard.model import Key

__all__ = ["answer_fkey_plus", "secondary"]


def secondary(
    n: int, layout_id: str, layouts: dict[str, dict[str, Any]], fkeys: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """F{n}'s printed secondary function on ``layout_id`` and on every other layout."""
    fk = fkeys.get(n)
    if fk is None:
        return {
            "fkey": f"F{n}",
            "layout": layout_id,
            "function": None,
            "note": "Only F1-F12 carry printed secondary functions on Apple keyboards; "
                    f"F{n} is a plain function key.",
        }
    info = layouts[layout_id]
    by_layout = fk["secondary_by_layout"]
    function = by_layout.get(layout_id)
    return {
        "fkey": f"F{n}",
        "layout": layout_id,
        "applies_to": list(info["applies_to"]),
        "function": function,
        "on_other_layouts": {lid: by_layout.get(lid) for lid in layouts if lid != layout_id},
        "differs_between_layouts": bool(fk["differs_in_any_layout"]),
        "event": dict(fk["event_for_secondary"]),
        "notes": list(info.get("notes", [])),
        "usage": _usage(n, function, has_keys=bool(info["keys"])),
    }


def _usage(n: int, function: str | None, *, has_keys: bool) -> str:
    if not has_keys:
        return f"This layout has no physical F{n} key with a printed function; see notes."
    if function is None:
        return f"F{n} has no printed secondary function on this layout: it only sends F{n}."
    return (f"By default pressing F{n} performs {function} and fn+F{n} sends F{n}; with "
            "'Use F1, F2, etc. keys as standard function keys' turned on it is the other way round.")


def answer_fkey_plus(raw: str, key: Key | None, n: int, secondary_function: dict[str, Any]) -> dict[str, Any]:
    """The answer to "F{n}+": the F-key itself and its secondary function."""
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
        "secondary_function": secondary_function,
    }
