"""smolagents (through mcpadapt) against Plexor: ``python smolagents_tools.py CONFIG`` (mcp 1.x, as
smolagents pins).

``ToolCollection.from_mcp`` lists the tools (mcpadapt turns each into a ``smolagents.Tool`` whose
``inputs`` are the schema's properties); a ``ToolCallingAgent`` sends the model
``get_tool_json_schema(tool)``, where an input is required unless it says ``"nullable": true``. A
model's tool call is checked with ``validate_tool_arguments`` and run as ``tool(**arguments)``, as
the agent does."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from importlib.metadata import version
from typing import Any

from frameworks import main
from mcp import StdioServerParameters
from smolagents import ToolCollection
from smolagents.models import get_tool_json_schema
from smolagents.tools import validate_tool_arguments


class Smolagents:
    library = "smolagents"
    version = version("smolagents")

    def __init__(self, config: dict[str, Any]) -> None:
        self.params = StdioServerParameters(command=config["command"], args=config["args"], env=config["env"])
        self.stack = ExitStack()

    async def __aenter__(self) -> Smolagents:
        collection = await asyncio.to_thread(
            self.stack.enter_context, ToolCollection.from_mcp(self.params, trust_remote_code=True, structured_output=False))
        self.tools = {t.name: t for t in collection.tools}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stack.close)

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        return {name: get_tool_json_schema(tool)["function"]["parameters"] for name, tool in self.tools.items()}, {}

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        validate_tool_arguments(self.tools[tool], arguments)
        return await asyncio.to_thread(self.tools[tool], **arguments)


if __name__ == "__main__":
    main(Smolagents)
