"""Shared helpers: a real kernel with the installed keyboard plugin, and a real MCP client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# <repo>/plugins/keyboard/tests/conftest.py -> <repo>/../shared/reference/keyboard
REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "keyboard"
PACKAGED = Path(__file__).resolve().parents[1] / "src" / "plexor_keyboard" / "data"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def reference_dir() -> Path:
    """The project's reference data beside the repository; skipped where the checkout has no shared/."""
    if not (REFERENCE / "kvk.json").is_file() or not (REFERENCE / "fkeys.json").is_file():
        pytest.skip(f"reference data not found at {REFERENCE} (the repository's sibling shared/ is absent)")
    return REFERENCE


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


@pytest.fixture
async def kb(plexor: Any) -> Any:
    async with plexor.client(installed=["keyboard"]) as client:
        yield Call(client)
