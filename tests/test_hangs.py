"""A plugin that hangs is bounded by PLEXOR_START_WAIT at every stage and never holds the others.

Each hang is a real blocking wait (a ``threading.Event`` nobody sets until the
test ends), at import, in a register hook, in a sync or async startup hook and
in a shutdown hook.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import anyio
import pytest
from conftest import install_fake_dist, make_plugin, tools_plugin

from plexor.core.kernel import Kernel, State

pytestmark = pytest.mark.anyio


def _kernel(home, *plugins, wait="0.5"):
    return Kernel(list(plugins), load_entry_points=False,
                  environ={"PLEXOR_HOME": str(home), "PLEXOR_START_WAIT": wait})


@pytest.fixture
def forever():
    gate = threading.Event()
    yield gate
    gate.set()  # let the abandoned threads end with the test


async def test_a_register_hook_that_hangs_fails_its_plugin_and_the_others_load(plexor_home, forever):
    hung = make_plugin("hung", plexor_register_tools=lambda register, settings: forever.wait())
    began = time.monotonic()
    k = _kernel(plexor_home, ("hung", hung), ("fine", tools_plugin("fine", ping=lambda: {"ok": True})), wait="1")
    k.load()
    assert time.monotonic() - began < 3
    assert k.records["hung"].state == State.FAILED
    assert "importing or registering did not finish within 1 s (PLEXOR_START_WAIT)" in k.records["hung"].error
    assert k.records["fine"].state == State.LOADING
    await k.start()
    assert (await k.call_tool("fine_ping", {})).data == {"ok": True}
    forever.set()  # the late registration is discarded, not merged
    await anyio.sleep(0.1)
    assert "hung" not in {spec.plugin for spec in k.registry.tools.values()}
    await k.stop()


HANGS_AT_IMPORT = """
import threading
threading.Event().wait()
"""


async def test_a_plugin_whose_import_hangs_does_not_hold_plexor_serve(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakehang", "fakehang", "plexor_fakehang", HANGS_AT_IMPORT)
    env = {**os.environ, "PLEXOR_HOME": str(plexor_home), "PYTHONPATH": str(site_dir), "PLEXOR_START_WAIT": "1",
           "PLEXOR_PLUGINS": "fakehang,example"}
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "plexor", "call", "example_greet", "--arg", "name=Ada"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Hello, Ada!" in out.stdout
    assert time.monotonic() - began < 30
    listing = subprocess.run([sys.executable, "-m", "plexor", "plugins", "--json"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert "did not finish within 1 s" in listing.stdout


@pytest.mark.serial  # a bound of a second or so on wall-clock time: run alone (tests/conftest.py)
async def test_a_sync_startup_that_blocks_leaves_the_event_loop_free_and_fails_after_twice_the_wait(
        plexor_home, forever):
    stuck = make_plugin("stuck", plexor_startup=lambda plugin: forever.wait())
    k = _kernel(plexor_home, ("stuck", stuck), ("fine", tools_plugin("fine", ping=lambda: {"ok": True})))
    k.load()
    async with anyio.create_task_group() as tg:
        tg.start_soon(k.start)
        began = time.monotonic()
        await anyio.sleep(0.1)  # the loop turns while the hook blocks
        assert (await k.call_tool("fine_ping", {})).data == {"ok": True}
        assert time.monotonic() - began < 0.5
    rec = k.records["stuck"]
    assert rec.state == State.FAILED
    assert "plexor_startup did not finish within 1 s (twice PLEXOR_START_WAIT)" in rec.error
    assert "plugin.warming()" in rec.error
    outcome = await k.call_tool("plexor_health", {})
    assert not outcome.is_error and k.state == State.READY
    await k.stop()


async def test_a_shutdown_hook_that_hangs_is_left_behind_and_stop_finishes(plexor_home, forever):
    async def async_hang(plugin):
        await anyio.sleep(3600)

    k = _kernel(plexor_home, ("a", make_plugin("a", plexor_shutdown=async_hang)),
                ("s", make_plugin("s", plexor_shutdown=lambda plugin: forever.wait())))
    await k.start()
    began = time.monotonic()
    await k.stop()
    assert time.monotonic() - began < 3
    assert k.state == State.STOPPED
    assert k.records["a"].state == State.STOPPED and k.records["s"].state == State.STOPPED
