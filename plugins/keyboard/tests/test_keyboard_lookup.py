"""keyboard_lookup_keycode through the real kernel and MCP client: every constant, every alias class."""

from __future__ import annotations

import pytest
from keyboard_testlib import packaged_json

pytestmark = pytest.mark.anyio

CONSTANTS = packaged_json("kvk.json")["constants"]
KEY_FIELDS = {"name", "constant", "code", "hex", "category", "aliases"}


async def test_every_constant_is_reachable_by_constant_and_by_code(kb):
    for item in CONSTANTS:
        by_const = await kb("keyboard_lookup_keycode", key_name=item["constant"])
        assert by_const["found"] is True
        assert by_const["key"]["constant"] == item["constant"]
        assert by_const["key"]["code"] == item["code"]
        assert KEY_FIELDS <= set(by_const["key"])
        for form in (str(item["code"]), item["hex"], item["hex"].lower(), f"code {item['code']}"):
            if len(form) == 1:
                continue  # a lone digit is the digit key (tested below); "code 5" covers the code
            by_code = await kb("keyboard_lookup_keycode", key_name=form)
            assert by_code["found"] is True, form
            assert by_code["match"] == "code"
            assert [k["constant"] for k in by_code["keys"]] == [item["constant"]], form
            assert by_code["key"]["hex"] == item["hex"]


async def test_an_integer_code_argument_is_a_reverse_lookup(kb):
    r = await kb("keyboard_lookup_keycode", key_name=49)
    assert r["key"]["constant"] == "kVK_Space" and r["match"] == "code"


async def test_code_zero_is_a_real_answer(kb):
    for form in ("0x00", "0x0", "code 0", "00"):
        r = await kb("keyboard_lookup_keycode", key_name=form)
        assert r["found"] is True, form
        assert r["key"]["constant"] == "kVK_ANSI_A" and r["key"]["code"] == 0
    a = await kb("keyboard_lookup_keycode", key_name="a")
    assert a["found"] is True and a["key"]["code"] == 0 and a["key"]["hex"] == "0x00"


async def test_a_lone_digit_is_the_digit_key_with_the_code_reading_offered(kb):
    r = await kb("keyboard_lookup_keycode", key_name="5")
    assert r["key"]["constant"] == "kVK_ANSI_5" and r["key"]["code"] == 23
    assert [a["constant"] for a in r["alternatives"]] == ["kVK_ANSI_G"]  # code 5
    assert "code 5" in r["note"]
    zero = await kb("keyboard_lookup_keycode", key_name="0")
    assert zero["key"]["constant"] == "kVK_ANSI_0"
    assert zero["alternatives"][0]["constant"] == "kVK_ANSI_A"


@pytest.mark.parametrize("alias, constant", [
    # abbreviations named in the issue
    ("cmd", "kVK_Command"), ("opt", "kVK_Option"), ("alt", "kVK_Option"), ("ctrl", "kVK_Control"),
    ("esc", "kVK_Escape"), ("fwd delete", "kVK_ForwardDelete"), ("pgup", "kVK_PageUp"),
    ("pgdn", "kVK_PageDown"), ("fn", "kVK_Function"), ("globe", "kVK_Function"),
    ("backspace", "kVK_Delete"), ("spacebar", "kVK_Space"), ("caps", "kVK_CapsLock"), ("insert", "kVK_Help"),
    ("menu", "kVK_ContextualMenu"), ("Page-Down", "kVK_PageDown"), ("ESCAPE", "kVK_Escape"),
    ("return key", "kVK_Return"),
])
async def test_abbreviations(kb, alias, constant):
    r = await kb("keyboard_lookup_keycode", key_name=alias)
    assert r["found"] is True and r["key"]["constant"] == constant


@pytest.mark.parametrize("glyph, constant", [
    ("⌘", "kVK_Command"), ("⌥", "kVK_Option"), ("⌃", "kVK_Control"), ("⇧", "kVK_Shift"), ("⇪", "kVK_CapsLock"),
    ("⏎", "kVK_Return"), ("↩", "kVK_Return"), ("⌫", "kVK_Delete"), ("⌦", "kVK_ForwardDelete"),
    ("⎋", "kVK_Escape"), ("⇥", "kVK_Tab"), ("←", "kVK_LeftArrow"), ("→", "kVK_RightArrow"),
    ("↑", "kVK_UpArrow"), ("↓", "kVK_DownArrow"), ("⇞", "kVK_PageUp"), ("⇟", "kVK_PageDown"),
    ("↖", "kVK_Home"), ("↘", "kVK_End"), ("🌐", "kVK_Function"), ("⌤", "kVK_ANSI_KeypadEnter"),
])
async def test_glyphs(kb, glyph, constant):
    r = await kb("keyboard_lookup_keycode", key_name=glyph)
    assert r["found"] is True and r["key"]["constant"] == constant
    assert r["match"] in ("glyph", "name", "abbreviation", "symbol")


