"""What people call each key: friendly names, categories, aliases and ambiguous names.

The codes themselves are not here: they come from ``data/kvk.json`` (a copy of
Apple's ``Events.h`` constants). This module only adds the human side, keyed by
constant, and :mod:`plexor_keyboard.builder` joins the two and checks that every
constant is described exactly once and that no alias silently names two keys.
"""

from __future__ import annotations

import string

__all__ = ["AMBIGUOUS", "CATEGORIES", "KEYPAD_PARTS", "KEYPAD_PREFIXES", "KEYS", "SIDES"]

# id, title, description, extra names a caller may use for the category.
CATEGORIES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("letters", "Letters", "A to Z on the ANSI layout; codes follow key positions, not the alphabet.",
     ("letter", "alphabet", "alpha")),
    ("numbers", "Numbers", "The digits 0 to 9 of the top row (the keypad digits are in 'keypad').",
     ("number", "digits", "digit", "top row")),
    ("function-keys", "Function keys", "F1 to F20; F1 to F12 also carry a printed secondary function (ask 'F4+').",
     ("function", "functions", "fkeys", "f keys", "function key")),
    ("modifiers", "Modifiers", "Command, Option, Control, Shift (left and right), Caps Lock and Fn/Globe.",
     ("modifier", "mods")),
    ("navigation", "Navigation", "Arrow keys, Home, End, Page Up and Page Down.",
     ("arrows", "arrow keys", "nav", "movement")),
    ("editing", "Editing and special keys", "Return, Tab, Space, Delete, Forward Delete, Escape, Help and the Contextual Menu key.",
     ("editing/special", "editing and special", "special", "editing keys", "whitespace")),
    ("keypad", "Keypad", "The numeric keypad: digits, operators, Clear, Enter and Equals.",
     ("numpad", "numeric keypad", "number pad", "kp")),
    ("punctuation", "Punctuation", "Symbol keys of the main block; each also types a shifted symbol.",
     ("symbols", "symbol", "punct")),
    ("media", "Media", "The dedicated volume keys of old Apple keyboards (today's F10-F12 send system events instead).",
     ("volume", "audio", "sound")),
    ("iso-jis", "ISO and JIS keys", "Keys that exist only on ISO (European) or JIS (Japanese) keyboards.",
     ("iso/jis", "iso", "jis", "international", "iso and jis")),
)

# Shifted symbols of the US ANSI layout, the one Apple's kVK_ANSI_* names describe.
_DIGIT_SHIFTED = {"1": "!", "2": "@", "3": "#", "4": "$", "5": "%", "6": "^", "7": "&", "8": "*", "9": "(", "0": ")"}
_DIGIT_WORDS = {"0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six",
                "7": "seven", "8": "eight", "9": "nine"}

# A key: constant -> (name, category, symbol shown in shortcuts, {alias kind: [aliases]}).
# Alias kinds: abbreviation, glyph, symbol, shifted (typed with Shift), side, keypad, word.
KEYS: dict[str, tuple[str, str, str, dict[str, list[str]]]] = {}

for _letter in string.ascii_uppercase:
    KEYS[f"kVK_ANSI_{_letter}"] = (_letter, "letters", _letter, {"word": [f"letter {_letter.lower()}"]})

for _digit in "0123456789":
    KEYS[f"kVK_ANSI_{_digit}"] = (_digit, "numbers", _digit, {
        "shifted": [_DIGIT_SHIFTED[_digit]] + (["asterisk", "star"] if _digit == "8" else []),
        "word": [_DIGIT_WORDS[_digit], f"digit {_digit}", f"number {_digit}"],
    })

for _n in range(1, 21):
    KEYS[f"kVK_F{_n}"] = (f"F{_n}", "function-keys", f"F{_n}", {"word": [f"function {_n}", f"function key {_n}"]})

