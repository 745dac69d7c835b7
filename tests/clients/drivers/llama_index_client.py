"""llama-index-tools-mcp against Plexor: ``BasicMCPClient`` and ``McpToolSpec``'s ``FunctionTool``s, called
as an agent calls them (``acall``), so what is recorded is the ``ToolOutput`` the agent hands the model.
``python llama_index_client.py CONFIG``.

``BasicMCPClient`` opens a new session for every request: over stdio, each call starts a new Plexor."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from llama_index.tools.mcp import BasicMCPClient, McpToolSpec
from scenario import main


class LlamaIndex:
    library = "llama-index-tools-mcp"
    version = version("llama-index-tools-mcp")

    def __init__(self, config: dict[str, Any]) -> None:
        if config["transport"] == "stdio":
            self.client = BasicMCPClient(config["command"], args=config["args"], env=config["env"], timeout=60)
        else:
            self.client = BasicMCPClient(config["url"], timeout=60)

    async def __aenter__(self) -> LlamaIndex:
        tools = await McpToolSpec(client=self.client).to_tool_list_async()
        self.tools = {t.metadata.name: t for t in tools}
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def list_tools(self) -> list[str]:
        return list(self.tools)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        output = await self.tools[tool].acall(**arguments)
        return {"is_error": output.is_error, "content": output.content}

    async def read(self, uri: str) -> Any:
        result = await self.client.read_resource(uri)
        return [getattr(c, "text", None) for c in result.contents]


if __name__ == "__main__":
    main(LlamaIndex)
