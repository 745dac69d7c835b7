"""Short sessions of the mcp 1.x ``ClientSession`` against Plexor: ``python mcp1_sessions.py CONFIG``.

What an mcp<2 framework (smolagents, autogen-ext, camel-ai) does for each task: start the server over
stdio, initialize, list the tools, call one, close. Config: ``{"command", "args", "env", "sessions": N,
"call": {"tool", "arguments"}, "out"}``. Every session's outcome is recorded: an exception raised
anywhere, the closing included (mcp 1.x raises ``BrokenResourceError`` in an ``ExceptionGroup`` when
a notification arrives while it closes), fails it.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from importlib.metadata import version
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def one(config: dict[str, Any], notices: list[str]) -> dict[str, Any]:
    params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])

    async def heard(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        notices.append(str(method or type(message).__name__))

    outcome: dict[str, Any] = {"ok": False}
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write, message_handler=heard) as session:
            await session.initialize()
            outcome["tools"] = len((await session.list_tools()).tools)
            result = await session.call_tool(config["call"]["tool"], config["call"]["arguments"])
            outcome["called"] = not result.isError
        outcome["ok"] = True
    except BaseException as e:  # noqa: BLE001 - an ExceptionGroup too: what the application would see
        outcome["raised"] = f"{type(e).__name__}: {e}"
        outcome["trace"] = "".join(traceback.format_exception(e))[-2000:]
    return outcome


async def run(config: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"library": "mcp", "version": version("mcp"), "sessions": []}
    started = time.monotonic()
    for _ in range(config["sessions"]):
        notices: list[str] = []
        outcome = await one(config, notices)
        outcome["notifications"] = notices
        record["sessions"].append(outcome)
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    record = anyio.run(run, config)
    with open(config["out"], "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
