"""The anthropic SDK's MCP helpers against Plexor: ``python anthropic_tools.py CONFIG``.

Each tool's schema goes through ``anthropic.transform_schema`` (what the SDK sends for a strict
tool: unsupported keywords move into the description), and calls go through
``anthropic.lib.tools.mcp.async_mcp_tool(...).call``, as the SDK's tool runner does."""

from __future__ import annotations

from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anthropic
from anthropic.lib.tools.mcp import async_mcp_tool
from frameworks import main, refusal
from mcp import ClientSession, StdioServerParameters, stdio_client


class Anthropic:
    library = "anthropic"
    version = version("anthropic")

    def __init__(self, config: dict[str, Any]) -> None:
        self.params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])
        self.stack = AsyncExitStack()

    async def __aenter__(self) -> Anthropic:
        read, write = await self.stack.enter_async_context(stdio_client(self.params))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self.tools = {t.name: t for t in (await self.session.list_tools()).tools}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        converted, refused = {}, {}
        for name, tool in self.tools.items():
            try:
                converted[name] = anthropic.transform_schema(tool.input_schema)
            except Exception as e:  # noqa: BLE001 - the converter's refusal is the finding
                refused[name] = refusal(e)
        return converted, refused

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return await async_mcp_tool(self.tools[tool], self.session).call(arguments)


if __name__ == "__main__":
    main(Anthropic)
