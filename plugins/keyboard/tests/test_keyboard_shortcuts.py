"""keyboard_get_key_combinations: the forms people write, Apple's order, flags, and the errors."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio

CONTROL, OPTION, SHIFT, COMMAND, CAPS, FN = 1 << 18, 1 << 19, 1 << 17, 1 << 20, 1 << 16, 1 << 23


def test_flag_masks_are_apples_values():
    # NSEventModifierFlags == CGEventFlags device-independent bits (IOLLEvent.h NX_*MASK)
    assert (CAPS, SHIFT, CONTROL, OPTION, COMMAND, FN) == (0x10000, 0x20000, 0x40000, 0x80000, 0x100000, 0x800000)


@pytest.mark.parametrize("shortcut", ["cmd+shift+4", "⌘⇧4", "shift+cmd+4", "Command + Shift + 4", "cmd shift 4",
                                      "⌘ + ⇧ + 4", "CMD-SHIFT-4", "⇧⌘4"])
async def test_screenshot_shortcut_in_every_form(kb, shortcut):
    r = await kb("keyboard_get_key_combinations", shortcut=shortcut)
    assert r["found"] is True
    assert r["canonical"] == "⇧⌘4"
    assert r["canonical_text"] == "Shift-Command-4"
    assert [m["modifier"] for m in r["modifiers"]] == ["shift", "command"]
    assert r["key"]["constant"] == "kVK_ANSI_4" and r["key"]["code"] == 21
    assert r["modifier_flags"] == SHIFT | COMMAND and r["modifier_flags_hex"] == "0x120000"
    cmd = r["modifiers"][1]
    assert cmd["key"]["code"] == 55 and cmd["glyph"] == "⌘"
    assert cmd["flag"] == {"mask": COMMAND, "hex": "0x100000", "bit": 20, "nsevent": "NSEventModifierFlagCommand",
                           "cgevent": "kCGEventFlagMaskCommand"}


async def test_ctrl_alt_delete(kb):
    r = await kb("keyboard_get_key_combinations", shortcut="ctrl-alt-delete")
    assert r["canonical"] == "⌃⌥⌫"
    assert [m["name"] for m in r["modifiers"]] == ["Control", "Option"]
    assert r["key"]["constant"] == "kVK_Delete"
    assert [k["constant"] for k in r["key_alternatives"]] == ["kVK_ForwardDelete"]
    assert r["modifier_flags"] == CONTROL | OPTION


async def test_force_quit_with_words_and_spaces(kb):
    r = await kb("keyboard_get_key_combinations", shortcut="Command + Option + Esc")
    assert r["canonical"] == "⌥⌘⎋"
    assert r["key"]["constant"] == "kVK_Escape" and r["key"]["code"] == 53
    assert r["modifier_flags"] == OPTION | COMMAND


async def test_all_four_come_out_in_apples_canonical_order(kb):
    r = await kb("keyboard_get_key_combinations", shortcut="cmd+shift+opt+ctrl+space")
    assert r["canonical"] == "⌃⌥⇧⌘Space"
    assert [m["glyph"] for m in r["modifiers"]] == ["⌃", "⌥", "⇧", "⌘"]
    assert [m["flag"]["mask"] for m in r["modifiers"]] == [CONTROL, OPTION, SHIFT, COMMAND]
    assert [m["key"]["code"] for m in r["modifiers"]] == [59, 58, 56, 55]
    assert r["modifier_flags"] == 0x1E0000


async def test_fn_and_caps_lock_are_modifiers_with_their_flags(kb):
    r = await kb("keyboard_get_key_combinations", shortcut="fn+ctrl+f")
    assert r["canonical"] == "fn⌃F"
    assert r["modifiers"][0]["flag"]["mask"] == FN and r["modifiers"][0]["key"]["constant"] == "kVK_Function"
    g = await kb("keyboard_get_key_combinations", shortcut="🌐E")
    assert g["modifier_flags"] == FN and g["key"]["constant"] == "kVK_ANSI_E"
    c = await kb("keyboard_get_key_combinations", shortcut="caps lock + a")
    assert c["modifier_flags"] == CAPS


async def test_sides_are_reported_with_device_masks(kb):
    r = await kb("keyboard_get_key_combinations", shortcut="right option + left shift + a")
    opt, shift = r["modifiers"]
    assert opt["side"] == "right" and opt["key"]["constant"] == "kVK_RightOption"
    assert opt["device_mask"] == {"mask": 0x40, "hex": "0x40"}
    assert shift["side"] == "left" and shift["device_mask"]["mask"] == 0x2
    plain = await kb("keyboard_get_key_combinations", shortcut="cmd+a")
    assert plain["modifiers"][0]["side"] == "either" and "device_mask" not in plain["modifiers"][0]
    both = await kb("keyboard_get_key_combinations", shortcut="lcmd+rcmd+a")
    assert both["modifiers"][0]["side"] == "both" and both["modifiers"][0]["device_mask"]["mask"] == 0x18


@pytest.mark.parametrize("shortcut, key, canonical", [
    ("cmd++", "kVK_ANSI_Equal", "⇧⌘="),
    ("⌘-", "kVK_ANSI_Minus", "⌘-"),
    ("cmd -", "kVK_ANSI_Minus", "⌘-"),
    ("ctrl--", "kVK_ANSI_Minus", "⌃-"),
    ("^C", "kVK_ANSI_C", "⌃C"),
    ("cmd shift page down", "kVK_PageDown", "⇧⌘⇟"),
    ("opt+←", "kVK_LeftArrow", "⌥←"),
    ("cmd+numpad enter", "kVK_ANSI_KeypadEnter", "⌘⌤"),
    ("ctrl+F2", "kVK_F2", "⌃F2"),
    ("⌘,", "kVK_ANSI_Comma", "⌘,"),
    ("shift right", "kVK_RightArrow", "⇧→"),
    ("cmd option left", "kVK_LeftArrow", "⌥⌘←"),
])
async def test_separators_that_are_keys_and_multi_word_keys(kb, shortcut, key, canonical):
    r = await kb("keyboard_get_key_combinations", shortcut=shortcut)
    assert r["key"]["constant"] == key
    assert r["canonical"] == canonical


async def test_a_shifted_symbol_brings_its_shift(kb):
    r = await kb("keyboard_get_key_combinations", shortcut="cmd+?")
    assert r["key"]["constant"] == "kVK_ANSI_Slash"
    assert r["shift_implied"] is True
    assert r["modifier_flags"] == SHIFT | COMMAND
    assert [m.get("implied", False) for m in r["modifiers"]] == [True, False]
    explicit = await kb("keyboard_get_key_combinations", shortcut="cmd+shift+/")
    assert "shift_implied" not in explicit and explicit["modifier_flags"] == SHIFT | COMMAND


@pytest.mark.parametrize("shortcut", ["cmd+shift", "⌘⇧", "ctrl", "right option"])
async def test_no_main_key_is_an_error(kb, shortcut):
    err, text = await kb.error("keyboard_get_key_combinations", shortcut=shortcut)
    assert err["type"] == "invalid_argument"
    assert "no main key" in err["message"]
    assert "cmd+shift+4" in err["guidance"]


@pytest.mark.parametrize("shortcut, keys", [
    ("cmd+a+b", ["kVK_ANSI_A", "kVK_ANSI_B"]),
    ("ctrl+c v", ["kVK_ANSI_C", "kVK_ANSI_V"]),
    ("shift+tab+space", ["kVK_Tab", "kVK_Space"]),
])
async def test_several_main_keys_is_an_error(kb, shortcut, keys):
    err, _ = await kb.error("keyboard_get_key_combinations", shortcut=shortcut)
    assert "main keys" in err["message"]
    assert err["details"]["main_keys"] == keys
    assert "exactly one" in err["guidance"]


async def test_an_unknown_word_is_named_with_a_suggestion(kb):
    err, _ = await kb.error("keyboard_get_key_combinations", shortcut="cmd+shfit+4")
    assert "'shfit'" in err["message"]
    assert "Shift" in err["guidance"]


@pytest.mark.parametrize("shortcut", ["", "   "])
async def test_an_empty_shortcut_is_an_error(kb, shortcut):
    err, _ = await kb.error("keyboard_get_key_combinations", shortcut=shortcut)
    assert "empty" in err["message"] and "cmd+shift+4" in err["guidance"]
