"""The HTTP anchor for bench/http_load.py: a bare `mcp` low-level Server with one echo tool,
stateless Streamable HTTP on 127.0.0.1 under uvicorn (the same server stack plexor uses).

    python bench/anchors/http_anchor.py PORT [--no-schema-lookup]

It passes `get_tool_input_schema`, as plexor does: without it the SDK's 2026-07-28 entry runs the
`tools/list` handler on every `tools/call` that has arguments (to check `Mcp-Param-*` headers), which
would make the anchor slower than it needs to be. `--no-schema-lookup` drops it, to see that cost.
"""

from __future__ import annotations

import sys

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="echo", description="Echo the text back.", input_schema=SCHEMA)])


async def call_tool(ctx, params):
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content={"text": text})


def build_app(schema_lookup: bool = True):
    """The anchor's Starlette app (bench/http_profile.py drives it in-process)."""
    lookup = (lambda name: SCHEMA if name == "echo" else None) if schema_lookup else None
    server = Server("sdk-anchor", version="1", on_list_tools=list_tools, on_call_tool=call_tool,
                    get_tool_input_schema=lookup)
    return server.streamable_http_app(stateless_http=True)


def main() -> None:
    app = build_app(schema_lookup="--no-schema-lookup" not in sys.argv)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
