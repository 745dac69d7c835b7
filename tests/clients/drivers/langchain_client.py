"""langchain-mcp-adapters against Plexor: ``python langchain_client.py CONFIG``.

Tools are loaded from one session (``MultiServerMCPClient.session`` + ``load_mcp_tools``) and invoked
with a tool call, as an agent's tool node does, so what is recorded is the ``ToolMessage`` the model
would get."""

from __future__ import annotations

from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.resources import load_mcp_resources
from langchain_mcp_adapters.tools import load_mcp_tools
from scenario import main


class LangChain:
    library = "langchain-mcp-adapters"
    version = version("langchain-mcp-adapters")

    def __init__(self, config: dict[str, Any]) -> None:
        if config["transport"] == "stdio":
            connection: Any = {"transport": "stdio", "command": config["command"], "args": config["args"],
                               "env": config["env"]}
        else:
            connection = {"transport": "streamable_http", "url": config["url"]}
        self.client = MultiServerMCPClient({"plexor": connection})
        self.stack = AsyncExitStack()
        self.calls = 0

    async def __aenter__(self) -> LangChain:
        self.session = await self.stack.enter_async_context(self.client.session("plexor"))
        self.tools = {t.name: t for t in await load_mcp_tools(self.session, server_name="plexor")}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()

    async def list_tools(self) -> list[str]:
        return list(self.tools)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        self.calls += 1
        message = await self.tools[tool].ainvoke(
            {"type": "tool_call", "id": f"call-{self.calls}", "name": tool, "args": arguments})
        return {"status": message.status, "content": message.content}

    async def read(self, uri: str) -> Any:
        return [blob.as_string() for blob in await load_mcp_resources(self.session, uris=[uri])]


if __name__ == "__main__":
    main(LangChain)
