"""One vocabulary for layouts: the `layout` argument, `--layout`, `default_layout` in plexor.toml and
PLEXOR_KEYBOARD_DEFAULT_LAYOUT take the same forms, and a value outside them gets a did-you-mean."""

from __future__ import annotations

import json
from typing import Any

import pytest
from keyboard_testlib import Call, packaged_json

pytestmark = pytest.mark.anyio

LAYOUTS = list(packaged_json("fkeys.json")["layouts"])
VARIABLE = "PLEXOR_KEYBOARD_DEFAULT_LAYOUT"


def _every_form() -> list[tuple[str, str]]:
    from plexor_keyboard.layouts import LAYOUT_ALIASES

    return [(lid, lid) for lid in LAYOUTS] + list(LAYOUT_ALIASES.items())


async def _keyboard_health(client: Any) -> dict[str, Any]:
    result = await client.call_tool("plexor_health", {})
    assert not result.is_error
    return next(p for p in result.structured_content["plugins"] if p["name"] == "keyboard")


async def _start_error(client: Any) -> str:
    """The error that failed the keyboard plugin at start (asserting that it failed)."""
    health = await _keyboard_health(client)
    assert health["state"] == "failed", health
    call = await client.call_tool("keyboard_lookup_keycode", {"key_name": "F4+"})
    assert call.is_error
    return str(health["error"])


async def test_the_variable_takes_the_short_form_the_argument_takes(plexor):
    async with plexor.client(installed=["keyboard"], env={VARIABLE: "intel"}) as client:
        assert (await _keyboard_health(client))["state"] == "ready"
        r = await Call(client)("keyboard_lookup_keycode", key_name="F4+")
        assert r["secondary_function"]["layout"] == "intel_laptop_2011_2020_backlit"
        assert r["secondary_function"]["function"] == "Launchpad"


async def test_a_misspelt_variable_fails_the_plugin_with_a_did_you_mean(plexor):
    async with plexor.client(installed=["keyboard"], env={VARIABLE: "intle"}) as client:
        error = await _start_error(client)
    assert f"default_layout = 'intle' in environment variable {VARIABLE}" in error
    assert "Did you mean 'intel' (intel_laptop_2011_2020_backlit)?" in error
    for lid in LAYOUTS:
        assert lid in error


@pytest.mark.parametrize("value", ["Touch Bar", "touch-bar", "TOUCH_BAR_2016_2022"])
async def test_the_config_file_takes_any_spelling(plexor, plexor_config, value):
    plexor_config({"keyboard": {"default_layout": value}})
    async with plexor.client(installed=["keyboard"]) as client:
        r = await Call(client)("keyboard_lookup_keycode", key_name="F1+")
        assert r["secondary_function"]["layout"] == "touch_bar_2016_2022"


async def test_a_misspelt_config_value_names_the_file_and_the_nearest_layout(plexor, plexor_config):
    path = plexor_config({"keyboard": {"default_layout": "aluminum 2007"}})
    async with plexor.client(installed=["keyboard"]) as client:
        error = await _start_error(client)
    assert f"in [keyboard] of {path}" in error
    assert "Did you mean 'aluminium_2007_2010'?" in error


async def test_a_misspelt_layout_argument_gets_a_did_you_mean(kb):
    err, _ = await kb.error("keyboard_lookup_keycode", key_name="F4+", layout="extrenal")
    assert err["type"] == "invalid_argument"
    assert "Did you mean 'external' (external_2011_2020_no_backlight)?" in err["guidance"]


async def test_the_argument_takes_every_form_of_the_vocabulary(kb):
    for form, lid in _every_form():
        for written in (form, form.upper(), form.replace(" ", "-")):
            r = await kb("keyboard_lookup_keycode", key_name="F4+", layout=written)
            assert r["secondary_function"]["layout"] == lid, written


@pytest.mark.parametrize("form, lid", _every_form())
def test_the_variable_takes_every_form_of_the_vocabulary(plexor, form, lid):
    out = plexor.cli(["keyboard", "lookup", "F4+"], installed=["keyboard"], env={VARIABLE: form})
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["secondary_function"]["layout"] == lid


def test_the_cli_flag_and_variable_share_the_vocabulary_and_its_errors(plexor):
    flag = plexor.cli(["keyboard", "lookup", "F4+", "--layout", "Intel"], installed=["keyboard"])
    assert flag.exit_code == 0 and json.loads(flag.stdout)["secondary_function"]["function"] == "Launchpad"
    bad_flag = plexor.cli(["keyboard", "lookup", "F4+", "--layout", "intle"], installed=["keyboard"])
    assert bad_flag.exit_code == 2
    assert "unknown layout 'intle'" in bad_flag.stderr and "Did you mean 'intel'" in bad_flag.stderr
    bad_env = plexor.cli(["keyboard", "lookup", "F4+"], installed=["keyboard"], env={VARIABLE: "intle"})
    assert bad_env.exit_code == 2
    assert VARIABLE in bad_env.stderr and "Did you mean 'intel'" in bad_env.stderr
