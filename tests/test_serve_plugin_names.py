"""`plexor serve` refuses an unknown name in PLEXOR_PLUGINS/PLEXOR_DISABLE up front (exit 2 with a did-you-mean),
for every transport, and serves as before when the names are installed (checked with the SDK's own clients)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import anyio
import pytest
from conftest import install_fake_dist
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

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


@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
@pytest.mark.parametrize("var", ["PLEXOR_PLUGINS", "PLEXOR_DISABLE"])
def test_an_unknown_plugin_name_is_a_usage_error_before_serving(env, var, transport):
    out = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", transport, "--port", "0"],
                         env={**env, var: "fakeserve,fakesreve"}, input="", capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert f"{var} names 'fakesreve', which is not installed; did you mean 'fakeserve'?" in out.stderr
    assert "fakeserve'," not in out.stderr.split("did you mean")[0]  # the installed name is not reported
    assert "serving" not in out.stderr and out.stdout == ""


def test_a_name_nothing_resembles_lists_what_is_installed(env):
    out = subprocess.run([sys.executable, "-m", "plexor", "serve"], env={**env, "PLEXOR_PLUGINS": "zzzz"},
                         input="", capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "PLEXOR_PLUGINS names 'zzzz', which is not installed; installed: " in out.stderr
    listed = out.stderr.split("installed: ", 1)[1].splitlines()[0].split(", ")
    assert {"fakeother", "fakeserve", "plexor"} <= set(listed) and listed == sorted(listed)


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
