"""MCP Apps (io.modelcontextprotocol/ui) through the plugin API: a plugin defined here registers a
``ui://`` app and links tools to it; a real kernel and the SDK's client, with and without the extension."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client.extension import ClientExtension

from plexor import hookimpl
from plexor.apps import APP_MIME_TYPE, EXTENSION_ID

pytestmark = pytest.mark.anyio
PAGE = "<!doctype html><title>counter</title><p>a view</p>"


class AppsClient(ClientExtension):
    """What a host that renders MCP Apps declares."""

    identifier = EXTENSION_ID

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME_TYPE]}


class Counter:
    PLEXOR_NAMESPACE = "counter"

    @hookimpl
    def plexor_register_tools(self, register: Any, settings: Any) -> None:
        def show(n: int = 1) -> dict[str, Any]:
            """Show a count."""
            return {"n": n}

        def bump(n: int) -> dict[str, Any]:
            """Add one (the view's button)."""
            return {"n": n + 1}

        def plain() -> str:
            """A tool without a view."""
            return "plain"

        register(show, ui="ui://counter/view.html")
        register(bump, ui="ui://counter/view.html", visibility=["app"])
        register(plain)

    @hookimpl
    def plexor_register_resources(self, register: Any, settings: Any) -> None:
        register.app("ui://counter/view.html", lambda: PAGE, name="Counter view",
                     csp={"connectDomains": []}, permissions={"clipboardWrite": {}}, prefers_border=True)


class Plain:
    PLEXOR_NAMESPACE = "plain"

    @hookimpl
    def plexor_register_tools(self, register: Any, settings: Any) -> None:
        def hello() -> str:
            """Say hello."""
            return "hello"

        register(hello)


@pytest.mark.parametrize("version", [None, "2026-07-28"])
async def test_the_extension_is_advertised_only_while_a_plugin_offers_an_app(plexor: Any, version: Any) -> None:
    # What initialize (version None) and server/discover answer; the HTTP path is checked in tests/apps.
    from plexor.serving.server import build_server

    async with plexor.kernel([("counter", Counter())]) as kernel:
        assert build_server(kernel).get_capabilities(protocol_version=version).extensions[EXTENSION_ID] == {}
    async with plexor.kernel([("plain", Plain())]) as kernel:
        assert EXTENSION_ID not in (build_server(kernel).get_capabilities(protocol_version=version).extensions or {})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_linked_tools_carry_the_view_and_app_only_tools_are_listed_to_apps_clients_only(plexor: Any, mode: str) -> None:
    async with plexor.client([("counter", Counter())], mode=mode, extensions=[AppsClient()]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["counter_show"].meta["ui"] == {"resourceUri": "ui://counter/view.html", "visibility": ["model", "app"]}
        assert tools["counter_bump"].meta["ui"]["visibility"] == ["app"]
        assert "ui" not in tools["counter_plain"].meta
        assert tools["counter_show"].meta["plexor/provenance"] == "plexor/counter/show"
        assert (await client.call_tool("counter_bump", {"n": 1})).structured_content == {"n": 2}
    async with plexor.client([("counter", Counter())], mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "counter_bump" not in names and {"counter_show", "counter_plain"} <= names


async def test_the_app_resource_is_served_with_its_mime_type_and_csp(plexor: Any) -> None:
    async with plexor.client([("counter", Counter())]) as client:  # a client without Apps: not listed, still readable
        assert [r.uri for r in (await client.list_resources()).resources] == []
        assert (await client.read_resource("ui://counter/view.html")).contents[0].text == PAGE
    async with plexor.client([("counter", Counter())], extensions=[AppsClient()]) as client:
        listed = next(r for r in (await client.list_resources()).resources if r.uri == "ui://counter/view.html")
        assert listed.mime_type == APP_MIME_TYPE and listed.name == "Counter view"
        ui = {"csp": {"connectDomains": []}, "permissions": {"clipboardWrite": {}}, "prefersBorder": True}
        assert listed.meta == {"ui": ui}
        content = (await client.read_resource("ui://counter/view.html")).contents[0]
        assert content.mime_type == APP_MIME_TYPE and content.text == PAGE and content.meta == {"ui": ui}


async def test_a_client_without_apps_gets_the_same_results(plexor: Any) -> None:
    async with plexor.client([("counter", Counter())]) as plain_client:
        plain = await plain_client.call_tool("counter_show", {"n": 3})
    async with plexor.client([("counter", Counter())], extensions=[AppsClient()]) as apps_client:
        apps = await apps_client.call_tool("counter_show", {"n": 3})
    assert plain.content == apps.content and plain.structured_content == apps.structured_content == {"n": 3}


def test_the_wire_names_are_the_sdks() -> None:
    from mcp.server import apps

    assert (EXTENSION_ID, APP_MIME_TYPE) == (apps.EXTENSION_ID, apps.APP_MIME_TYPE)


async def test_the_sdks_csp_and_permission_models_are_accepted(plexor: Any) -> None:
    from mcp.server.apps import ResourceCsp, ResourcePermissions

    class Sdk:
        PLEXOR_NAMESPACE = "sdk"

        @hookimpl
        def plexor_register_resources(self, register: Any, settings: Any) -> None:
            register.app("ui://sdk/v.html", lambda: PAGE, csp=ResourceCsp(resource_domains=["https://cdn.example.com"]),
                         permissions=ResourcePermissions(camera={}))

    async with plexor.client([("sdk", Sdk())]) as client:
        content = (await client.read_resource("ui://sdk/v.html")).contents[0]
        assert content.meta == {"ui": {"csp": {"resourceDomains": ["https://cdn.example.com"]}, "permissions": {"camera": {}}}}


def _app_plugin(tools: Any = None, resources: Any = None) -> Any:
    class Bad:
        PLEXOR_NAMESPACE = "bad"

        @hookimpl
        def plexor_register_tools(self, register: Any, settings: Any) -> None:
            if tools:
                tools(register)

        @hookimpl
        def plexor_register_resources(self, register: Any, settings: Any) -> None:
            if resources:
                resources(register)

    return Bad()


def _noop() -> str:
    """Nothing."""
    return ""


@pytest.mark.parametrize(("tools", "resources", "said"), [
    (None, lambda r: r.app("https://x/v.html", lambda: PAGE), "not a ui:// URI"),
    (None, lambda r: r.app("ui://bad/v.html", lambda: PAGE, csp={"scriptDomains": []}), "csp key 'scriptDomains'"),
    (None, lambda r: r.app("ui://bad/v.html", lambda: PAGE, csp={"connectDomains": ["evil.com/x"]}), "list of origins"),
    (None, lambda r: r.app("ui://bad/v.html", lambda: PAGE, permissions={"usb": {}}), "permissions ['usb']"),
    (lambda r: r(_noop, ui="ui://bad/v.html", visibility=["agent"]), lambda r: r.app("ui://bad/v.html", lambda: PAGE),
     "visibility=['agent']"),
    (lambda r: r(_noop, ui="ui://bad/missing.html"), None, "'ui://bad/missing.html', which is not registered"),
    (lambda r: r(_noop, meta={"ui": {}}), None, "meta['ui']"),
])
async def test_a_bad_app_registration_fails_its_plugin_saying_what_to_fix(plexor: Any, tools: Any, resources: Any,
                                                                          said: str) -> None:
    async with plexor.kernel([("bad", _app_plugin(tools, resources)), ("plain", Plain())]) as kernel:
        rec = kernel.records["bad"]
        assert rec.state.value == "failed" and said in str(rec.error)
        assert kernel.records["plain"].state.value == "ready"
        assert not any(s.plugin == "bad" for s in kernel.registry.tools.values())


def test_app_page_problems_accepts_a_locked_down_page_and_names_what_is_wrong() -> None:
    import base64
    import hashlib

    from plexor.testing import app_page_problems

    def sha(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    script, style = "document.body.append('hi')", "body{margin:0}"
    csp = f"default-src 'none'; script-src {sha(script)}; style-src {sha(style)}; connect-src 'none'"
    page = f'<meta http-equiv="Content-Security-Policy" content="{csp}"><style>{style}</style><script>{script}</script>'
    assert app_page_problems(page) == []
    assert app_page_problems(page.replace("'hi'", "'bye'")) == [
        f"the CSP's script-src does not allow exactly the page's inline <script> ({sha(script.replace('hi', 'bye'))})"]
    assert app_page_problems(page + '<img src="https://example.com/x.png" onload="x()">') == [
        "<img src='https://example.com/x.png'> loads something", "<img> has an inline event handler onload"]
    assert app_page_problems(page.replace("connect-src 'none'", "connect-src *")) == [
        "the CSP's connect-src is ['*'], not 'none'"]
    assert app_page_problems("<p>no policy</p>") == ["no Content-Security-Policy <meta http-equiv> in the page"]


async def test_the_example_in_the_authoring_guide_works(plexor: Any, tmp_path: Any) -> None:
    import re
    import sys
    from pathlib import Path

    from plexor.testing import app_page_problems

    guide = (Path(__file__).resolve().parents[1] / "docs" / "authoring.md").read_text(encoding="utf-8")
    code = re.search(r"<!-- not-run: [^>]*\(apps-example\) -->\n```python\n(.*?)```", guide, re.S)
    assert code, "docs/authoring.md lost its MCP Apps example"
    package = tmp_path / "tally_example"
    package.mkdir()
    (package / "__init__.py").write_text(code.group(1), encoding="utf-8")
    page = (Path(__file__).resolve().parents[1] / "plugins" / "arbor" / "src" / "plexor_arbor" / "apps" / "tree.html")
    (package / "view.html").write_text(page.read_text(encoding="utf-8"), encoding="utf-8")  # a real built page
    sys.path.insert(0, str(tmp_path))
    try:
        import tally_example

        async with plexor.client([("tally", tally_example)], extensions=[AppsClient()]) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["tally_count"].meta["ui"]["resourceUri"] == "ui://tally/view.html"
            assert tools["tally_bump"].meta["ui"]["visibility"] == ["app"]
            assert (await client.call_tool("tally_bump", {"name": "tea"})).structured_content == {"name": "tea", "value": 1}
            content = (await client.read_resource("ui://tally/view.html")).contents[0]
            assert content.mime_type == APP_MIME_TYPE and app_page_problems(content.text) == []
        async with plexor.client([("tally", tally_example)]) as client:
            assert "tally_bump" not in {t.name for t in (await client.list_tools()).tools}
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tally_example", None)


async def test_two_plugins_each_offer_an_app_and_the_same_page_uri_is_refused(plexor: Any) -> None:
    class Other:
        PLEXOR_NAMESPACE = "other"

        def __init__(self, uri: str) -> None:
            self.uri = uri

        @hookimpl
        def plexor_register_resources(self, register: Any, settings: Any) -> None:
            register.app(self.uri, lambda: PAGE)

    async with plexor.kernel([("counter", Counter()), ("other", Other("ui://other/view.html"))]) as kernel:
        assert kernel.records["other"].state.value == "ready"  # ui:// is every plugin's scheme
        assert {"ui://counter/view.html", "ui://other/view.html"} <= set(kernel.registry.resources)
    async with plexor.kernel([("counter", Counter()), ("other", Other("ui://counter/view.html"))]) as kernel:
        rec = kernel.records["other"]
        assert rec.state.value == "failed" and "resource 'ui://counter/view.html'" in str(rec.error)
        assert "(plugin counter)" in str(rec.error) and kernel.records["counter"].state.value == "ready"
