"""The loss report: what of a tool's schema an agent framework's conversion lost (standard library only).

``losses(served, converted)`` walks the schema Plexor serves and, at every property and array item,
checks the schema the framework made of it (as JSON Schema) for: the type (an integer that became
a number is lost; an ``enum`` stands for its type), the enum values, the description (kept when
the converted one still contains it: some converters append what they do not support), the
``required`` list of every object, and every nested property. One line per loss, naming the path.
"""

from __future__ import annotations

from typing import Any

__all__ = ["losses"]


def _types(schema: dict[str, Any]) -> set[str]:
    typ = schema.get("type")
    if isinstance(typ, str):
        return {typ}
    if isinstance(typ, list):
        return {t for t in typ if isinstance(t, str)}
    found: set[str] = set()
    for option in schema.get("anyOf") or schema.get("oneOf") or ():
        if isinstance(option, dict):
            found |= _types(option)
    return found


def _enum(schema: dict[str, Any]) -> list[Any] | None:
    if isinstance(schema.get("enum"), list):
        return [v for v in schema["enum"] if v is not None]
    for option in schema.get("anyOf") or ():
        if isinstance(option, dict) and _enum(option) is not None:
            return _enum(option)
    return None


def _branch(schema: dict[str, Any], key: str) -> Any:
    """``schema[key]``, or the first ``anyOf`` branch's (a converter may keep null as a branch)."""
    if key in schema:
        return schema[key]
    for option in schema.get("anyOf") or ():
        if isinstance(option, dict) and key in option:
            return option[key]
    return None


def losses(served: dict[str, Any], converted: Any, path: str = "") -> list[str]:
    where = path or "(arguments)"
    if not isinstance(converted, dict):
        return [f"{where}: missing"]
    lost: list[str] = []
    enum = _enum(served)
    if enum is not None:
        if sorted(map(str, _enum(converted) or [])) != sorted(map(str, enum)):
            lost.append(f"{where}: enum {enum} became {_enum(converted)}")
    elif _types(served) - {"null"} and not _types(served) - {"null"} <= _types(converted):
        lost.append(f"{where}: type {sorted(_types(served))} became {sorted(_types(converted)) or 'none'}")
    described = served.get("description")
    if described and described not in str(_branch(converted, "description") or ""):
        lost.append(f"{where}: description lost")
    props = served.get("properties")
    if isinstance(props, dict) and props:
        theirs = _branch(converted, "properties") or {}
        required, kept = sorted(served.get("required") or []), sorted(_branch(converted, "required") or [])
        if required != kept:
            lost.append(f"{where}: required {required} became {kept}")
        for name, prop in props.items():
            if isinstance(prop, dict):
                lost += losses(prop, theirs.get(name), f"{path}.{name}" if path else name)
    items = served.get("items")
    if isinstance(items, dict):
        lost += losses(items, _branch(converted, "items"), f"{where}[]")
    return lost
