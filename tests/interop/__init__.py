"""Real-client interop: the MCP Inspector installer (setup.sh) and the helpers the interop tests share."""
