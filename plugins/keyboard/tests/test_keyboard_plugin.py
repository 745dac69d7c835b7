"""The plugin as a whole: registration, light imports, CLI commands, error guidance, a served process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.anyio


async def test_plugin_is_ready_and_registers_its_tools(kb):
    rec = kb.client.kernel.plugin("keyboard")
    assert rec.state.value == "ready", rec.describe()
    assert rec.distribution == "plexor-keyboard"
    tools = await kb.client.list_tools()
    mine = {t.name: t for t in tools.tools if t.name.startswith("keyboard_")}
    assert set(mine) == {"keyboard_lookup_keycode", "keyboard_search_keys", "keyboard_list_categories",
                         "keyboard_get_key_combinations"}
    for tool in mine.values():
        assert tool.annotations.read_only_hint is True
        assert len(tool.description) > 80
    props = mine["keyboard_lookup_keycode"].input_schema["properties"]
    assert set(props) == {"key_name", "fuzzy", "layout"}
    assert all(p.get("description") for p in props.values())
    assert mine["keyboard_lookup_keycode"].input_schema["required"] == ["key_name"]


async def test_dotted_tool_name_resolves(kb):
    r = await kb("keyboard.lookup_keycode", key_name="tab")
    assert r["key"]["code"] == 48


def test_entry_point_module_imports_only_plexor_and_the_standard_library():
    code = (
        "import sys, json\n"
        "import plexor\n"
        "plexor.hookimpl  # plexor loads pluggy for its hook marker on first use; that is plexor's, not ours\n"
        "before = set(sys.modules)\n"
        "import plexor_keyboard.plugin\n"
        "new = sorted(m.split('.')[0] for m in set(sys.modules) - before)\n"
        "print(json.dumps(sorted(set(new))))\n"
        "print(json.dumps([m for m in sys.modules if m.startswith(('rapidfuzz', 'plexor_keyboard.'))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    new_top = set(json.loads(out[0])) - {"plexor_keyboard", "plexor"}  # plexor loads its own modules on first use
    assert new_top <= set(sys.stdlib_module_names), new_top - set(sys.stdlib_module_names)
    # the catalog, the names and RapidFuzz load on first use, not at import
    assert json.loads(out[1]) == ["plexor_keyboard.plugin"]


def test_rapidfuzz_is_imported_only_when_a_lookup_misses():
    code = (
        "import sys\n"
        "from plexor_keyboard.catalog import get_catalog\n"
        "c = get_catalog()\n"
        "c.lookup('escape'); c.lookup('0x31'); c.lookup('F4+')\n"
        "print('rapidfuzz' in sys.modules)\n"
        "c.lookup('escpae', fuzzy=True)\n"
        "print('rapidfuzz' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_error_guidance_hook_explains_its_own_failures():
    from plexor_keyboard.catalog import CatalogError
    from plexor_keyboard.plugin import plexor_error_guidance

    assert "RapidFuzz" in plexor_error_guidance(ImportError("No module named 'rapidfuzz'"), {})
    assert "reinstall" in plexor_error_guidance(CatalogError("x"), {})
    assert plexor_error_guidance(ValueError("other"), {}) is None


def test_cli_commands(plexor_home, monkeypatch):
    from click.testing import CliRunner

    from plexor.testing import plugin_cli

    main = plugin_cli()
    runner = CliRunner()
    ok = runner.invoke(main, ["keyboard", "lookup", "esc"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["key"]["constant"] == "kVK_Escape"
    combo = runner.invoke(main, ["keyboard", "combo", "⌘⇧4"])
    assert combo.exit_code == 0 and json.loads(combo.stdout)["modifier_flags"] == 0x120000
    cats = runner.invoke(main, ["keyboard", "categories"])
    assert cats.exit_code == 0 and len(json.loads(cats.stdout)["categories"]) == 10
    missing = runner.invoke(main, ["keyboard", "lookup", "escpae"])
    assert missing.exit_code == 1 and "fuzzy" in missing.stderr
    suggested = runner.invoke(main, ["keyboard", "lookup", "retrun", "--fuzzy"])  # nothing found: exit 1, as documented
    assert suggested.exit_code == 1 and json.loads(suggested.stdout)["found"] is False, suggested.output
    assert json.loads(suggested.stdout)["suggestions"][0]["key"]["name"] == "Return"
    bad = runner.invoke(main, ["keyboard", "combo", "cmd+shift"])
    assert bad.exit_code == 2 and "no main key" in bad.stderr
    monkeypatch.setenv("PLEXOR_KEYBOARD_DEFAULT_LAYOUT", "intel_laptop_2011_2020_backlit")
    intel = runner.invoke(plugin_cli(), ["keyboard", "lookup", "F4+"])  # settings are read when the CLI starts
    assert json.loads(intel.stdout)["secondary_function"]["function"] == "Launchpad"


async def test_served_over_stdio_by_plexor_serve(plexor):
    async with plexor.stdio_client(installed=["keyboard"]) as client:
        result = await client.call_tool("keyboard_lookup_keycode", {"key_name": "retrun", "fuzzy": True})
        assert not result.is_error
        assert result.structured_content["suggestions"][0]["key"]["constant"] == "kVK_Return"
        combo = await client.call_tool("keyboard_get_key_combinations", {"shortcut": "ctrl-alt-delete"})
        assert combo.structured_content["canonical"] == "⌃⌥⌫"
