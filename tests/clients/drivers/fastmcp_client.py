"""fastmcp's ``Client`` (PyPI ``fastmcp-slim[client]``) against Plexor: ``python fastmcp_client.py CONFIG``."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from scenario import main


def texts(blocks: Any) -> list[Any]:
    return [getattr(b, "text", None) or getattr(b, "resource", None) or str(b) for b in blocks]


class FastMCP:
    library = "fastmcp"
    version = version("fastmcp-slim")

    def __init__(self, config: dict[str, Any]) -> None:
        if config["transport"] == "stdio":
            transport: Any = StdioTransport(config["command"], config["args"], env=config["env"])
        else:
            transport = StreamableHttpTransport(config["url"])
        self.client = Client(transport, timeout=60)

    async def __aenter__(self) -> FastMCP:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)

    async def list_tools(self) -> list[str]:
        return [t.name for t in await self.client.list_tools()]

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        # The library's default: an isError result raises fastmcp.exceptions.ToolError.
        result = await self.client.call_tool(tool, arguments)
        return {"data": result.data, "content": texts(result.content)}

    async def read(self, uri: str) -> Any:
        return texts(await self.client.read_resource(uri))


if __name__ == "__main__":
    main(FastMCP)
