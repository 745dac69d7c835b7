"""The anchor: a bare `mcp` SDK low-level server with one echo tool, over stdio or HTTP.

    python bench/anchors/bare_server.py            # stdio
    python bench/anchors/bare_server.py http PORT  # Streamable HTTP (stateless) at /mcp
"""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(
        name="echo", description="Echo the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})])


async def call_tool(ctx, params):
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content={"text": text})


server = Server("bare", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        import uvicorn

        app = server.streamable_http_app(stateless_http=True)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        anyio.run(stdio)
