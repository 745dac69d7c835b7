"""Icons (server, plugins, tools, resources, templates, prompts) and cache hints declared by plugins,
through the SDK's client: PLEXOR_ICON, ``icons=``, ``cache=plexor.Cache(...)``."""

from __future__ import annotations

import pytest
from conftest import make_plugin

from plexor import Cache, PluginError

pytestmark = pytest.mark.anyio

SVG = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="
DARK = {"src": "https://example.org/dark.png", "sizes": ["48x48"], "theme": "dark"}


def declared_plugin(**overrides):
    def tools(register, settings):
        def plain() -> dict:
            """No icon of its own."""
            return {}

        def fancy() -> dict:
            """Its own icons."""
            return {}

        register(plain, cache=Cache(ttl=60, scope="public"))
        register(fancy, icons=[DARK], cache=overrides.get("fancy_cache", Cache(ttl=3600, scope="public")))

    def resources(register, settings):
        register("deco://static", lambda: {"v": 1}, cache=Cache(ttl=600, scope="public"))
        register("deco://live", lambda: {"v": 2})

    def templates(register, settings):
        register("deco://item/{n}", lambda n: {"n": n}, cache=Cache(ttl=30))

    def prompts(register, settings):
        def hello(name: str) -> str:
            """Say hello."""
            return f"hello {name}"

        register(hello)

    module = make_plugin("deco", plexor_register_tools=tools, plexor_register_resources=resources,
                         plexor_register_resource_templates=templates, plexor_register_prompts=prompts)
    module.PLEXOR_ICON = SVG
    return module


async def test_server_and_plugin_icons_reach_the_client(plexor):
    async with plexor.client([("deco", declared_plugin())], mode="legacy") as client:
        server_icons = client.server_info.icons
        tools = {t.name: t for t in (await client.list_tools()).tools}
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        health = await client.call_tool("plexor_plugins", {})
    assert server_icons and server_icons[0].src.startswith("data:image/svg+xml;base64,")
    assert [i.src for i in tools["deco_plain"].icons] == [SVG]  # the plugin's icon
    assert tools["deco_plain"].icons[0].mime_type == "image/svg+xml"
    assert [(i.src, i.sizes, i.theme) for i in tools["deco_fancy"].icons] == [(DARK["src"], ["48x48"], "dark")]
    assert tools["deco_fancy"].icons[0].mime_type == "image/png"
    assert [i.src for i in resources["deco://static"].icons] == [SVG]
    assert [i.src for i in templates[0].icons] == [SVG] and [i.src for i in prompts[0].icons] == [SVG]
    deco = next(p for p in health.structured_content["plugins"] if p["name"] == "deco")
    assert deco["icons"] == [{"src": SVG, "mimeType": "image/svg+xml"}]


async def test_cache_hints_follow_declarations_most_cautious_first(plexor):
    async with plexor.client([("deco", declared_plugin())], mode="auto", cache=None) as client:
        assert client.protocol_version == "2026-07-28"
        static = await client.read_resource("deco://static")
        live = await client.read_resource("deco://live")
        item = await client.read_resource("deco://item/3")
        templates = await client.list_resource_templates()
        resources = await client.list_resources()
        tools = await client.list_tools()
    assert (static.ttl_ms, static.cache_scope) == (600_000, "public")
    assert (live.ttl_ms, live.cache_scope) == (0, "private")  # undeclared: always fetch again
    assert (item.ttl_ms, item.cache_scope) == (30_000, "private")
    assert (templates.ttl_ms, templates.cache_scope) == (30_000, "private")
    assert (resources.ttl_ms, resources.cache_scope) == (0, "private")  # deco://live declares nothing
    # plexor_health and plexor_plugins declare nothing: the tools/list page is not cacheable
    assert (tools.ttl_ms, tools.cache_scope) == (0, "private")


@pytest.mark.all_plugins
async def test_the_keyboard_catalog_is_static_and_public(plexor):
    pytest.importorskip("plexor_keyboard", reason="plexor-keyboard is not installed (the `all` env runs this)")
    async with plexor.client(installed=["keyboard"], env={"PLEXOR_PLUGINS": "keyboard"}, mode="auto",
                             cache=None) as client:
        read = await client.read_resource("keycode://all")
        listed = await client.list_resources()
        tools = (await client.list_tools()).tools
    assert (read.ttl_ms, read.cache_scope) == (86_400_000, "public")
    assert (listed.ttl_ms, listed.cache_scope) == (86_400_000, "public")
    assert all(t.icons and t.icons[0].src.startswith("data:image/svg+xml") for t in tools if t.name.startswith("keyboard_"))


@pytest.mark.parametrize(("icons", "message"), [
    ("http://example.org/x.png", "neither a data:image/ URI nor https://"),
    ({"src": SVG, "colour": "red"}, "is not an icon"),
    (42, "is not an icon or a list of icons"),
])
async def test_a_bad_icon_fails_its_plugin_with_guidance(plexor, icons, message):
    def tools(register, settings):
        register(lambda: {}, name="t", icons=icons)

    async with plexor.kernel([("bad", make_plugin("bad", plexor_register_tools=tools))]) as kernel:
        rec = kernel.plugin("bad")
    assert rec.state.value == "failed" and message in rec.error


def test_cache_refuses_nonsense():
    with pytest.raises(PluginError, match="ttl must be a number of seconds"):
        Cache(ttl=-1)
    with pytest.raises(PluginError, match="is not a scope"):
        Cache(scope="everyone")  # type: ignore[arg-type]


async def test_modern_clients_get_the_server_icon_from_discover_not_on_every_result(plexor):
    async with plexor.client([("deco", declared_plugin())], mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        icons = client.server_info.icons
        result = await client.call_tool("deco_plain", {})
    assert icons and icons[0].src.startswith("data:image/svg+xml;base64,")
    stamp = result.meta["io.modelcontextprotocol/serverInfo"]
    assert stamp["name"] == "plexor" and "icons" not in stamp  # identity on each result, the icon once


SHIPPED_ICONS = {"keyboard": "plexor_keyboard", "folder-search": "plexor_folder_search", "edgelake": "plexor_edgelake",
                 "arbor": "plexor_arbor"}


@pytest.mark.all_plugins
@pytest.mark.parametrize("plugin", sorted(SHIPPED_ICONS))
def test_every_shipped_plugin_declares_an_embedded_svg_icon(plugin):
    import base64
    import importlib

    pytest.importorskip(SHIPPED_ICONS[plugin], reason=f"plexor-{plugin} is not installed (the `all` env runs this)")
    icon = importlib.import_module(f"{SHIPPED_ICONS[plugin]}.plugin").PLEXOR_ICON
    prefix = "data:image/svg+xml;base64,"
    assert icon.startswith(prefix), f"{plugin}'s PLEXOR_ICON is not an embedded SVG"
    svg = base64.b64decode(icon[len(prefix):], validate=True).decode("utf-8")
    assert svg.startswith("<svg ") and svg.endswith("</svg>") and 'viewBox="0 0 24 24"' in svg


@pytest.mark.all_plugins
async def test_arbor_tools_carry_its_icon(plexor):
    pytest.importorskip("plexor_arbor", reason="plexor-arbor is not installed (the `all` env runs this)")
    from plexor_arbor.plugin import PLEXOR_ICON

    async with plexor.client(installed=["arbor"], env={"PLEXOR_PLUGINS": "arbor"}, mode="auto", cache=None) as client:
        tools = [t for t in (await client.list_tools()).tools if t.name.startswith("arbor_")]
    assert tools and all(t.icons and t.icons[0].src == PLEXOR_ICON for t in tools)
