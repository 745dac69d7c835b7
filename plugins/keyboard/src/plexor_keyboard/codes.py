"""Key codes as input: reading "49", "0x31" or "code 0", and answering a reverse lookup by code."""

from __future__ import annotations

import re
from typing import Any

from plexor import NotFound
from plexor_keyboard.model import Key

__all__ = ["answer_code", "code_of", "is_negative_code"]

_HEX = re.compile(r"^0x([0-9a-f]{1,8})$")
_CODE = re.compile(r"^(?:code|keycode|kc|vk)[:=#]?(0x[0-9a-f]{1,8}|\d{1,9})$")
_DEC = re.compile(r"^\d{1,9}$")
_NEGATIVE = re.compile(r"^-(?:0x[0-9a-f]+|\d+)$")


def code_of(q: str) -> int | None:
    """The code a normalised query spells ("0x31", "code 0", "49"), or ``None``.

    A single digit is not a code: "5" names the key labelled 5.
    """
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


def is_negative_code(q: str) -> bool:
    return _NEGATIVE.match(q) is not None


def answer_code(
    raw: str, code: int, by_code: dict[int, list[Key]], unused: tuple[int, ...], undocumented: dict[int, tuple[str, str]]
) -> dict[str, Any]:
    """Every key with ``code`` (the first is the answer); :class:`NotFound` saying why when none has it."""
    keys = by_code.get(code)
    if keys:
        return {
            "found": True,
            "query": raw,
            "match": "code",
            "key": keys[0].to_dict(),
            "keys": [k.to_dict() for k in keys],
            "alternatives": [k.to_dict() for k in keys[1:]],
        }
    message, guidance = _why_no_key(code, by_code, unused, undocumented)
    raise NotFound(message, guidance, data={"code": code, "hex": f"0x{code:02X}"})


def _why_no_key(
    code: int, by_code: dict[int, list[Key]], unused: tuple[int, ...], undocumented: dict[int, tuple[str, str]]
) -> tuple[str, str]:
    hexed = f"0x{code:02X}"
    if code in undocumented:
        fkey, what = undocumented[code]
        return (f"no kVK constant has code {code} ({hexed})",
                f"{hexed} is not in Apple's Events.h; third-party code has observed it for {what}, the secondary "
                f"function of {fkey} on current keyboards (such keys arrive as system-defined events, not kVK "
                f"codes). Ask '{fkey}+' for details.")
    used = sorted(by_code)
    if 0 <= code <= used[-1]:
        lower = max((c for c in used if c < code), default=None)
        upper = min((c for c in used if c > code), default=None)
        near = "; ".join(f"0x{c:02X} = {by_code[c][0].name}" for c in (lower, upper) if c is not None)
        return (f"no kVK constant has code {code} ({hexed}): it is unused in Apple's Events.h",
                f"The unused codes are {', '.join(f'0x{c:02X}' for c in unused)}. Nearest used: {near}.")
    return (f"no kVK constant has code {code} ({hexed})",
            f"macOS virtual key codes run from 0 to {used[-1]} (0x00-0x{used[-1]:02X}). Pass a code in that range, "
            "or a key name.")