KEYS.update({
    # Modifiers. The unqualified names (command, cmd, ⌘...) are ambiguous between the two
    # sides and listed in AMBIGUOUS; the side-qualified forms are generated from SIDES.
    "kVK_Command": ("Command", "modifiers", "⌘", {"abbreviation": ["win", "windows", "super", "apple"]}),
    "kVK_RightCommand": ("Right Command", "modifiers", "⌘", {}),
    "kVK_Shift": ("Shift", "modifiers", "⇧", {}),
    "kVK_RightShift": ("Right Shift", "modifiers", "⇧", {}),
    "kVK_Option": ("Option", "modifiers", "⌥", {}),
    "kVK_RightOption": ("Right Option", "modifiers", "⌥", {}),
    "kVK_Control": ("Control", "modifiers", "⌃", {}),
    "kVK_RightControl": ("Right Control", "modifiers", "⌃", {}),
    "kVK_CapsLock": ("Caps Lock", "modifiers", "⇪", {
        "abbreviation": ["caps", "capslock", "caps lock key"], "glyph": ["⇪"]}),
    "kVK_Function": ("Fn", "modifiers", "fn", {
        "abbreviation": ["fn key", "function modifier", "globe", "globe key", "fn/globe", "fn globe"],
        "glyph": ["🌐"]}),
    # Navigation.
    "kVK_Home": ("Home", "navigation", "↖", {"glyph": ["↖", "⇱"]}),
    "kVK_End": ("End", "navigation", "↘", {"glyph": ["↘", "⇲"]}),
    "kVK_PageUp": ("Page Up", "navigation", "⇞", {
        "abbreviation": ["pgup", "pg up", "pageup", "page-up", "pgu", "prior"], "glyph": ["⇞"]}),
    "kVK_PageDown": ("Page Down", "navigation", "⇟", {
        "abbreviation": ["pgdn", "pg dn", "pgdown", "pg down", "pagedown", "page-down", "pgd"], "glyph": ["⇟"]}),
    "kVK_LeftArrow": ("Left Arrow", "navigation", "←", {
        "abbreviation": ["left", "arrow left", "larrow"], "glyph": ["←"]}),
    "kVK_RightArrow": ("Right Arrow", "navigation", "→", {
        "abbreviation": ["right", "arrow right", "rarrow"], "glyph": ["→"]}),
    "kVK_UpArrow": ("Up Arrow", "navigation", "↑", {
        "abbreviation": ["up", "arrow up", "uarrow"], "glyph": ["↑"]}),
    "kVK_DownArrow": ("Down Arrow", "navigation", "↓", {
        "abbreviation": ["down", "arrow down", "darrow"], "glyph": ["↓"]}),
    # Editing and special keys.
    "kVK_Return": ("Return", "editing", "↩", {
        "abbreviation": ["ret", "return key", "carriage return", "cr", "newline"], "glyph": ["↩", "⏎", "↵"]}),
    "kVK_Tab": ("Tab", "editing", "⇥", {"abbreviation": ["tabulator", "tab key"], "glyph": ["⇥"]}),
    "kVK_Space": ("Space", "editing", "Space", {
        "abbreviation": ["spacebar", "space bar", "spc"], "glyph": ["␣"]}),
    "kVK_Delete": ("Delete", "editing", "⌫", {
        "abbreviation": ["backspace", "back space", "bksp", "bs", "delete backward", "backward delete"],
        "glyph": ["⌫"]}),
    "kVK_ForwardDelete": ("Forward Delete", "editing", "⌦", {
        "abbreviation": ["fwd delete", "fwd del", "fwddel", "forward del", "fdel", "delete forward",
                         "del forward", "fn delete"],
        "glyph": ["⌦"]}),
    "kVK_Escape": ("Escape", "editing", "⎋", {"abbreviation": ["esc", "escape key"], "glyph": ["⎋"]}),
    # A PC keyboard's Insert key sends kVK_Help: the Help key sat in that position.
    "kVK_Help": ("Help", "editing", "Help", {"abbreviation": ["insert", "ins", "help key"]}),
    "kVK_ContextualMenu": ("Contextual Menu", "editing", "Menu", {
        "abbreviation": ["context menu", "menu", "menu key", "apps", "application key", "app key"]}),
    # Punctuation: the unshifted symbol and the symbol typed with Shift (US layout).
    "kVK_ANSI_Equal": ("Equal", "punctuation", "=", {"word": ["equal sign", "equals sign"], "shifted": ["+", "plus"]}),
    "kVK_ANSI_Minus": ("Minus", "punctuation", "-", {"word": ["hyphen", "dash", "minus sign"], "shifted": ["_", "underscore"]}),
    "kVK_ANSI_LeftBracket": ("Left Bracket", "punctuation", "[", {
        "shifted": ["{", "left brace", "open brace", "left curly brace"],
        "word": ["open bracket", "opening bracket", "left square bracket"]}),
    "kVK_ANSI_RightBracket": ("Right Bracket", "punctuation", "]", {
        "shifted": ["}", "right brace", "close brace", "right curly brace"],
        "word": ["close bracket", "closing bracket", "right square bracket"]}),
    "kVK_ANSI_Quote": ("Quote", "punctuation", "'", {
        "shifted": ['"', "double quote", "quotation mark"], "word": ["apostrophe", "single quote"]}),
    "kVK_ANSI_Semicolon": ("Semicolon", "punctuation", ";", {"shifted": [":", "colon"]}),
    "kVK_ANSI_Backslash": ("Backslash", "punctuation", "\\", {
        "shifted": ["|", "pipe", "vertical bar"], "word": ["back slash"]}),
    "kVK_ANSI_Comma": ("Comma", "punctuation", ",", {"shifted": ["<", "less than", "less-than sign"]}),
    "kVK_ANSI_Slash": ("Slash", "punctuation", "/", {
        "shifted": ["?", "question mark"], "word": ["forward slash"]}),
    "kVK_ANSI_Period": ("Period", "punctuation", ".", {
        "shifted": [">", "greater than", "greater-than sign"], "word": ["full stop"]}),
    "kVK_ANSI_Grave": ("Grave", "punctuation", "`", {
        "shifted": ["~", "tilde"], "word": ["grave accent", "backtick", "back tick", "backquote", "back quote"]}),
    # Keypad: the prefixed forms ("keypad 5", "numpad *", "kp enter") are generated below.
    "kVK_ANSI_KeypadDecimal": ("Keypad Decimal", "keypad", ".", {"word": ["decimal", "decimal point"]}),
    "kVK_ANSI_KeypadMultiply": ("Keypad Multiply", "keypad", "*", {"word": ["multiply", "times"]}),
    "kVK_ANSI_KeypadPlus": ("Keypad Plus", "keypad", "+", {"word": ["add"]}),
    # PC keyboards' Num Lock sends kVK_ANSI_KeypadClear: Clear sits in that position.
    "kVK_ANSI_KeypadClear": ("Keypad Clear", "keypad", "⌧", {
        "word": ["clear", "num lock", "numlock", "numlk"], "glyph": ["⌧"]}),
    "kVK_ANSI_KeypadDivide": ("Keypad Divide", "keypad", "/", {"word": ["divide", "division"]}),
    "kVK_ANSI_KeypadEnter": ("Keypad Enter", "keypad", "⌤", {"glyph": ["⌤", "⌅"]}),
    "kVK_ANSI_KeypadMinus": ("Keypad Minus", "keypad", "-", {"word": ["subtract"]}),
    "kVK_ANSI_KeypadEquals": ("Keypad Equals", "keypad", "=", {}),
    # Media keys of old keyboards.
    "kVK_VolumeUp": ("Volume Up", "media", "🔊", {
        "abbreviation": ["vol up", "volup", "vol+", "volume+", "louder", "sound up"], "glyph": ["🔊"]}),
    "kVK_VolumeDown": ("Volume Down", "media", "🔉", {
        "abbreviation": ["vol down", "voldown", "voldn", "vol-", "volume-", "quieter", "sound down"],
        "glyph": ["🔉"]}),
    "kVK_Mute": ("Mute", "media", "🔇", {"abbreviation": ["volume mute", "vol mute", "sound off"], "glyph": ["🔇"]}),
    # ISO and JIS.
    "kVK_ISO_Section": ("Section", "iso-jis", "§", {
        "shifted": ["±"], "word": ["section sign", "iso section", "paragraph sign"]}),
    "kVK_JIS_Yen": ("Yen", "iso-jis", "¥", {"symbol": ["￥"], "word": ["jis yen", "yen sign"]}),
    "kVK_JIS_Underscore": ("JIS Underscore", "iso-jis", "_", {"word": ["jis _"]}),
    "kVK_JIS_KeypadComma": ("JIS Keypad Comma", "iso-jis", ",", {"word": ["keypad comma", "numpad comma", "kp comma",
                                                                        "keypad ,", "numpad ,"]}),
    "kVK_JIS_Eisu": ("Eisu", "iso-jis", "英数", {"symbol": ["英数"], "word": ["jis eisu", "eisuu", "alphanumeric"]}),
    "kVK_JIS_Kana": ("Kana", "iso-jis", "かな", {"symbol": ["かな", "カナ"], "word": ["jis kana", "kana key"]}),
})

