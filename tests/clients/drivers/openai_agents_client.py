"""openai-agents' MCP servers (``MCPServerStdio``, ``MCPServerStreamableHttp``) against Plexor, with no
LLM: tools come from ``MCPUtil.get_function_tools`` (what an ``Agent`` hands the model) and each call
goes through the resulting ``FunctionTool.on_invoke_tool``, the path a model's tool call takes, so what
is recorded is the tool output the model would read. ``python openai_agents_client.py CONFIG``."""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp, MCPUtil
from agents.tool_context import ToolContext
from scenario import main


class OpenAIAgents:
    library = "openai-agents"
    version = version("openai-agents")

    def __init__(self, config: dict[str, Any]) -> None:
        if config["transport"] == "stdio":
            self.server: Any = MCPServerStdio(
                {"command": config["command"], "args": config["args"], "env": config["env"]},
                name="plexor", client_session_timeout_seconds=60)
        else:
            self.server = MCPServerStreamableHttp({"url": config["url"], "timeout": 60}, name="plexor",
                                                  client_session_timeout_seconds=60)
        self.agent = Agent(name="client-matrix", mcp_servers=[self.server])
        self.context = RunContextWrapper(context=None)
        self.calls = 0

    async def __aenter__(self) -> OpenAIAgents:
        await self.server.connect()
        tools = await MCPUtil.get_function_tools(self.server, convert_schemas_to_strict=False,
                                                 run_context=self.context, agent=self.agent)
        self.tools = {t.name: t for t in tools if isinstance(t, FunctionTool)}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.cleanup()

    async def list_tools(self) -> list[str]:
        return list(self.tools)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        self.calls += 1
        text = json.dumps(arguments)
        context = ToolContext(context=None, tool_name=tool, tool_call_id=f"call-{self.calls}", tool_arguments=text)
        return await self.tools[tool].on_invoke_tool(context, text)

    async def read(self, uri: str) -> Any:
        result = await self.server.read_resource(uri)
        return [getattr(c, "text", None) for c in result.contents]


if __name__ == "__main__":
    main(OpenAIAgents)
