"""DSPy's MCP tools against Plexor: ``python dspy_tools.py CONFIG``.

``dspy.Tool.from_mcp_tool(session, tool)`` turns each listed tool into a DSPy tool (its argument
types read from each property's ``type``: the step that refused a type list); a model gets
``format_as_litellm_function_call()``, where a property is required unless it has a ``default``.
Calls go through ``Tool.acall``, as ``dspy.ReAct`` runs a tool call."""

from __future__ import annotations

from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import dspy
from frameworks import main, refusal
from mcp import ClientSession, StdioServerParameters, stdio_client


class DSPy:
    library = "dspy"
    version = version("dspy")

    def __init__(self, config: dict[str, Any]) -> None:
        self.params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])
        self.stack = AsyncExitStack()
        self.tools: dict[str, Any] = {}

    async def __aenter__(self) -> DSPy:
        read, write = await self.stack.enter_async_context(stdio_client(self.params))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self.listed = (await self.session.list_tools()).tools
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stack.aclose()

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        converted, refused = {}, {}
        for tool in self.listed:
            try:
                self.tools[tool.name] = dspy.Tool.from_mcp_tool(self.session, tool)
                converted[tool.name] = self.tools[tool.name].format_as_litellm_function_call()["function"]["parameters"]
            except Exception as e:  # noqa: BLE001 - the converter's refusal is the finding
                refused[tool.name] = refusal(e)
        return converted, refused

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return await self.tools[tool].acall(**arguments)


if __name__ == "__main__":
    main(DSPy)
