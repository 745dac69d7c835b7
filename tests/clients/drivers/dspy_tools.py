"""DSPy's MCP tools against Plexor: ``python dspy_tools.py CONFIG``.

``dspy.Tool.from_mcp_tool(session, tool)`` turns each listed tool into a DSPy tool (its argument
types read from each property's ``type``: the step that refused a type list); a model gets
``format_as_litellm_function_call()``, where a property is required unless it has a ``default``.
Calls go through ``Tool.acall``, as ``dspy.ReAct`` runs a tool call."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import dspy
from frameworks import StdioDriver, main, refusal


class DSPy(StdioDriver):
    library = "dspy"
    version = version("dspy")

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        converted, refused = {}, {}
        self.tools = {}  # dspy's own tools, by name, as converted
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