for _digit in "0123456789":
    KEYS[f"kVK_ANSI_Keypad{_digit}"] = (f"Keypad {_digit}", "keypad", _digit, {})

# Keypad names are generated as <prefix><separator?><part>; the parts per key:
KEYPAD_PARTS: dict[str, tuple[str, ...]] = {
    **{f"kVK_ANSI_Keypad{d}": (d, _DIGIT_WORDS[d]) for d in "0123456789"},
    "kVK_ANSI_KeypadDecimal": (".", "decimal", "period", "dot", "point"),
    "kVK_ANSI_KeypadMultiply": ("*", "multiply", "times", "asterisk", "star"),
    "kVK_ANSI_KeypadPlus": ("+", "plus", "add"),
    "kVK_ANSI_KeypadMinus": ("-", "minus", "subtract"),
    "kVK_ANSI_KeypadDivide": ("/", "divide", "slash"),
    "kVK_ANSI_KeypadEquals": ("=", "equals", "equal"),
    "kVK_ANSI_KeypadEnter": ("enter", "return"),
    "kVK_ANSI_KeypadClear": ("clear",),
}
KEYPAD_PREFIXES = ("keypad", "numpad", "num pad", "number pad", "numeric keypad", "kp", "num", "pad")

# Side-qualified modifier names: for each word, "left <w>", "<w> left", "l<w>" and the
# same for right (e.g. "right command", "rcmd", "left shift", "opt right").
SIDES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # words: (left constant, right constant, the words people use for it)
    "command": ("kVK_Command", "kVK_RightCommand", ("command", "cmd", "⌘", "win", "super")),
    "shift": ("kVK_Shift", "kVK_RightShift", ("shift", "⇧")),
    "option": ("kVK_Option", "kVK_RightOption", ("option", "opt", "alt", "alternate", "⌥")),
    "control": ("kVK_Control", "kVK_RightControl", ("control", "ctrl", "ctl", "⌃")),
}

