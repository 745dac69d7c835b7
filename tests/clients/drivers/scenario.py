"""The scenario every Python client driver runs, with the standard library only (each driver runs in
its client's own venv, which has neither Plexor nor pytest).

A driver is ``python <driver>.py CONFIG.json``. The config (written by ``tests/clients/test_clients.py``)
says how to reach Plexor and what to do:

    {"transport": "stdio" | "http",
     "command": "/path/python", "args": ["-m", "plexor", "serve"], "env": {...},   # stdio
     "url": "http://127.0.0.1:PORT/mcp",                                           # http
     "calls": [{"tool": "example_greet", "arguments": {...}, "until": "Hello"}, ...],
     "failing": {"tool": "keyboard_lookup_keycode", "arguments": {"key_name": "nosuchkey"}},
     "resources": ["example://about"],
     "out": "/path/result.json"}

The driver writes to ``out`` what the library showed at each step, as text (``seen``): the value the
library returned, or the exception it raised. ``until``: the call is repeated (for up to
``UNTIL_SECONDS``) until ``seen`` holds that text, e.g. while folder-search finishes its start-up scan.
Every step is recorded even when an earlier one failed; the test asserts on the record.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

UNTIL_SECONDS = 30.0


class Adapter(Protocol):
    """One client library: connect, list tools, call a tool, read a resource, as the library does it."""

    library: str
    version: str

    async def __aenter__(self) -> Adapter: ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def list_tools(self) -> list[str]: ...
    async def call(self, tool: str, arguments: dict[str, Any]) -> Any: ...
    async def read(self, uri: str) -> Any: ...


def shown(value: Any) -> str:
    """What the library handed back, as text: JSON for plain data, the model's dump for pydantic
    objects, ``str`` for the rest."""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            value = dump(mode="json")
        except Exception:
            pass
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def raised(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__qualname__}: {e}"


async def step(action: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        return {"ok": True, "seen": shown(await action())}
    except Exception as e:  # what the library raised is what its user sees
        return {"ok": False, "raised": raised(e), "seen": str(e), "trace": traceback.format_exc()[-3000:]}


async def until(action: Callable[[], Awaitable[Any]], text: str | None) -> dict[str, Any]:
    deadline = time.monotonic() + UNTIL_SECONDS
    while True:
        record = await step(action)
        if text is None or text in record["seen"] or time.monotonic() > deadline:
            return record
        await asyncio.sleep(0.5)


async def scenario(adapter: Adapter, config: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"library": adapter.library, "version": adapter.version,
                              "transport": config["transport"], "calls": {}, "resources": {}}
    started = time.monotonic()
    try:
        async with adapter:
            listed = await step(adapter.list_tools)
            record["tools"] = json.loads(listed["seen"]) if listed["ok"] else None
            record["list_tools"] = listed
            for c in config["calls"]:
                record["calls"][c["tool"]] = await until(
                    lambda c=c: adapter.call(c["tool"], c["arguments"]), c.get("until"))
            failing = config["failing"]
            record["failing"] = await step(lambda: adapter.call(failing["tool"], failing["arguments"]))
            for uri in config["resources"]:
                record["resources"][uri] = await step(lambda uri=uri: adapter.read(uri))
    except Exception as e:
        record["connect"] = {"ok": False, "raised": raised(e), "trace": traceback.format_exc()[-3000:]}
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


def main(make: Callable[[dict[str, Any]], Adapter]) -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    record = asyncio.run(scenario(make(config), config))
    with open(config["out"], "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=1)
