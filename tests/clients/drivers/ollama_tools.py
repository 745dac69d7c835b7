"""The Ollama Python SDK's tool conversion against Plexor: ``python ollama_tools.py CONFIG``.

Ollama has no MCP client: an application lists the tools with the ``mcp`` SDK and hands each to
``ollama.chat(tools=[...])`` as an OpenAI-style function, which the SDK validates into its ``Tool``
model and serializes (``model_dump(exclude_none=True)``) before anything is sent: that dump is what
the model gets. The model's tool call then goes back through ``ClientSession.call_tool``."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from frameworks import StdioDriver, main, refusal
from ollama import Tool


class Ollama(StdioDriver):
    library = "ollama"
    version = version("ollama")

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        converted, refused = {}, {}
        for name, tool in self.tools.items():
            function = {"name": name, "description": tool.description, "parameters": tool.input_schema}
            try:
                dumped = Tool.model_validate({"type": "function", "function": function}).model_dump(exclude_none=True)
                converted[name] = dumped["function"]["parameters"]
            except Exception as e:  # noqa: BLE001 - the converter's refusal is the finding
                refused[name] = refusal(e)
        return converted, refused

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        result = await self.session.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(result.content[0].text if result.content else "isError")
        return [getattr(c, "text", None) for c in result.content]


if __name__ == "__main__":
    main(Ollama)
