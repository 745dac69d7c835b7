"""The scenario every agent-framework driver runs (standard library only, like ``scenario.py``).

An agent framework turns each MCP tool into a tool of its own, and the model sees that tool's
schema, not Plexor's: a driver does what the framework does when an application hands it Plexor,
offline (no model, no network). It lists the tools through the framework, writes down the schema
each one became (as JSON Schema, however the framework holds it: ``converted``) or why the
framework refused it (``refused``), then calls tools through the framework's own call path.

Config (written by ``tests/clients/test_frameworks.py``)::

    {"command": "/path/python", "args": ["-m", "plexor", "serve"], "env": {...},
     "calls": [{"label": "example_greet/required", "tool": "example_greet", "arguments": {...}}, ...],
     "out": "/path/result.json"}

The test compares ``converted`` with the schemas Plexor serves (the loss report) and asserts on
the calls.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from scenario import raised, shown, step


class Framework(Protocol):
    """One agent framework: connect, convert every tool as it does, call one."""

    library: str
    version: str

    async def __aenter__(self) -> Framework: ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]: ...  # converted, refused
    async def call(self, tool: str, arguments: dict[str, Any]) -> Any: ...


class StdioDriver:
    """Plexor over stdio through the SDK's ``ClientSession``, its tools listed: the frameworks that take an
    open session (anthropic, ollama, dspy) subclass this and add ``convert`` and ``call``."""

    def __init__(self, config: dict[str, Any]) -> None:
        from contextlib import AsyncExitStack

        from mcp import StdioServerParameters

        self.params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])
        self.stack = AsyncExitStack()

    async def __aenter__(self) -> Any:
        from mcp import ClientSession, stdio_client

        read, write = await self.stack.enter_async_context(stdio_client(self.params))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self.listed = (await self.session.list_tools()).tools
        self.tools = {t.name: t for t in self.listed}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()


def refusal(e: BaseException) -> str:
    return raised(e)[:500]


async def run(framework: Framework, config: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"library": framework.library, "version": framework.version, "calls": {}}
    started = time.monotonic()
    try:
        async with framework:
            try:
                record["converted"], record["refused"] = await framework.convert()
            except Exception as e:  # the framework refused the whole server
                record["converted"], record["refused"] = {}, {"*": refusal(e)}
                record["trace"] = traceback.format_exc()[-3000:]
            for c in config["calls"]:
                record["calls"][c["label"]] = await step(
                    lambda c=c: framework.call(c["tool"], c["arguments"]))
    except Exception as e:
        record["connect"] = {"ok": False, "raised": raised(e), "trace": traceback.format_exc()[-3000:]}
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


def main(make: Callable[[dict[str, Any]], Framework]) -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    record = asyncio.run(run(make(config), config))
    with open(config["out"], "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=1, default=shown)