# Names that fit several keys: the most likely key first, then the others, with why.
def _several(candidates: tuple[str, ...], note: str, *written: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """The same candidates and note for several spellings of one name."""
    return {w: (candidates, note) for w in written}


def _either_side(left: str, right: str, title: str, *written: str) -> dict[str, tuple[tuple[str, ...], str]]:
    return _several((left, right), f"{title} exists on both sides; the left one is the usual answer.", *written)


_STAR = "'*' is Shift+8 on the main block, or the keypad's Multiply."
_UNDERSCORE = "'_' is Shift+Minus on ANSI and ISO keyboards; JIS keyboards also have their own underscore key."
_EQUALS = "Equals is on the main block and on the keypad."
_JIS_COMMA = "Comma is on the main block; JIS keypads have their own comma."

AMBIGUOUS: dict[str, tuple[tuple[str, ...], str]] = {
    "enter": (("kVK_Return", "kVK_ANSI_KeypadEnter"),
              "On a Mac 'enter' usually means Return (the big key); the numeric keypad's Enter is a different key."),
    "del": (("kVK_Delete", "kVK_ForwardDelete"),
            "The Mac key labelled 'delete' erases backwards (like Backspace); PC 'Del' is Forward Delete (fn+Delete)."),
    "delete": (("kVK_Delete", "kVK_ForwardDelete"),
               "The Mac key labelled 'delete' erases backwards (like Backspace); PC 'Delete' is Forward Delete."),
    **_either_side("kVK_Command", "kVK_RightCommand", "Command", "command", "cmd", "⌘"),
    **_either_side("kVK_Shift", "kVK_RightShift", "Shift", "shift", "⇧"),
    **_either_side("kVK_Option", "kVK_RightOption", "Option", "option", "opt"),
    "alt": (("kVK_Option", "kVK_RightOption"), "Alt is the Mac's Option key; the left one is the usual answer."),
    "alternate": (("kVK_Option", "kVK_RightOption"), "Alternate is the Mac's Option key."),
    **_either_side("kVK_Option", "kVK_RightOption", "Option", "⌥"),
    **_either_side("kVK_Control", "kVK_RightControl", "Control", "control", "ctrl", "ctl", "⌃"),
    "-": (("kVK_ANSI_Minus", "kVK_ANSI_KeypadMinus"), "'-' is on the main block and on the keypad."),
    "minus": (("kVK_ANSI_Minus", "kVK_ANSI_KeypadMinus"), "Minus is on the main block and on the keypad."),
    **_several(("kVK_ANSI_Minus", "kVK_JIS_Underscore"), _UNDERSCORE, "_", "underscore"),
    "=": (("kVK_ANSI_Equal", "kVK_ANSI_KeypadEquals"), "'=' is on the main block and on the keypad."),
    **_several(("kVK_ANSI_Equal", "kVK_ANSI_KeypadEquals"), _EQUALS, "equal", "equals"),
    **_several(("kVK_ANSI_Equal", "kVK_ANSI_KeypadPlus"), "'+' is Shift+Equal on the main block, or the keypad's Plus.",
               "+", "plus"),
    **_several(("kVK_ANSI_8", "kVK_ANSI_KeypadMultiply"), _STAR, "*", "asterisk", "star"),
    "/": (("kVK_ANSI_Slash", "kVK_ANSI_KeypadDivide"), "'/' is on the main block and on the keypad."),
    "slash": (("kVK_ANSI_Slash", "kVK_ANSI_KeypadDivide"), "Slash is on the main block and on the keypad."),
    ".": (("kVK_ANSI_Period", "kVK_ANSI_KeypadDecimal"), "'.' is on the main block and on the keypad."),
    "period": (("kVK_ANSI_Period", "kVK_ANSI_KeypadDecimal"), "Period is on the main block and on the keypad."),
    "dot": (("kVK_ANSI_Period", "kVK_ANSI_KeypadDecimal"), "'.' is on the main block and on the keypad."),
    ",": (("kVK_ANSI_Comma", "kVK_JIS_KeypadComma"), "',' is on the main block; JIS keypads have their own comma."),
    "comma": (("kVK_ANSI_Comma", "kVK_JIS_KeypadComma"), _JIS_COMMA),
}
