"""Test-only plugin for tests/multihost and bench/multihost.py: which process served a call, asking over
several rounds, publishing a change, and a slow call to kill a worker under."""

from __future__ import annotations

import asyncio
import os
import socket
import time

from plexor import Context, Elicit, hookimpl

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOUR = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}


@hookimpl
def plexor_register_tools(register, settings):
    register(whoami, blocking=False)
    register(ask_twice)
    register(touch, blocking=False)
    register(slow, task="optional")


@hookimpl
def plexor_register_resources(register, settings):
    register("mh://board", board, name="board", mime_type="application/json", description="Changes with every touch.")


def _where() -> dict:
    return {"host": os.environ.get("MULTIHOST_NAME") or socket.gethostname(), "pid": os.getpid()}


def whoami(ctx: Context) -> dict:
    """Which host and worker process served this call."""
    return _where()


async def ask_twice(ctx: Context) -> dict:
    """Ask for a name, then (in another round) a colour; says which processes served each round."""
    ctx.state["served"] = [*ctx.state.get("served", []), _where()]
    first = await ctx.ask(name=Elicit("What is your name?", NAME))
    second = await ctx.ask(colour=Elicit("Which colour?", COLOUR))
    return {"name": first["name"]["content"]["name"], "colour": second["colour"]["content"]["colour"],
            "served": ctx.state["served"], "round": ctx.round}


def touch(ctx: Context, uri: str = "mh://board") -> dict:
    """Publish resources/updated for ``uri`` (and say who published it, and when)."""
    ctx.plugin.resource_updated(uri)
    return {**_where(), "at": time.time(), "uri": uri}


async def slow(ctx: Context, seconds: float = 30.0) -> dict:
    """Sleep ``seconds`` (reporting progress every half second), then say who served it."""
    steps = max(1, int(seconds * 2))
    for i in range(steps):
        await ctx.progress(i, steps, f"step {i} on pid {os.getpid()}")  # the test kills exactly this worker
        await asyncio.sleep(seconds / steps)
    return _where()


def board() -> dict:
    return {"at": time.time(), **_where()}
