"""The catalog's vocabulary: a key, what a name resolves to, and the normal form names are compared in.

Every other module of the package builds on these; this one needs only the
standard library.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_INPUT", "CatalogError", "Entry", "Key", "norm"]

MAX_INPUT = 200

# A run of spaces, '_' or '-' between two letters or digits joins them: "page-down" -> "pagedown".
_JOIN = re.compile(r"(?<=[^\W_])[\s_\-]+(?=[^\W_])")
_SPACE = re.compile(r"\s+")


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
