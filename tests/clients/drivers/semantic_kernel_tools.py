"""Semantic Kernel's MCP plugin against Plexor: ``python semantic_kernel_tools.py CONFIG``.

``MCPStdioPlugin`` lists the tools and ``Kernel.add_plugin`` turns each into a kernel function
(``KernelParameterMetadata`` per property: the step that refused a type list). What a model gets is
``kernel_function_metadata_to_function_call_format`` of each function's metadata (the OpenAI-style
function every SK chat connector sends); calls go through ``Kernel.invoke``, as auto function
calling does."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from frameworks import main
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_calling_utils import kernel_function_metadata_to_function_call_format
from semantic_kernel.connectors.mcp import MCPStdioPlugin
from semantic_kernel.functions import KernelArguments


class SemanticKernel:
    library = "semantic-kernel"
    version = version("semantic-kernel")

    def __init__(self, config: dict[str, Any]) -> None:
        self.plugin = MCPStdioPlugin(name="plexor", command=config["command"], args=config["args"],
                                     env=config["env"], load_prompts=False)
        self.kernel = Kernel()

    async def __aenter__(self) -> SemanticKernel:
        await self.plugin.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.plugin.__aexit__(None, None, None)

    async def convert(self) -> tuple[dict[str, Any], dict[str, str]]:
        self.kernel.add_plugin(self.plugin)  # refuses the whole server when one tool cannot be read
        converted = {}
        for name, function in self.kernel.get_plugin("plexor").functions.items():
            converted[name] = kernel_function_metadata_to_function_call_format(function.metadata)["function"]["parameters"]
        return converted, {}

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        result = await self.kernel.invoke(plugin_name="plexor", function_name=tool, arguments=KernelArguments(**arguments))
        return [getattr(item, "text", str(item)) for item in (result.value if result is not None else [])]


if __name__ == "__main__":
    main(SemanticKernel)
