"""keyboard_search_keys, keyboard_list_categories and the keycode:// resources."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

CATEGORY_IDS = ["letters", "numbers", "function-keys", "modifiers", "navigation", "editing", "keypad",
                "punctuation", "media", "iso-jis"]


async def test_list_categories(kb):
    r = await kb("keyboard_list_categories")
    assert r["count"] == 10 and r["total_keys"] == 120
    assert [c["id"] for c in r["categories"]] == CATEGORY_IDS
    mods = next(c for c in r["categories"] if c["id"] == "modifiers")
    assert mods["count"] == 10 and mods["resource"] == "keycode://category/modifiers"
    assert mods["description"] and mods["examples"]


async def test_search_by_text_ranks_names_first(kb):
    r = await kb("keyboard_search_keys", query="arrow")
    assert r["count"] == 4
    assert {k["constant"] for k in r["keys"]} == {"kVK_LeftArrow", "kVK_RightArrow", "kVK_UpArrow", "kVK_DownArrow"}
    br = await kb("keyboard_search_keys", query="bracket")
    assert [k["constant"] for k in br["keys"]][:2] == ["kVK_ANSI_RightBracket", "kVK_ANSI_LeftBracket"]
    esc = await kb("keyboard_search_keys", query="esc")
    assert esc["keys"][0]["constant"] == "kVK_Escape"


async def test_search_by_category_and_both(kb):
    r = await kb("keyboard_search_keys", category="keypad")
    assert r["count"] == 18 and all(k["category"] == "keypad" for k in r["keys"])
    both = await kb("keyboard_search_keys", query="enter", category="Keypad")
    assert [k["constant"] for k in both["keys"]] == ["kVK_ANSI_KeypadEnter"]
    friendly = await kb("keyboard_search_keys", category="ISO/JIS")
    assert friendly["category"] == "iso-jis" and friendly["count"] == 6
    fkeys = await kb("keyboard_search_keys", category="function keys")
    assert fkeys["count"] == 20


async def test_search_with_no_arguments_lists_every_key(kb):
    r = await kb("keyboard_search_keys")
    assert r["count"] == 120 and len(r["keys"]) == 120
    assert [k["code"] for k in r["keys"]] == sorted(k["code"] for k in r["keys"])


async def test_search_by_code_and_glyph(kb):
    r = await kb("keyboard_search_keys", query="0x31")
    assert r["keys"][0]["constant"] == "kVK_Space"
    g = await kb("keyboard_search_keys", query="⌘")
    assert [k["constant"] for k in g["keys"]][:2] == ["kVK_Command", "kVK_RightCommand"]


async def test_search_without_hits_guides(kb):
    result = await kb.raw("keyboard_search_keys", query="escpae")
    assert not result.is_error
    data = result.structured_content
    assert data["found"] is False and data["count"] == 0
    assert data["suggestions"][0]["key"]["constant"] == "kVK_Escape"
    assert "Did you mean 'Escape'" in result.content[0].text


async def test_unknown_category_lists_the_valid_ones(kb):
    err, _ = await kb.error("keyboard_search_keys", category="modifers")
    assert err["type"] == "invalid_argument"
    assert "Did you mean 'modifiers'" in err["guidance"]
    for cid in CATEGORY_IDS:
        assert cid in err["guidance"]


async def _read(client, uri):
    result = await client.read_resource(uri)
    content = result.contents[0]
    assert content.mime_type == "application/json"
    return json.loads(content.text)


async def test_resource_all(kb):
    data = await _read(kb.client, "keycode://all")
    assert data["count"] == 120
    assert {k["constant"] for k in data["keys"]} >= {"kVK_ANSI_A", "kVK_RightCommand", "kVK_ContextualMenu"}
    a = next(k for k in data["keys"] if k["constant"] == "kVK_ANSI_A")
    assert a["code"] == 0 and a["hex"] == "0x00"


async def test_resource_aliases(kb):
    data = await _read(kb.client, "keycode://aliases")
    aliases = data["aliases"]
    assert aliases["esc"]["constant"] == "kVK_Escape"
    assert aliases["⌘"]["constant"] == "kVK_Command" and aliases["⌘"]["alternatives"] == ["kVK_RightCommand"]
    assert aliases["enter"]["alternatives"] == ["kVK_ANSI_KeypadEnter"]
    assert aliases["~"]["kind"] == "shifted"
    assert data["count"] == len(aliases) > 500


async def test_resources_are_listed_with_the_category_template(kb):
    listed = await kb.client.list_resources()
    uris = {str(r.uri) for r in listed.resources}
    assert {"keycode://all", "keycode://aliases"} <= uris
    assert {f"keycode://category/{cid}" for cid in CATEGORY_IDS} <= uris
    templates = await kb.client.list_resource_templates()
    tmpl = [t for t in templates.resource_templates if t.uri_template == "keycode://category/{category}"]
    assert len(tmpl) == 1 and tmpl[0].mime_type == "application/json"


async def test_category_resource(kb):
    data = await _read(kb.client, "keycode://category/media")
    assert data["id"] == "media" and data["count"] == 3
    assert {k["constant"] for k in data["keys"]} == {"kVK_VolumeUp", "kVK_VolumeDown", "kVK_Mute"}


async def test_unknown_category_resource_is_not_found_with_guidance(kb):
    with pytest.raises(MCPError) as info:
        await kb.client.read_resource("keycode://category/emoji")
    assert "emoji" in str(info.value) and "letters" in str(info.value)


async def test_category_names_complete(kb):
    ref = types.ResourceTemplateReference(type="ref/resource", uri="keycode://category/{category}")
    result = await kb.client.complete(ref, {"name": "category", "value": "n"})
    assert result.completion.values == ["numbers", "navigation"]
    everything = await kb.client.complete(ref, {"name": "category", "value": ""})
    assert everything.completion.values == CATEGORY_IDS


async def test_list_categories_describes_one_category_with_every_key(kb):
    r = await kb("keyboard_list_categories", category="numpad")  # a friendlier name of keypad
    assert r["count"] == 1 and r["total_keys"] == 18
    (keypad,) = r["categories"]
    assert keypad["id"] == "keypad" and keypad["resource"] == "keycode://category/keypad"
    assert len(keypad["keys"]) == 18 and all(k["category"] == "keypad" for k in keypad["keys"])
    assert "kVK_ANSI_KeypadEnter" in {k["constant"] for k in keypad["keys"]}
    assert "keys" not in (await kb("keyboard_list_categories"))["categories"][0]  # the overview stays short
    every = await kb("keyboard_list_categories", category=None)  # null: every category, as a strict model sends it
    assert every["count"] == 10 and every["total_keys"] == 120
    err, text = await kb.error("keyboard_list_categories", category="modifers")
    assert "unknown category 'modifers'" in text and "Did you mean 'modifiers'?" in text
    assert "letters, numbers, function-keys" in text and err
    _, text = await kb.error("keyboard_list_categories", category=3)
    assert "argument 'category' must be string" in text
