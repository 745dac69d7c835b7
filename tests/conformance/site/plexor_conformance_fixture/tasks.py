"""Test-only plugins for the tasks scenarios of the conformance suite (SEP-2663, and 2025-11-25 tasks).

The suite calls tools by bare names (``slow_compute``, ``failing_job``...); tool
names are ``<namespace>_<method>``, so each name's first word is a plugin of its
own here, all in this module (one small object per plugin).
"""

from __future__ import annotations

import anyio

from plexor import AskError, Context, Elicit, Result, hookimpl


class _Plugin:
    def __init__(self, namespace: str, *tools: tuple) -> None:
        self.PLEXOR_NAMESPACE = namespace
        self._tools = tools

    @hookimpl
    def plexor_register_tools(self, register, settings):
        for func, options in self._tools:
            register(func, **options)


async def compute(ctx: Context, seconds: float = 1.0, label: str = "") -> Result:
    """Work for `seconds` seconds (reporting progress), then return; a task when the client can take one."""
    steps = max(1, int(seconds * 10))
    for step in range(steps):
        await anyio.sleep(seconds / steps)
        await ctx.progress(step + 1, steps, f"computing {label}".strip())
    return Result({"label": label, "seconds": seconds}, text=f"Computed {label or 'it'} in {seconds:g} s.")


async def detached(ctx: Context, seconds: float = 1.0) -> Result:
    """Become a task at once (``ctx.detach()``), then work for `seconds` seconds."""
    await ctx.detach("working")
    await anyio.sleep(seconds)
    return Result({"seconds": seconds}, text=f"Worked {seconds:g} s.")


async def job(ctx: Context) -> Result:
    """Work for a second, then fail as a tool (isError: true)."""
    await anyio.sleep(1.0)
    raise RuntimeError("the job failed on purpose (a tool execution error)")


async def error_job(ctx: Context) -> Result:
    """Fail at the protocol level: the task ends failed with a JSON-RPC error."""
    await anyio.sleep(0.1)
    raise AskError("the job hit an internal protocol error on purpose", "This tool exists to test failed tasks.",
                   rpc_code=-32603)


async def delete(ctx: Context, filename: str) -> Result:
    """Ask the user to confirm, then (pretend to) delete `filename`."""
    got = await ctx.ask(confirm=Elicit(f"Delete {filename}?", {"confirm": bool}))
    ok = got["confirm"].get("action") == "accept" and (got["confirm"].get("content") or {}).get("confirm")
    return Result({"deleted": bool(ok), "filename": filename}, text=f"{'Deleted' if ok else 'Kept'} {filename}.")


async def inputs(ctx: Context) -> Result:
    """Ask two questions at once; answer them in any order."""
    got = await ctx.ask(name=Elicit("Your name?", {"name": str}), confirm=Elicit("Proceed?", {"confirm": bool}))
    name = (got["name"].get("content") or {}).get("name")
    return Result({"name": name, "confirm": (got["confirm"].get("content") or {}).get("confirm")}, text=f"Thanks, {name}.")


def greet(name: str) -> Result:
    """Greet `name` at once (a plain call, never a task). The suite calls it by the bare name `greet`,
    which the kernel resolves to `hello_greet` since no other plugin has a method of that name."""
    return Result({"name": name}, text=f"Hello, {name}!")


hello = _Plugin("hello", (greet, {}))
slow = _Plugin("slow", (compute, {"task": "optional"}),
               # the same work, declared safe to run again: a task whose worker dies is re-run elsewhere
               (compute, {"task": "optional", "name": "rerun", "annotations": {"idempotentHint": True}}),
               # the same work, declared to need longer than the server's request time limit
               (compute, {"task": "optional", "name": "patient", "timeout": 30}),
               (detached, {"task": "optional", "detach": "manual"}))
failing = _Plugin("failing", (job, {"task": "required"}))
protocol = _Plugin("protocol", (error_job, {"task": "optional"}))
confirm = _Plugin("confirm", (delete, {"task": "optional"}))
multi = _Plugin("multi", (inputs, {"task": "optional", "name": "input"}))