@pytest.mark.parametrize("symbol, constant, shifted", [
    ("`", "kVK_ANSI_Grave", False), ("~", "kVK_ANSI_Grave", True),
    ("-", "kVK_ANSI_Minus", False), ("_", "kVK_ANSI_Minus", True),
    ("=", "kVK_ANSI_Equal", False), ("+", "kVK_ANSI_Equal", True),
    ("[", "kVK_ANSI_LeftBracket", False), ("{", "kVK_ANSI_LeftBracket", True),
    ("]", "kVK_ANSI_RightBracket", False), ("}", "kVK_ANSI_RightBracket", True),
    ("\\", "kVK_ANSI_Backslash", False), ("|", "kVK_ANSI_Backslash", True),
    (";", "kVK_ANSI_Semicolon", False), (":", "kVK_ANSI_Semicolon", True),
    ("'", "kVK_ANSI_Quote", False), ('"', "kVK_ANSI_Quote", True),
    (",", "kVK_ANSI_Comma", False), ("<", "kVK_ANSI_Comma", True),
    (".", "kVK_ANSI_Period", False), (">", "kVK_ANSI_Period", True),
    ("/", "kVK_ANSI_Slash", False), ("?", "kVK_ANSI_Slash", True),
    ("!", "kVK_ANSI_1", True), ("@", "kVK_ANSI_2", True), ("*", "kVK_ANSI_8", True), (")", "kVK_ANSI_0", True),
    ("§", "kVK_ISO_Section", False), ("±", "kVK_ISO_Section", True), ("¥", "kVK_JIS_Yen", False),
])
async def test_punctuation_and_shifted_forms(kb, symbol, constant, shifted):
    r = await kb("keyboard_lookup_keycode", key_name=symbol)
    assert r["found"] is True and r["key"]["constant"] == constant
    assert r.get("shift_required", False) is shifted
    assert symbol in r["key"]["aliases"] or r["key"]["symbol"] == symbol


@pytest.mark.parametrize("name, constant", [
    ("right command", "kVK_RightCommand"), ("Right Cmd", "kVK_RightCommand"), ("rcmd", "kVK_RightCommand"),
    ("left command", "kVK_Command"), ("left shift", "kVK_Shift"), ("right shift", "kVK_RightShift"),
    ("lshift", "kVK_Shift"), ("right option", "kVK_RightOption"), ("ralt", "kVK_RightOption"),
    ("right ctrl", "kVK_RightControl"), ("left control", "kVK_Control"), ("shift_r", "kVK_RightShift"),
    ("right ⌘", "kVK_RightCommand"),
])
async def test_left_and_right_variants(kb, name, constant):
    r = await kb("keyboard_lookup_keycode", key_name=name)
    assert r["found"] is True and r["key"]["constant"] == constant
    assert r["alternatives"] == []


@pytest.mark.parametrize("name, constant", [
    ("keypad 5", "kVK_ANSI_Keypad5"), ("numpad 5", "kVK_ANSI_Keypad5"), ("kp5", "kVK_ANSI_Keypad5"),
    ("numpad enter", "kVK_ANSI_KeypadEnter"), ("keypad enter", "kVK_ANSI_KeypadEnter"),
    ("numpad *", "kVK_ANSI_KeypadMultiply"), ("keypad multiply", "kVK_ANSI_KeypadMultiply"),
    ("numpad +", "kVK_ANSI_KeypadPlus"), ("numpad -", "kVK_ANSI_KeypadMinus"), ("numpad /", "kVK_ANSI_KeypadDivide"),
    ("numpad .", "kVK_ANSI_KeypadDecimal"), ("numpad =", "kVK_ANSI_KeypadEquals"), ("keypad 0", "kVK_ANSI_Keypad0"),
    ("num lock", "kVK_ANSI_KeypadClear"), ("keypad clear", "kVK_ANSI_KeypadClear"),
    ("numpad ,", "kVK_JIS_KeypadComma"),
])
async def test_keypad_names(kb, name, constant):
    r = await kb("keyboard_lookup_keycode", key_name=name)
    assert r["found"] is True and r["key"]["constant"] == constant


@pytest.mark.parametrize("name, primary, others", [
    ("enter", "kVK_Return", ["kVK_ANSI_KeypadEnter"]),
    ("del", "kVK_Delete", ["kVK_ForwardDelete"]),
    ("delete", "kVK_Delete", ["kVK_ForwardDelete"]),
    ("cmd", "kVK_Command", ["kVK_RightCommand"]),
    ("+", "kVK_ANSI_Equal", ["kVK_ANSI_KeypadPlus"]),
    ("*", "kVK_ANSI_8", ["kVK_ANSI_KeypadMultiply"]),
])
async def test_ambiguous_names_answer_the_likely_key_and_list_the_others(kb, name, primary, others):
    r = await kb("keyboard_lookup_keycode", key_name=name)
    assert r["found"] is True
    assert r["key"]["constant"] == primary
    assert [a["constant"] for a in r["alternatives"]] == others
    assert r["note"]
    for alt in r["alternatives"]:
        assert KEY_FIELDS <= set(alt)


