"""'F{n}+': the F-key and its printed secondary function, per keyboard generation."""

from __future__ import annotations

import pytest
from keyboard_testlib import packaged_json

pytestmark = pytest.mark.anyio

FKEYS = {item["fkey"]: item for item in packaged_json("fkeys.json")["fkeys"]}
LAYOUTS = packaged_json("fkeys.json")["layouts"]


@pytest.mark.parametrize("n", range(1, 13))
async def test_f_plus_answers_with_the_default_apple_silicon_layout(kb, n):
    r = await kb("keyboard_lookup_keycode", key_name=f"F{n}+")
    item = FKEYS[f"F{n}"]
    assert r["found"] is True and r["match"] == "fkey_secondary"
    assert r["key"]["constant"] == f"kVK_F{n}" and r["key"]["code"] == item["primary"]["code"]
    sf = r["secondary_function"]
    assert sf["layout"] == "apple_silicon_2020plus"
    assert sf["function"] == item["secondary_by_layout"]["apple_silicon_2020plus"]
    # and what it is on every other layout
    assert set(sf["on_other_layouts"]) == set(LAYOUTS) - {"apple_silicon_2020plus"}
    for lid, value in sf["on_other_layouts"].items():
        assert value == item["secondary_by_layout"].get(lid)
    assert sf["event"] == item["event_for_secondary"]


@pytest.mark.parametrize("layout", [lid for lid in LAYOUTS if LAYOUTS[lid]["keys"]])
@pytest.mark.parametrize("n", range(1, 13))
async def test_f_plus_answers_per_layout(kb, n, layout):
    r = await kb("keyboard_lookup_keycode", key_name=f"f{n} +", layout=layout)
    sf = r["secondary_function"]
    assert sf["layout"] == layout
    assert sf["function"] == FKEYS[f"F{n}"]["secondary_by_layout"][layout]
    assert sf["applies_to"] == LAYOUTS[layout]["applies_to"]
    assert layout not in sf["on_other_layouts"]


async def test_the_layouts_really_differ_where_the_data_says(kb):
    modern = await kb("keyboard_lookup_keycode", key_name="F4+")
    intel = await kb("keyboard_lookup_keycode", key_name="F4+", layout="intel")
    assert modern["secondary_function"]["function"] == "Spotlight"
    assert intel["secondary_function"]["function"] == "Launchpad"
    assert intel["secondary_function"]["layout"] == "intel_laptop_2011_2020_backlit"
    f5 = await kb("keyboard_lookup_keycode", key_name="F5+", layout="external_2011_2020_no_backlight")
    assert f5["secondary_function"]["function"] is None
    assert "no printed secondary function" in f5["secondary_function"]["usage"]
    air = await kb("keyboard_lookup_keycode", key_name="F12+", layout="macbook_air_wellspring4_2010")
    assert air["secondary_function"]["function"] == "Eject"


async def test_touch_bar_layout_has_no_fixed_functions(kb):
    r = await kb("keyboard_lookup_keycode", key_name="F1+", layout="touch bar")
    sf = r["secondary_function"]
    assert sf["function"] is None
    assert any("Touch Bar" in note for note in sf["notes"])


async def test_high_f_keys_have_no_secondary_and_f21_does_not_exist(kb):
    r = await kb("keyboard_lookup_keycode", key_name="F17+")
    assert r["key"]["code"] == 0x40 and r["secondary_function"]["function"] is None
    err, _ = await kb.error("keyboard_lookup_keycode", key_name="F21+")
    assert "F1 to F20" in err["guidance"]


async def test_a_plain_f_key_with_a_layout_also_carries_its_secondary(kb):
    plain = await kb("keyboard_lookup_keycode", key_name="F4")
    assert "secondary_function" not in plain
    assert plain["key"]["code"] == 118
    with_layout = await kb("keyboard_lookup_keycode", key_name="F4", layout="intel")
    assert with_layout["secondary_function"]["function"] == "Launchpad"


async def test_an_unknown_layout_lists_the_valid_ones(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name="F4+", layout="commodore 64")
    assert err["type"] == "invalid_argument"
    for lid in LAYOUTS:
        assert lid in err["guidance"]


async def test_the_default_layout_setting(plexor, plexor_config):
    from keyboard_testlib import Call

    plexor_config({"keyboard": {"default_layout": "intel_laptop_2011_2020_backlit"}})
    async with plexor.client(installed=["keyboard"]) as client:
        r = await Call(client)("keyboard_lookup_keycode", key_name="F4+")
        assert r["secondary_function"]["function"] == "Launchpad"
        explicit = await Call(client)("keyboard_lookup_keycode", key_name="F4+", layout="apple_silicon_2020plus")
        assert explicit["secondary_function"]["function"] == "Spotlight"


async def test_a_bad_default_layout_fails_the_plugin_with_a_clear_error(plexor, plexor_config):
    plexor_config({"keyboard": {"default_layout": "bogus"}})
    async with plexor.client(installed=["keyboard"]) as client:
        rec = client.kernel.plugin("keyboard")
        assert rec.state.value == "failed"
        assert "default_layout" in rec.error and "apple_silicon_2020plus" in rec.error
        result = await client.call_tool("plexor_health", {})
        assert not result.is_error
