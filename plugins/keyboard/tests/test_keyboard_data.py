"""The packaged data: a faithful copy of the reference files, fully described by the curated names."""

from __future__ import annotations

import json

import pytest
from keyboard_testlib import packaged_json

from plexor_keyboard import names
from plexor_keyboard.catalog import build, norm
from plexor_keyboard.plugin import LAYOUT_IDS


@pytest.mark.parametrize("name", ["kvk.json", "fkeys.json"])
def test_packaged_copy_equals_the_reference(reference_dir, name):
    assert packaged_json(name) == json.loads((reference_dir / name).read_text("utf-8"))


def test_catalog_matches_the_reference_value_by_value(reference_dir):
    reference = json.loads((reference_dir / "kvk.json").read_text("utf-8"))["constants"]
    catalog = build()
    assert len(reference) == 120
    for item in reference:
        key = catalog.by_constant[item["constant"]]
        assert key.code == item["code"]
        assert key.hex == item["hex"]


def test_packaged_catalog_has_all_120_constants_once():
    constants = packaged_json("kvk.json")["constants"]
    catalog = build()
    assert len(constants) == len(catalog.keys) == len(catalog.by_constant) == 120
    assert set(names.KEYS) == {c["constant"] for c in constants}
    # the two values the original server had wrong
    assert catalog.by_constant["kVK_F17"].code == 0x40
    assert catalog.by_constant["kVK_F18"].code == 0x4F
    # keys the original lacked
    for const in ("kVK_RightCommand", "kVK_ContextualMenu", "kVK_ISO_Section", "kVK_JIS_Yen", "kVK_JIS_Kana"):
        assert const in catalog.by_constant


def test_every_key_has_one_declared_category_and_the_counts_add_up():
    catalog = build()
    counts = {cid: len(catalog.in_category(cid)) for cid in catalog.categories}
    assert counts == {
        "letters": 26, "numbers": 10, "function-keys": 20, "modifiers": 10, "navigation": 8,
        "editing": 8, "keypad": 18, "punctuation": 11, "media": 3, "iso-jis": 6,
    }
    assert sum(counts.values()) == 120


def test_no_alias_silently_names_two_keys():
    # build() raises CatalogError on a clash that is not declared in names.AMBIGUOUS;
    # check the declared ambiguities resolve to their first (most likely) key.
    catalog = build()
    for alias, (cands, _note) in names.AMBIGUOUS.items():
        entry = catalog.index[norm(alias)]
        assert entry.key.constant == cands[0], alias
        assert [k.constant for k in entry.alternatives] == list(cands[1:]), alias


def test_unused_codes_are_the_ones_apple_leaves_out():
    catalog = build()
    assert catalog.unused_codes == (0x34, 0x42, 0x44, 0x46, 0x4D, 0x6C, 0x70)
    about = packaged_json("kvk.json")["about"]
    for code in catalog.unused_codes:
        assert f"0x{code:02X}" in about


def test_layout_ids_in_plugin_match_the_data():
    assert tuple(packaged_json("fkeys.json")["layouts"]) == LAYOUT_IDS


def test_norm_joins_words_but_keeps_symbols():
    assert norm("Page-Down") == norm("page down") == norm("PAGE_DOWN") == "pagedown"
    assert norm("keypad -") == "keypad-"
    assert norm(" F1 + ") == "f1+"
    assert norm("⌘") == "⌘"
