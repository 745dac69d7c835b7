"""Parsing keyboard shortcuts ("cmd+shift+4", "⌘⇧4", "ctrl-alt-delete") into modifiers and one main key.

:func:`parse_shortcut` runs four steps: split the text into tokens, read the tokens
as keys (longest key name first), separate the modifiers from the one main key, and
describe the result with Apple's order and event flags.

Modifier flags are the device-independent bits shared by ``NSEventModifierFlags``
and ``CGEventFlags`` (AppKit NSEvent.h, CoreGraphics CGEventTypes.h, both from
IOKit's IOLLEvent.h): Caps Lock 1<<16, Shift 1<<17, Control 1<<18, Option 1<<19,
Command 1<<20, Fn 1<<23. The side-specific device bits (NX_DEVICEL*/R*KEYMASK)
are reported when the shortcut names a side ("right command").
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from plexor import InvalidArgument
from plexor_keyboard.catalog import Catalog
from plexor_keyboard.model import MAX_INPUT, Entry, Key

__all__ = ["MODIFIERS", "parse_shortcut"]


@dataclass(frozen=True)
class Modifier:
    family: str
    name: str
    glyph: str
    order: int  # position in Apple's canonical order
    bit: int
    nsevent: str
    cgevent: str
    left: str
    right: str | None
    left_device_mask: int | None
    right_device_mask: int | None


# Apple's Human Interface Guidelines list modifiers as Control, Option, Shift, Command
# (⌃⌥⇧⌘); macOS menus show Fn/Globe before them (🌐⌃F), and Caps Lock, which is
# rarely part of a shortcut, goes first.
MODIFIERS: tuple[Modifier, ...] = (
    Modifier("capslock", "Caps Lock", "⇪", 0, 16, "NSEventModifierFlagCapsLock", "kCGEventFlagMaskAlphaShift",
             "kVK_CapsLock", None, None, None),
    Modifier("function", "Fn", "fn", 1, 23, "NSEventModifierFlagFunction", "kCGEventFlagMaskSecondaryFn",
             "kVK_Function", None, None, None),
    Modifier("control", "Control", "⌃", 2, 18, "NSEventModifierFlagControl", "kCGEventFlagMaskControl",
             "kVK_Control", "kVK_RightControl", 0x00000001, 0x00002000),
    Modifier("option", "Option", "⌥", 3, 19, "NSEventModifierFlagOption", "kCGEventFlagMaskAlternate",
             "kVK_Option", "kVK_RightOption", 0x00000020, 0x00000040),
    Modifier("shift", "Shift", "⇧", 4, 17, "NSEventModifierFlagShift", "kCGEventFlagMaskShift",
             "kVK_Shift", "kVK_RightShift", 0x00000002, 0x00000004),
    Modifier("command", "Command", "⌘", 5, 20, "NSEventModifierFlagCommand", "kCGEventFlagMaskCommand",
             "kVK_Command", "kVK_RightCommand", 0x00000008, 0x00000010),
)
_BY_CONSTANT: dict[str, tuple[Modifier, str]] = {}
for _m in MODIFIERS:
    _BY_CONSTANT[_m.left] = (_m, "left" if _m.right else "only")
    if _m.right:
        _BY_CONSTANT[_m.right] = (_m, "right")

_SHIFT = next(m for m in MODIFIERS if m.family == "shift")

# Glyphs that may be glued to what follows ("⌘⇧4"); "^" is the caret notation for Control ("^C").
_GLUED = {"⌘": "⌘", "⇧": "⇧", "⌥": "⌥", "⌃": "⌃", "^": "⌃", "⇪": "⇪", "🌐": "🌐"}
_SEPARATORS = "+-"
_EXAMPLES = "Write shortcuts like 'cmd+shift+4', '⌘⇧4', 'ctrl-alt-delete' or 'Command + Option + Esc'."


@dataclass
class _Token:
    text: str
    sep: str  # what stood before it: "" (glued or first), " ", "+", "-"


@dataclass
class _Held:
    """One modifier family in the shortcut, with every side and key that named it."""

    mod: Modifier
    sides: list[str]
    keys: list[Key]
    written: list[str]
    implied: bool = False

    def also(self, side: str, key: Key, written: str) -> None:
        if side not in self.sides:
            self.sides.append(side)
            self.keys.append(key)
            self.written.append(written)


Read = list[tuple[str, Entry]]  # each key as written, with what it resolved to


# --------------------------------------------------------------- 1. tokens
def _clean(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("\ufe0f", "").replace("\ufe0e", "").strip()


def _word_end(s: str, i: int) -> int:
    while i < len(s) and not s[i].isspace() and s[i] not in _SEPARATORS:
        i += 1
    return i


def _peel_glyphs(word: str, sep: str) -> list[_Token]:
    """Modifier glyphs glued to the front of a word are tokens of their own: "⌘⇧4" -> ⌘ ⇧ 4."""
    tokens: list[_Token] = []
    while len(word) > 1 and word[0] in _GLUED:
        tokens.append(_Token(_GLUED[word[0]], "" if tokens else sep))
        word = word[1:]
    tokens.append(_Token(word, "" if tokens else sep))
    return tokens


def _tokenize(text: str) -> list[_Token]:
    """The words and glyphs of ``text``, each with the separator that stood before it."""
    s = _clean(text)
    tokens: list[_Token] = []
    i, n = 0, len(s)
    expect_key = True  # at the start and after a separator, '+' and '-' are keys ("cmd++", "⌘-")
    sep = ""
    while i < n:
        c = s[i]
        if c.isspace():
            if not expect_key and sep not in ("+", "-"):
                sep = " "
            i += 1
        elif c in _SEPARATORS and not expect_key and s[i + 1:].strip():
            sep, expect_key = c, True  # a separator between two tokens ("cmd+c", "ctrl - alt")
            i += 1
        else:
            word = c if c in _SEPARATORS else s[i:_word_end(s, i)]
            tokens.extend(_peel_glyphs(word, sep))
            i += len(word)
            sep, expect_key = "", False
    return tokens


# --------------------------------------------------------------- 2. keys
def _longest_name_at(tokens: list[_Token], i: int, catalog: Catalog) -> tuple[int, Entry] | None:
    """The widest run of 2-4 tokens from ``i``, joined by spaces or '-', that names a key ("page down")."""
    for width in (4, 3, 2):
        if i + width > len(tokens):
            continue
        span = tokens[i:i + width]
        if any(t.sep not in (" ", "-") for t in span[1:]):
            continue
        entry = catalog.exact(" ".join(t.text for t in span))
        if entry is not None:
            return width, entry
    return None


def _one_key(text: str, catalog: Catalog, shortcut: str) -> Entry:
    entry = catalog.exact(text)
    if entry is None:
        near = catalog.suggest(text, limit=1)
        hint = f"Did you mean {near[0]['key']['name']!r}? " if near else ""
        raise InvalidArgument(
            f"{text!r} in the shortcut {shortcut!r} is not a key name",
            hint + _EXAMPLES + " keyboard_lookup_keycode with fuzzy=true finds misspelt keys.",
            data={"shortcut": shortcut, "token": text},
        )
    return entry


def _resolve(tokens: list[_Token], catalog: Catalog, shortcut: str, merge: bool = True) -> Read:
    """Greedy longest match: "page down" and "right command" are one key even when spaced."""
    out: Read = []
    i = 0
    while i < len(tokens):
        hit = _longest_name_at(tokens, i, catalog) if merge and i + 1 < len(tokens) else None
        if hit is None:
            out.append((tokens[i].text, _one_key(tokens[i].text, catalog, shortcut)))
            i += 1
        else:
            width, entry = hit
            out.append((" ".join(t.text for t in tokens[i:i + width]), entry))
            i += width
    return out


def _read_keys(shortcut: str, catalog: Catalog) -> Read:
    """The keys of ``shortcut``, in the order written."""
    tokens = _tokenize(shortcut)
    read = _resolve(tokens, catalog, shortcut)
    if all(e.key.constant in _BY_CONSTANT for _, e in read) and any(
            " " in w and w.lower().rsplit(" ", 1)[1] in ("left", "right") for w, _ in read):
        # "shift right" read as Right Shift leaves no main key; word by word it is Shift + Right Arrow
        # ("right shift", side first, stays the modifier's name)
        unmerged = _resolve(tokens, catalog, shortcut, merge=False)
        if sum(e.key.constant not in _BY_CONSTANT for _, e in unmerged) == 1:
            return unmerged
    return read


# --------------------------------------------------------------- 3. modifiers and the main key
def _separate(read: Read) -> tuple[dict[str, _Held], Read]:
    """The modifiers held (by family, in the order first written) and the other keys."""
    held: dict[str, _Held] = {}
    others: Read = []
    for written, entry in read:
        found = _BY_CONSTANT.get(entry.key.constant)
        if found is None:
            others.append((written, entry))
            continue
        mod, side = found
        # an unqualified "cmd" names either Command key; "right cmd" / "lcmd" name one side
        if side == "left" and entry.kind != "side":
            side = "either"
        if mod.family in held:
            held[mod.family].also(side, entry.key, written)
        else:
            held[mod.family] = _Held(mod, [side], [entry.key], [written])
    return held, others


def _the_main_key(shortcut: str, read: Read, held: dict[str, _Held], others: Read) -> tuple[str, Entry]:
    """The one key that is not a modifier; an error when there is none or several."""
    if not others:
        listed = ", ".join(w for w, _ in read)
        raise InvalidArgument(
            f"the shortcut {shortcut!r} has no main key, only modifiers ({listed})",
            "Add the key pressed together with them, e.g. 'cmd+shift+4'. To look up a modifier key itself, "
            "use keyboard_lookup_keycode.",
            data={"shortcut": shortcut, "modifiers": [h.mod.name for h in held.values()]},
        )
    if len(others) > 1:
        listed = ", ".join(f"{w!r} ({e.key.name})" for w, e in others)
        raise InvalidArgument(
            f"the shortcut {shortcut!r} has {len(others)} main keys: {listed}",
            "A shortcut is any number of modifiers (⌃ ⌥ ⇧ ⌘ fn) plus exactly one other key; give a sequence as "
            "separate shortcuts. If these words are one key's name, check its spelling with keyboard_lookup_keycode.",
            data={"shortcut": shortcut, "main_keys": [e.key.constant for _, e in others]},
        )
    return others[0]


def _imply_shift(held: dict[str, _Held], main: Entry, catalog: Catalog) -> bool:
    """A shifted symbol as the main key ("cmd+?") holds Shift even when the shortcut does not say it."""
    if not main.shifted or "shift" in held:
        return False
    held["shift"] = _Held(_SHIFT, ["either"], [catalog.by_constant[_SHIFT.left]], [], implied=True)
    return True


# --------------------------------------------------------------- 4. the answer
def _flag(mod: Modifier) -> dict[str, Any]:
    mask = 1 << mod.bit
    return {"mask": mask, "hex": f"0x{mask:X}", "bit": mod.bit, "nsevent": mod.nsevent, "cgevent": mod.cgevent}


def _device_mask(h: _Held) -> int:
    """The side-specific device bits of the sides named (0 when no side was)."""
    device = 0
    for side in h.sides:
        if side == "left" and h.mod.left_device_mask:
            device |= h.mod.left_device_mask
        elif side == "right" and h.mod.right_device_mask:
            device |= h.mod.right_device_mask
    return device


def _describe_modifier(h: _Held) -> dict[str, Any]:
    item: dict[str, Any] = {
        "modifier": h.mod.family,
        "name": h.mod.name,
        "glyph": h.mod.glyph,
        "side": h.sides[0] if len(h.sides) == 1 else "both",
        "key": h.keys[0].to_dict(),
        "flag": _flag(h.mod),
    }
    if len(h.keys) > 1:
        item["keys"] = [k.to_dict() for k in h.keys]
    device = _device_mask(h)
    if device:
        item["device_mask"] = {"mask": device, "hex": f"0x{device:X}"}
    if h.implied:
        item["implied"] = True
    return item


def _describe(shortcut: str, held: dict[str, _Held], written_key: str, main: Entry, shift_implied: bool) -> dict[str, Any]:
    ordered = sorted(held.values(), key=lambda h: h.mod.order)
    flags = 0
    for h in ordered:
        flags |= 1 << h.mod.bit
    key = main.key
    out: dict[str, Any] = {
        "found": True,
        "shortcut": shortcut,
        "canonical": "".join(h.mod.glyph for h in ordered) + key.symbol,
        "canonical_text": "-".join([h.mod.name for h in ordered] + [key.name]),
        "modifiers": [_describe_modifier(h) for h in ordered],
        "key": key.to_dict(),
        "modifier_flags": flags,
        "modifier_flags_hex": f"0x{flags:X}",
    }
    if main.alternatives:
        out["key_alternatives"] = [k.to_dict() for k in main.alternatives]
        if main.note:
            out["note"] = main.note
    if shift_implied:
        out["shift_implied"] = True
        out["note"] = (f"{written_key!r} is typed with Shift + {key.name}, so the event carries Shift "
                       f"(0x{1 << _SHIFT.bit:X}) with the {key.name} key's code.")
    return out


def parse_shortcut(shortcut: str, catalog: Catalog) -> dict[str, Any]:
    """Split ``shortcut`` into modifiers (Apple's order, with flag masks) and exactly one main key."""
    if not isinstance(shortcut, str) or not shortcut.strip():
        raise InvalidArgument("shortcut is empty", _EXAMPLES)
    if len(shortcut) > MAX_INPUT:
        raise InvalidArgument(f"shortcut is {len(shortcut)} characters long", f"Keep it under {MAX_INPUT} characters.")
    read = _read_keys(shortcut, catalog)
    held, others = _separate(read)
    written_key, main = _the_main_key(shortcut, read, held, others)
    shift_implied = _imply_shift(held, main, catalog)
    return _describe(shortcut, held, written_key, main, shift_implied)
