"""The anthropic SDK's MCP helpers against Plexor: ``python anthropic_tools.py CONFIG``.

Each tool's schema goes through ``anthropic.transform_schema`` (what the SDK sends for a strict
tool: unsupported keywords move into the description), and calls go through
``anthropic.lib.tools.mcp.async_mcp_tool(...).call``, as the SDK's tool runner does."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import anthropic
from anthropic.lib.tools.mcp import async_mcp_tool
from frameworks import StdioDriver, main, refusal


class Anthropic(StdioDriver):
    library = "anthropic"
    version = version("anthropic")

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
