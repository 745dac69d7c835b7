"""pydantic-ai's MCP toolset (``pydantic_ai.mcp.MCPToolset``) against Plexor, driven by an agent whose
model is a ``FunctionModel`` (no LLM): ``python pydantic_ai_client.py CONFIG``.

Each call is one agent run: the stub model asks for the tool call, then answers with exactly what it
was handed back (the tool's return, or the retry prompt pydantic-ai makes of an ``isError`` result),
so what is recorded is what a real model would read."""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scenario import main


class PydanticAI:
    library = "pydantic-ai"
    version = version("pydantic-ai-slim")

    def __init__(self, config: dict[str, Any]) -> None:
        if config["transport"] == "stdio":
            target: Any = StdioTransport(config["command"], config["args"], env=config["env"])
        else:
            target = config["url"]
        # init_timeout: the default 5 s is not always enough over stdio, where Plexor answers
        # server/discover only once its plugins have started (docs/clients.md).
        self.toolset: MCPToolset[None] = MCPToolset(target, init_timeout=30, read_timeout=60)
        self.agent = Agent(FunctionModel(self._model), toolsets=[self.toolset])
        self.plan: tuple[str, dict[str, Any]] | None = None

    async def _model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self.plan is None:  # listing: tell what tools the model was given
            return ModelResponse(parts=[TextPart(json.dumps([t.name for t in info.function_tools]))])
        handed_back = [p for m in messages[1:] for p in getattr(m, "parts", [])
                       if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if not handed_back:
            tool, arguments = self.plan
            return ModelResponse(parts=[ToolCallPart(tool, arguments, tool_call_id="call-1")])
        part = handed_back[-1]
        if isinstance(part, RetryPromptPart):
            seen = {"retry_prompt": part.model_response()}
        else:
            seen = {"tool_return": part.model_response_str()}
        return ModelResponse(parts=[TextPart(json.dumps(seen, ensure_ascii=False))])

    async def __aenter__(self) -> PydanticAI:
        await self.agent.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.agent.__aexit__(None, None, None)

    async def list_tools(self) -> list[str]:
        self.plan = None
        return json.loads((await self.agent.run("list")).output)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        self.plan = (tool, arguments)
        return json.loads((await self.agent.run(f"call {tool}")).output)

    async def read(self, uri: str) -> Any:
        return await self.toolset.read_resource(uri)


if __name__ == "__main__":
    main(PydanticAI)