async def test_the_result_shape(kb):
    r = await kb("keyboard_lookup_keycode", key_name="kVK_Space")
    assert r["key"] == {
        "name": "Space", "constant": "kVK_Space", "code": 49, "hex": "0x31", "category": "editing",
        "aliases": r["key"]["aliases"], "symbol": "Space", "apple_group": "layout-independent",
    }
    assert {"spacebar", "␣"} <= set(r["key"]["aliases"])
    assert r["match"] == "constant"
    space = await kb("keyboard_lookup_keycode", key_name=" ")
    assert space["key"]["constant"] == "kVK_Space"


@pytest.mark.parametrize("typo, kind, constant", [
    ("escpe", "deletion", "kVK_Escape"),
    ("esscape", "insertion", "kVK_Escape"),
    ("escapr", "substitution", "kVK_Escape"),
    ("escpae", "transposition", "kVK_Escape"),
    ("retrun", "transposition", "kVK_Return"),
    ("retun", "deletion", "kVK_Return"),
    ("returnn", "insertion", "kVK_Return"),
    ("pgae down", "transposition", "kVK_PageDown"),
    ("backspcae", "transposition", "kVK_Delete"),
    ("comand", "deletion", "kVK_Command"),
    ("kVK_Escpae", "transposition", "kVK_Escape"),
    ("rigth shift", "transposition", "kVK_RightShift"),
])
async def test_fuzzy_finds_each_kind_of_typo(kb, typo, kind, constant):
    r = await kb("keyboard_lookup_keycode", key_name=typo, fuzzy=True)
    assert r["found"] is False
    suggestions = r["suggestions"]
    assert 1 <= len(suggestions) <= 5
    assert suggestions[0]["key"]["constant"] == constant, (kind, suggestions[:2])
    scores = [s["confidence"] for s in suggestions]
    assert all(0 <= c <= 1 for c in scores) and scores == sorted(scores, reverse=True)
    assert suggestions[0]["confidence"] >= 0.7
    assert len({s["key"]["constant"] for s in suggestions}) == len(suggestions)  # one per key


async def test_fuzzy_returns_at_most_five_suggestions(kb):
    r = await kb("keyboard_lookup_keycode", key_name="keypad", fuzzy=True)
    # "keypad" alone names no single key: many keypad keys are near
    assert r["found"] is False
    assert len(r["suggestions"]) == 5


async def test_fuzzy_with_nothing_close_still_guides(kb):
    result = await kb.raw("keyboard_lookup_keycode", key_name="qqqqqqqqqqzz", fuzzy=True)
    assert not result.is_error
    assert result.structured_content == {"found": False, "query": "qqqqqqqqqqzz", "suggestions": []}
    assert "keyboard_search_keys" in result.content[0].text


async def test_fuzzy_with_an_exact_name_is_just_found(kb):
    r = await kb("keyboard_lookup_keycode", key_name="escape", fuzzy=True)
    assert r["found"] is True and r["key"]["code"] == 53


async def test_not_found_without_fuzzy_names_the_best_suggestion_and_says_fuzzy_true(kb):
    err, text = await kb.error("keyboard_lookup_keycode", key_name="escpae")
    assert err["type"] == "not_found"
    assert "'escpae'" in err["message"]
    assert "Escape" in err["guidance"] and "fuzzy=true" in err["guidance"]
    assert err["details"]["best_suggestion"]["key"]["constant"] == "kVK_Escape"
    assert "fuzzy=true" in text


async def test_not_found_with_nothing_close_points_to_browsing(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name="qqqqqqqqqqzz")
    assert "keyboard_search_keys" in err["guidance"]


@pytest.mark.parametrize("form, expected", [
    ("0x34", "unused"), ("52", "unused"), ("0x7F", "run from 0 to 126"), ("200", "run from 0 to 126"),
])
async def test_codes_without_a_key_get_guidance(kb, form, expected):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name=form)
    assert err["type"] == "not_found"
    assert expected in err["message"] + err["guidance"]


async def test_a_negative_code_is_a_clear_error(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name=-1)
    assert err["type"] == "invalid_argument" and "0 to 126" in err["guidance"]


async def test_an_undocumented_secondary_code_is_explained(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name="0xB1")
    assert "Spotlight" in err["guidance"] and "F4+" in err["guidance"]


@pytest.mark.parametrize("bad", ["", "   \t"])
async def test_empty_input_is_a_clear_error(kb, bad):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name=bad)
    assert err["type"] == "invalid_argument"
    assert "empty" in err["message"] and "kVK_Space" in err["guidance"]


async def test_overlong_input_is_a_clear_error(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name="x" * 500)
    assert "500 characters" in err["message"]


async def test_wrong_argument_types_get_the_kernel_guidance(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name=["esc"])
    assert "key_name" in err["message"]
    err, _ = await kb.error("keyboard_lookup_keycode", name="esc")
    assert "key_name" in err["message"] + err.get("guidance", "")
