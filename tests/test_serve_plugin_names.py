"""`plexor serve` with an unknown name in PLEXOR_PLUGINS/PLEXOR_DISABLE serves the plugins that exist and says
the did-you-mean in its log, `plexor_health` and the initialize instructions (a client launching it would
otherwise see only "Connection closed"); CLI commands still refuse it (exit 2). Known names serve as before
(checked with the SDK's own clients)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

import anyio
import pytest
from conftest import install_fake_dist
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from plexor.extending import FEATURES

pytestmark = pytest.mark.anyio

TOOLS = """
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def echo(text: str) -> dict:
        '''Echo a text.'''
        return {"text": text}

    register(echo)
"""


@pytest.fixture
def env(tmp_path, site_dir):
    install_fake_dist(site_dir, "plexor-fakeserve", "fakeserve", "plexor_fakeserve", TOOLS)
    install_fake_dist(site_dir, "plexor-fakeother", "fakeother", "plexor_fakeother", TOOLS)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(tmp_path / "home"), PYTHONPATH=str(site_dir))
    return environ


def _serve_until_serving(env: dict[str, str], transport: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Start `plexor serve` over HTTP/SSE and read its log up to the 'serving' line."""
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", transport, "--port", "0"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "the server exited before serving: " + "".join(lines)
        lines.append(line)
        if "serving" in line:
            return proc, lines
    raise AssertionError("not serving after 60 s: " + "".join(lines))


@pytest.mark.parametrize("transport", ["http", "sse"])
@pytest.mark.parametrize("var", ["PLEXOR_PLUGINS", "PLEXOR_DISABLE"])
def test_an_unknown_plugin_name_is_logged_and_the_server_still_serves(env, var, transport):
    proc, lines = _serve_until_serving({**env, var: "fakeserve,fakesreve"}, transport)
    try:
        log = "".join(lines)
        assert f"{var} names 'fakesreve', which is not installed; did you mean 'fakeserve'?" in log
        assert "plugin_not_installed" in log and proc.poll() is None
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


@pytest.mark.parametrize("var", ["PLEXOR_PLUGINS", "PLEXOR_DISABLE"])
async def test_under_stdio_a_client_sees_the_did_you_mean(env, var):
    """A client launching the server (where a failed start shows only "Connection closed") gets a server
    with the plugins that exist, and the did-you-mean in the instructions, plexor_health and the log."""
    hint = f"{var} names 'fakesreve', which is not installed; did you mean 'fakeserve'?"
    errlog = tempfile.TemporaryFile(mode="w+")
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve"],
                                   env={**env, var: "fakeserve,fakesreve"})
    with anyio.fail_after(60), errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert hint in (client.instructions or "")
            health = (await client.call_tool("plexor_health", {})).structured_content
            assert health["unknown_plugins"] == [hint]
            echo = await client.call_tool("fakeserve_echo", {"text": "hi"})
            served = not echo.is_error
        errlog.seek(0)
        assert hint in errlog.read()
    assert served == (var == "PLEXOR_PLUGINS")  # PLEXOR_DISABLE=fakeserve,... still blocks fakeserve


async def test_a_name_nothing_resembles_lists_what_is_installed(env):
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve"],
                                   env={**env, "PLEXOR_PLUGINS": "zzzz"})
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            text = client.instructions or ""
            assert "PLEXOR_PLUGINS names 'zzzz', which is not installed; installed: " in text
            listed = text.split("installed: ", 1)[1].split(".", 1)[0].split(", ")
            assert {"fakeother", "fakeserve", "plexor"} <= set(listed) and listed == sorted(listed)
            health = (await client.call_tool("plexor_health", {})).structured_content
            # only the built-in plugin and the server's features (PLEXOR_PLUGINS does not choose those)
            assert [p["name"] for p in health["plugins"] if p["state"] == "ready"] == sorted(["plexor", *FEATURES])


def test_cli_commands_still_refuse_an_unknown_name(env):
    out = subprocess.run([sys.executable, "-m", "plexor", "tools"], env={**env, "PLEXOR_PLUGINS": "fakesreve"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "PLEXOR_PLUGINS names 'fakesreve', which is not installed; did you mean 'fakeserve'?" in out.stderr


async def test_known_names_serve_stdio(env):
    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "serve"],
                                   env={**env, "PLEXOR_PLUGINS": "fakeserve", "PLEXOR_DISABLE": "fakeother"})
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as session:
            result = await session.call_tool("fakeserve_echo", {"text": "hi"})
            assert not result.is_error and result.structured_content == {"text": "hi"}
            while True:  # the kernel loads after the handshake: the disabled plugin's tool never appears
                tools = {t.name for t in (await session.list_tools()).tools}
                if "fakeserve_echo" in tools:
                    break
                await anyio.sleep(0.1)
            assert "fakeother_echo" not in tools


async def test_known_names_serve_http(env):
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0"],
                            env={**env, "PLEXOR_PLUGINS": "fakeserve,fakeother", "PLEXOR_DISABLE": "fakeother"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, "the server exited before serving"
            found = re.search(r"serving Streamable HTTP at /mcp on (http://\S+)", line)
            url = found and found.group(1) + "/mcp"
        assert url
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url)) as session:
                tools = {t.name for t in (await session.list_tools()).tools}
                assert "fakeserve_echo" in tools and "fakeother_echo" not in tools
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
