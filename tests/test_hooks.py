"""One test per hook, named test_hook_<hook> (tests/test_docs.py checks that each hook has one).

plexor_add_config and plexor_register_models have theirs in test_config.py and test_storage.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import install_fake_dist, make_plugin

from plexor import Context, PlexorError, PluginHandle

pytestmark = pytest.mark.anyio


async def test_hook_plexor_register_tools(plexor):
    def register_tools(register, settings):
        def double(x: int) -> dict:
            """Double a number."""
            return {"x": x * 2}

        register(double, annotations={"readOnlyHint": True})

    async with plexor.client([("math", make_plugin("math", plexor_register_tools=register_tools))]) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "math_double")
        assert tool.annotations.read_only_hint is True
        assert (await client.call_tool("math_double", {"x": 21})).structured_content == {"x": 42}


async def test_hook_plexor_register_resources(plexor):
    def register_resources(register, settings):
        register("hooked://fixed", lambda: {"fixed": True}, name="fixed")
        register.lister(lambda: [{"uri": "hooked://fixed/2", "name": "dynamic"}])

    async with plexor.client([("hooked", make_plugin("hooked", plexor_register_resources=register_resources))]) as c:
        assert {r.uri for r in (await c.list_resources()).resources} == {"hooked://fixed", "hooked://fixed/2"}
        assert (await c.read_resource("hooked://fixed")).contents[0].text == '{"fixed": true}'


async def test_hook_plexor_register_resource_templates(plexor):
    def register_templates(register, settings):
        register("items://{kind}/{item_id}", lambda kind, item_id: {"kind": kind, "id": item_id})

    async with plexor.client([("items", make_plugin("items", plexor_register_resource_templates=register_templates))]) as c:
        read = await c.read_resource("items://book/42")
        assert read.contents[0].text == '{"kind": "book", "id": "42"}'


async def test_hook_plexor_register_prompts(plexor):
    def register_prompts(register, settings):
        def review(language: str) -> list:
            """Review code."""
            return [{"role": "user", "text": f"Review this {language} code."},
                    {"role": "assistant", "text": "Paste it here."}]

        register(review)

    async with plexor.client([("code", make_plugin("code", plexor_register_prompts=register_prompts))]) as c:
        got = await c.get_prompt("code_review", {"language": "Rust"})
        assert [(m.role, m.content.text) for m in got.messages] == [
            ("user", "Review this Rust code."), ("assistant", "Paste it here.")]


COMMANDS = """
from plexor import hookimpl

@hookimpl
def plexor_register_commands(cli):
    import click

    @cli.group("fakecmd")
    def group():
        '''Commands of the fake plugin.'''

    @group.command()
    @click.argument("name")
    def hello(name):
        '''Say hello.'''
        click.echo(f"hello {name} from a plugin command")

    @cli.command("serve")
    def hijack():
        '''Tries to replace a core command.'''
"""


def test_hook_plexor_register_commands(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakecmd", "fakecmd", "plexor_fakecmd", COMMANDS)
    env = {**os.environ, "PLEXOR_HOME": str(plexor_home), "PYTHONPATH": str(site_dir)}
    out = subprocess.run([sys.executable, "-m", "plexor", "fakecmd", "hello", "Ada"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello Ada from a plugin command"
    assert "tried to replace the core command 'serve'; refused" in out.stderr
    helptext = subprocess.run([sys.executable, "-m", "plexor", "--help"], env=env, capture_output=True, text=True,
                              timeout=60).stdout
    assert "fakecmd" in helptext and "Commands of the fake plugin." in helptext


async def test_hook_plexor_startup(plexor):
    class Greeter:
        greeting = "opened at startup"

    async def startup(plugin):
        assert isinstance(plugin, PluginHandle) and plugin.name == "svc"
        plugin.provide(Greeter())

    def register_tools(register, settings):
        def read(ctx: Context) -> dict:
            """Read what startup opened."""
            return {"greeting": ctx.service(Greeter).greeting}

        register(read)

    plugin = make_plugin("svc", plexor_startup=startup, plexor_register_tools=register_tools)
    async with plexor.client([("svc", plugin)]) as client:
        assert (await client.call_tool("svc_read", {})).structured_content == {"greeting": "opened at startup"}


async def test_hook_plexor_shutdown(plexor):
    closed = []

    def shutdown(plugin):
        closed.append(plugin.state)

    async with plexor.kernel([("svc", make_plugin("svc", plexor_shutdown=shutdown))]):
        assert closed == []
    assert closed == ["draining"]


async def test_hook_plexor_error_guidance(plexor):
    def register_tools(register, settings):
        def connect() -> dict:
            """Connect to the node."""
            raise ConnectionRefusedError(111, "Connection refused")

        def other() -> dict:
            """Fails in a way the plugin does not explain."""
            raise ValueError("unexplained")

        register(connect)
        register(other)

    def guidance(exception, context):
        if isinstance(exception, ConnectionRefusedError):
            return PlexorError("the node at 127.0.0.1:32049 is not answering", "Start the node, or set [net] nodes.")
        return None

    plugin = make_plugin("net", plexor_register_tools=register_tools, plexor_error_guidance=guidance)
    async with plexor.client([("net", plugin)]) as client:
        explained = await client.call_tool("net_connect", {})
        assert explained.content[0].text == "the node at 127.0.0.1:32049 is not answering\nStart the node, or set [net] nodes."
        fallback = await client.call_tool("net_other", {})
        assert "net_other failed: ValueError: unexplained" in fallback.content[0].text


async def test_async_error_guidance_is_ignored_not_awaited(plexor):
    async def guidance(exception, context):
        return "never seen"

    def register_tools(register, settings):
        register(lambda: 1 / 0, name="div")

    plugin = make_plugin("bad", plexor_register_tools=register_tools, plexor_error_guidance=guidance)
    async with plexor.client([("bad", plugin)]) as client:
        r = await client.call_tool("bad_div", {})
        assert "ZeroDivisionError" in r.content[0].text and "never seen" not in r.content[0].text
