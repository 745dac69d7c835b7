"""Helpers shared by the arbor tests (a uniquely named module, so it never clashes with other conftests)."""

from __future__ import annotations

import json
from typing import Any


class Calls:
    """Calls arbor tools through the MCP client and checks the outcome."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(f"arbor_{tool}", arguments)
        text = result.content[0].text
        assert not result.is_error, f"{tool} failed: {text}"
        return result.structured_content

    async def text(self, tool: str, **arguments: Any) -> str:
        result = await self.client.call_tool(f"arbor_{tool}", arguments)
        assert not result.is_error, result.content[0].text
        return result.content[0].text

    async def error(self, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
        result = await self.client.call_tool(f"arbor_{tool}", arguments)
        assert result.is_error, f"{tool} unexpectedly succeeded: {result.content[0].text}"
        return result.content[0].text, (result.structured_content or {}).get("error", {})

    async def resource(self, uri: str) -> Any:
        read = await self.client.read_resource(uri)
        assert read.contents[0].mime_type == "application/json"
        return json.loads(read.contents[0].text)
