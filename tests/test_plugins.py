"""Plugin discovery, isolation, clash refusal and the PLEXOR_PLUGINS / PLEXOR_DISABLE escape hatches."""

from __future__ import annotations

import pytest
from conftest import install_fake_dist, make_plugin, tools_plugin

from plexor.core.kernel import Kernel, State

GOOD = """
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def ping() -> dict:
        '''Answer pong.'''
        return {"pong": True}
    register(ping)
"""


def _kernel(plexor_home, *extra, **env):
    environ = {"PLEXOR_HOME": str(plexor_home), **env}
    return Kernel(list(extra), environ=environ)


def test_entry_point_plugin_is_discovered_with_its_distribution(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakegood", "fakegood", "plexor_fakegood", GOOD, version="2.5")
    k = _kernel(plexor_home).load()
    rec = k.records["fakegood"]
    assert (rec.distribution, rec.version, rec.state) == ("plexor-fakegood", "2.5", State.LOADING)
    assert "fakegood_ping" in k.registry.tools


@pytest.mark.anyio
async def test_plugin_whose_import_raises_fails_alone(plexor, site_dir):
    install_fake_dist(site_dir, "plexor-fakegood", "fakegood", "plexor_fakegood", GOOD)
    install_fake_dist(site_dir, "plexor-fakebad", "fakebad", "plexor_fakebad", "raise ImportError('numpy missing')")
    async with plexor.client(installed=["fakegood", "fakebad"]) as client:
        bad = client.kernel.records["fakebad"]
        assert bad.state == State.FAILED
        assert "ImportError: numpy missing" in bad.error
        result = await client.call_tool("fakegood_ping", {})
        assert result.structured_content == {"pong": True}
        health = await client.call_tool("plexor_health", {})
        states = {p["name"]: p["state"] for p in health.structured_content["plugins"]}
        assert states["fakebad"] == "failed" and states["fakegood"] == "ready"
        # A call into the failed plugin's namespace says what happened.
        missing = await client.call_tool("fakebad_anything", {})
        assert missing.is_error and "not available" in missing.content[0].text


def test_plugin_calling_sys_exit_at_import_is_isolated(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakeexit", "fakeexit", "plexor_fakeexit", "import sys\nsys.exit(3)")
    k = _kernel(plexor_home).load()
    assert k.records["fakeexit"].state == State.FAILED
    assert "sys.exit(3)" in k.records["fakeexit"].error


def test_hook_that_raises_fails_only_that_plugin(plexor_home):
    def broken(register, settings):
        register(lambda: None, name="half")
        raise RuntimeError("registration exploded")

    k = _kernel(plexor_home, ("broken", make_plugin("broken", plexor_register_tools=broken)),
                ("fine", tools_plugin("fine", ok=lambda: {"ok": 1}))).load()
    assert k.records["broken"].state == State.FAILED
    assert "registration exploded" in k.records["broken"].error
    # Nothing half-registered survives.
    assert "broken_half" not in k.registry.tools
    assert "fine_ok" in k.registry.tools


def test_invalid_registration_fails_the_plugin(plexor_home):
    def bad_name(register, settings):
        register(lambda: None, name="has space")

    def bad_annotation(register, settings):
        def f() -> dict:
            return {}

        register(f, annotations={"readOnly": True})

    k = _kernel(plexor_home, ("n", make_plugin("n", plexor_register_tools=bad_name)),
                ("a", make_plugin("a", plexor_register_tools=bad_annotation))).load()
    assert "letters, digits" in k.records["n"].error
    assert "unknown annotations" in k.records["a"].error


def test_tool_name_clash_is_refused_naming_both(plexor_home):
    one = tools_plugin("one", namespace="shared", go=lambda: {})
    two = tools_plugin("two", namespace="shared", go=lambda: {})
    k = _kernel(plexor_home, ("one", one), ("two", two)).load()
    assert k.records["one"].state == State.LOADING
    err = k.records["two"].error
    assert k.records["two"].state == State.FAILED
    assert "clashes with" in err and "plugin one" in err and "plugin two" in err


def test_uri_scheme_clash_is_refused(plexor_home):
    def res(register, settings):
        register("same://x", lambda: {})

    def res2(register, settings):
        register("same://y", lambda: {})

    k = _kernel(plexor_home, ("r1", make_plugin("r1", plexor_register_resources=res)),
                ("r2", make_plugin("r2", plexor_register_resource_templates=lambda register, settings: register("same://{id}", lambda id: {})))).load()
    assert k.records["r2"].state == State.FAILED
    assert "URI scheme 'same'" in k.records["r2"].error
    del res2


def test_table_clash_is_refused(plexor_home):
    import peewee

    class Thing(peewee.Model):
        name = peewee.TextField()

        class Meta:
            table_name = "things"

    class Other(peewee.Model):
        name = peewee.TextField()

        class Meta:
            table_name = "things"

    k = _kernel(plexor_home, ("t1", make_plugin("t1", plexor_register_models=lambda register: register(Thing))),
                ("t2", make_plugin("t2", plexor_register_models=lambda register: register(Other)))).load()
    assert k.records["t2"].state == State.FAILED
    assert "table 'things'" in k.records["t2"].error


def test_entry_point_name_clash_refuses_the_second_distribution(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakea", "twin", "plexor_fakea", GOOD)
    install_fake_dist(site_dir, "plexor-fakeb", "twin", "plexor_fakeb", GOOD)
    k = _kernel(plexor_home).load()
    refused = [r for r in k.records.values() if r.name == "twin" and r.state == State.FAILED]
    assert len(refused) == 1
    assert "plexor-fakea" in refused[0].error and "plexor-fakeb" in refused[0].error
    assert k.records["twin"].state == State.LOADING


def test_plexor_plugins_loads_only_named(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakegood", "fakegood", "plexor_fakegood", GOOD)
    install_fake_dist(site_dir, "plexor-fakeother", "fakeother", "plexor_fakeother", GOOD.replace("ping", "pong"))
    k = _kernel(plexor_home, PLEXOR_PLUGINS="fakeother").load()
    assert k.records["fakegood"].state == State.DISABLED
    assert k.records["fakeother"].state == State.LOADING
    assert k.records["plexor"].state == State.LOADING  # the built-in plugin always loads


def test_empty_plexor_plugins_loads_none(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakegood", "fakegood", "plexor_fakegood", GOOD)
    k = _kernel(plexor_home, PLEXOR_PLUGINS="").load()
    assert k.records["fakegood"].state == State.DISABLED
    assert set(k.registry.tools) == {"plexor_health", "plexor_plugins"}


def test_plexor_disable_blocks(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakegood", "fakegood", "plexor_fakegood", GOOD)
    k = _kernel(plexor_home, PLEXOR_DISABLE="fakegood").load()
    assert k.records["fakegood"].state == State.DISABLED
    assert "fakegood_ping" not in k.registry.tools


def test_each_kernel_has_its_own_plugin_manager(plexor_home):
    p = tools_plugin("solo", a=lambda: {})
    k1 = _kernel(plexor_home, ("solo", p)).load()
    k2 = _kernel(plexor_home).load()
    assert k1.pm is not k2.pm
    assert "solo" not in k2.records


@pytest.mark.anyio
async def test_a_signature_pydantic_cannot_describe_fails_the_plugin_at_start(plexor):
    import socket

    def tool(sock: socket.socket) -> dict:
        """Takes a type that has no JSON schema."""
        return {}

    async with plexor.client([("odd", tools_plugin("odd", tool=tool)), ("fine", tools_plugin("fine", ok=lambda: {}))]) as client:
        assert client.kernel.records["odd"].state == State.FAILED
        error = client.kernel.records["odd"].error
        assert "tool 'odd_tool' has a parameter or return type with no JSON schema" in error
        assert "socket.socket" in error and "Use JSON-friendly types" in error
        names = {t.name for t in (await client.list_tools()).tools}
        assert "fine_ok" in names and "odd_tool" not in names


@pytest.mark.anyio
async def test_guidance_finds_failed_and_disabled_plugins_whose_namespace_has_the_separator(plexor):
    def boom(plugin):
        raise RuntimeError("index folder missing")

    broken = make_plugin("folder-search", plexor_startup=boom,
                         plexor_register_tools=lambda register, settings: register(lambda: {}, name="search"))
    off = tools_plugin("my-tools", go=lambda: {})
    async with plexor.client([("folder-search", broken), ("my-tools", off)], env={"PLEXOR_DISABLE": "my-tools"}) as client:
        failed = await client.call_tool("folder_search_search", {})
        assert failed.is_error
        assert "belongs to the plugin 'folder-search', which is not available (it failed)" in failed.content[0].text
        disabled = await client.call_tool("my_tools_go", {})
        assert "belongs to the plugin 'my-tools', which is disabled" in disabled.content[0].text
        assert "PLEXOR_DISABLE" in disabled.content[0].text


def test_the_builtin_plugin_cannot_be_disabled(plexor_home):
    k = _kernel(plexor_home, PLEXOR_DISABLE="plexor").load()
    assert k.records["plexor"].state == State.LOADING
    assert "plexor_health" in k.registry.tools


@pytest.mark.parametrize("variable, value, message", [
    ("PLEXOR_SEPARATOR", ".", "PLEXOR_SEPARATOR='.' cannot join tool names"),
    ("PLEXOR_PAGE_SIZE", "abc", "PLEXOR_PAGE_SIZE='abc' is not a valid value"),
    ("PLEXOR_PAGE_SIZE", "0", "PLEXOR_PAGE_SIZE='0' is not a valid value"),
    ("PLEXOR_START_WAIT", "soon", "PLEXOR_START_WAIT='soon' is not a valid value"),
])
def test_bad_kernel_environment_variables_are_config_errors(plexor_home, variable, value, message):
    from plexor.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _kernel(plexor_home, **{variable: value})


@pytest.mark.anyio
async def test_the_separator_can_be_a_dash(plexor):
    async with plexor.client([("demo", tools_plugin("demo", go=lambda: {"ok": True}))],
                             env={"PLEXOR_SEPARATOR": "-"}) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"demo-go", "plexor-health"} <= names
        assert (await client.call_tool("demo.go", {})).structured_content == {"ok": True}
