"""Helpers for the keyboard tests (a module name of its own, so suites never shadow each other)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# <repo>/plugins/keyboard/tests/keyboard_testlib.py -> <repo>/../shared/reference/keyboard
REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "keyboard"


def packaged_json(name: str) -> Any:
    """The copy shipped inside the installed package (what the wheel contains)."""
    from importlib import resources

    return json.loads(resources.files("plexor_keyboard").joinpath("data").joinpath(name).read_text("utf-8"))


class Call:
    """Calls tools through the MCP client and returns (structuredContent, text, isError)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, result.content[0].text
        assert result.structured_content is not None
        # the text item carries the same JSON (plus any guidance lines)
        assert result.content[0].text.startswith("{")
        return result.structured_content

    async def error(self, tool: str, **arguments: Any) -> tuple[dict[str, Any], str]:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error, f"expected an error, got {result.structured_content}"
        return result.structured_content["error"], result.content[0].text

    async def raw(self, tool: str, **arguments: Any) -> Any:
        return await self.client.call_tool(tool, arguments)
