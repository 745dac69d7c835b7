"""autogen-ext's MCP tools against Plexor: ``python autogen_tools.py CONFIG`` (mcp 1.x, as autogen-ext pins).

``mcp_server_tools(StdioServerParams(...))`` lists the tools and wraps each in a
``StdioMcpToolAdapter``, whose argument model is built from the input schema
(``autogen_core.utils.schema_to_pydantic_model``: the step that refused a type list); a model gets
``adapter.schema``, made from that argument model. Calls go through ``run_json``, as an
``AssistantAgent`` runs a tool call: each call starts its own stdio session (a short one)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from autogen_core import CancellationToken
from autogen_ext.tools.mcp import StdioServerParams, mcp_server_tools
from frameworks import main


class Autogen:
    library = "autogen-ext"
    version = version("autogen-ext")

    def __init__(self, config: dict[str, Any]) -> None:
        self.params = StdioServerParams(command=config["command"], args=config["args"], env=config["env"],
                                        read_timeout_seconds=60)
        self.tools: dict[str, Any] = {}

    async def __aenter__(self) -> Autogen:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        self.tools = {t.name: t for t in await mcp_server_tools(self.params)}  # refuses all when one fails
        return {name: dict(tool.schema.get("parameters", {})) for name, tool in self.tools.items()}, {}

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        result = await self.tools[tool].run_json(arguments, CancellationToken())
        return self.tools[tool].return_value_as_string(result)


if __name__ == "__main__":
    main(Autogen)
