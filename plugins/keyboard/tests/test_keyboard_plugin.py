import pytest

pytestmark = pytest.mark.anyio


async def test_plugin_is_ready_and_registers_its_tools(kb):
    kernel = kb.client.kernel
    rec = kernel.plugin("keyboard")
    assert rec.state.value == "ready", rec.describe()
    tools = await kb.client.list_tools()
    names = {t.name for t in tools.tools}
    assert {"keyboard_lookup_keycode", "keyboard_search_keys", "keyboard_list_categories",
            "keyboard_get_key_combinations"} <= names
    for t in tools.tools:
        if t.name.startswith("keyboard_"):
            assert t.annotations.read_only_hint is True
            assert t.description and len(t.description) > 60
