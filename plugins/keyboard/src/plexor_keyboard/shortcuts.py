"""Parsing keyboard shortcuts ("cmd+shift+4", "⌘⇧4", "ctrl-alt-delete") into modifiers and one main key.

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
from plexor_keyboard.catalog import MAX_INPUT, Catalog, Entry, Key

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

# Glyphs that may be glued to what follows ("⌘⇧4"); "^" is the caret notation for Control ("^C").
_GLUED = {"⌘": "⌘", "⇧": "⇧", "⌥": "⌥", "⌃": "⌃", "^": "⌃", "⇪": "⇪", "🌐": "🌐"}
_SEPARATORS = "+-"
_EXAMPLES = "Write shortcuts like 'cmd+shift+4', '⌘⇧4', 'ctrl-alt-delete' or 'Command + Option + Esc'."


@dataclass
class _Token:
    text: str
    sep: str  # what stood before it: "" (glued or first), " ", "+", "-"


def _tokenize(text: str) -> list[_Token]:
    s = unicodedata.normalize("NFKC", text).replace("\ufe0f", "").replace("\ufe0e", "").strip()
    tokens: list[_Token] = []
    i, n = 0, len(s)
    expect = True
    sep = ""
    while i < n:
        c = s[i]
        if c.isspace():
            if not expect and sep not in ("+", "-"):
                sep = " "
            i += 1
            continue
        if c in _SEPARATORS and not expect and s[i + 1:].strip():
            sep = c  # a separator between two tokens ("cmd+c", "ctrl - alt")
            expect = True
            i += 1
            continue
        if c in _SEPARATORS:
            # where a key is expected, or at the very end, '+' and '-' are keys ("cmd++", "⌘-")
            tokens.append(_Token(c, sep))
            i += 1
        else:
            j = i
            while j < n and not s[j].isspace() and s[j] not in _SEPARATORS:
                j += 1
            word = s[i:j]
            i = j
            # peel glued modifier glyphs off the front: "⌘⇧4" -> ⌘ ⇧ 4
            first = True
            while len(word) > 1 and word[0] in _GLUED:
                tokens.append(_Token(_GLUED[word[0]], sep if first else ""))
                word = word[1:]
                first = False
            tokens.append(_Token(word, sep if first else ""))
        sep = ""
        expect = False
    return tokens


def _resolve(tokens: list[_Token], catalog: Catalog, shortcut: str, merge: bool = True) -> list[tuple[str, Entry]]:
    """Greedy longest match: "page down" and "right command" are one key even when spaced."""
    out: list[tuple[str, Entry]] = []
    i = 0
    while i < len(tokens):
        hit: tuple[int, Entry] | None = None
        for width in (4, 3, 2) if merge else ():
            if i + width > len(tokens):
                continue
            span = tokens[i:i + width]
            if any(t.sep not in (" ", "-") for t in span[1:]):
                continue
            entry = catalog.exact(" ".join(t.text for t in span))
            if entry is not None:
                hit = (width, entry)
                break
        if hit is None:
            text = tokens[i].text
            entry = catalog.exact(text)
            if entry is None:
                near = catalog.suggest(text, limit=1)
                hint = f"Did you mean {near[0]['key']['name']!r}? " if near else ""
                raise InvalidArgument(
                    f"{text!r} in the shortcut {shortcut!r} is not a key name",
                    hint + _EXAMPLES + " keyboard_lookup_keycode with fuzzy=true finds misspelt keys.",
                    data={"shortcut": shortcut, "token": text},
                )
            hit = (1, entry)
        width, entry = hit
        out.append((" ".join(t.text for t in tokens[i:i + width]), entry))
        i += width
    return out


def _flag(mod: Modifier) -> dict[str, Any]:
    mask = 1 << mod.bit
    return {"mask": mask, "hex": f"0x{mask:X}", "bit": mod.bit, "nsevent": mod.nsevent, "cgevent": mod.cgevent}


def parse_shortcut(shortcut: str, catalog: Catalog) -> dict[str, Any]:
    """Split ``shortcut`` into modifiers (Apple's order, with flag masks) and exactly one main key."""
    if not isinstance(shortcut, str) or not shortcut.strip():
        raise InvalidArgument("shortcut is empty", _EXAMPLES)
    if len(shortcut) > MAX_INPUT:
        raise InvalidArgument(f"shortcut is {len(shortcut)} characters long", f"Keep it under {MAX_INPUT} characters.")
    tokens = _tokenize(shortcut)
    resolved = _resolve(tokens, catalog, shortcut)
    if all(e.key.constant in _BY_CONSTANT for _, e in resolved) and any(
            " " in w and w.lower().rsplit(" ", 1)[1] in ("left", "right") for w, _ in resolved):
        # "shift right" read as Right Shift leaves no main key; word by word it is Shift + Right Arrow
        # ("right shift", side first, stays the modifier's name)
        unmerged = _resolve(tokens, catalog, shortcut, merge=False)
        if sum(e.key.constant not in _BY_CONSTANT for _, e in unmerged) == 1:
            resolved = unmerged
    mods: dict[str, dict[str, Any]] = {}
    main: list[tuple[str, Entry]] = []
    for written, entry in resolved:
        found = _BY_CONSTANT.get(entry.key.constant)
        if found is None:
            main.append((written, entry))
            continue
        mod, side = found
        # an unqualified "cmd" names either Command key; "right cmd" / "lcmd" name one side
        if side == "left" and entry.kind != "side":
            side = "either"
        have = mods.get(mod.family)
        if have is None:
            mods[mod.family] = {"mod": mod, "sides": [side], "keys": [entry.key], "written": [written]}
        elif side not in have["sides"]:
            have["sides"].append(side)
            have["keys"].append(entry.key)
            have["written"].append(written)
    if not main:
        names = ", ".join(w for w, _ in resolved)
        raise InvalidArgument(
            f"the shortcut {shortcut!r} has no main key, only modifiers ({names})",
            "Add the key pressed together with them, e.g. 'cmd+shift+4'. To look up a modifier key itself, "
            "use keyboard_lookup_keycode.",
            data={"shortcut": shortcut, "modifiers": [m["mod"].name for m in mods.values()]},
        )
    if len(main) > 1:
        listed = ", ".join(f"{w!r} ({e.key.name})" for w, e in main)
        raise InvalidArgument(
            f"the shortcut {shortcut!r} has {len(main)} main keys: {listed}",
            "A shortcut is any number of modifiers (⌃ ⌥ ⇧ ⌘ fn) plus exactly one other key; give a sequence as "
            "separate shortcuts. If these words are one key's name, check its spelling with keyboard_lookup_keycode.",
            data={"shortcut": shortcut, "main_keys": [e.key.constant for _, e in main]},
        )
    written_key, key_entry = main[0]
    key: Key = key_entry.key
    shift_implied = key_entry.shifted and "shift" not in mods
    if shift_implied:
        shift = next(m for m in MODIFIERS if m.family == "shift")
        mods["shift"] = {"mod": shift, "sides": ["either"], "keys": [catalog.by_constant[shift.left]],
                         "written": [], "implied": True}
    ordered = sorted(mods.values(), key=lambda m: m["mod"].order)
    modifiers = []
    flags = 0
    for m in ordered:
        mod: Modifier = m["mod"]
        flags |= 1 << mod.bit
        sides = m["sides"]
        side = sides[0] if len(sides) == 1 else "both"
        item: dict[str, Any] = {
            "modifier": mod.family,
            "name": mod.name,
            "glyph": mod.glyph,
            "side": "only" if side == "only" else side,
            "key": m["keys"][0].to_dict(),
            "flag": _flag(mod),
        }
        if len(m["keys"]) > 1:
            item["keys"] = [k.to_dict() for k in m["keys"]]
        device = 0
        for s in sides:
            if s == "left" and mod.left_device_mask:
                device |= mod.left_device_mask
            elif s == "right" and mod.right_device_mask:
                device |= mod.right_device_mask
        if device:
            item["device_mask"] = {"mask": device, "hex": f"0x{device:X}"}
        if m.get("implied"):
            item["implied"] = True
        modifiers.append(item)
    glyphs = "".join(m["mod"].glyph for m in ordered)
    out: dict[str, Any] = {
        "found": True,
        "shortcut": shortcut,
        "canonical": glyphs + key.symbol,
        "canonical_text": "-".join([m["mod"].name for m in ordered] + [key.name]),
        "modifiers": modifiers,
        "key": key.to_dict(),
        "modifier_flags": flags,
        "modifier_flags_hex": f"0x{flags:X}",
    }
    if key_entry.alternatives:
        out["key_alternatives"] = [k.to_dict() for k in key_entry.alternatives]
        if key_entry.note:
            out["note"] = key_entry.note
    if shift_implied:
        out["shift_implied"] = True
        out["note"] = (f"{written_key!r} is typed with Shift + {key.name}, so the event carries Shift "
                       f"(0x{1 << 17:X}) with the {key.name} key's code.")
    return out
