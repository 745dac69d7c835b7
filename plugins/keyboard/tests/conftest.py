"""Shared helpers: a real kernel with the installed keyboard plugin, and a real MCP client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from keyboard_testlib import REFERENCE, Call


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def reference_dir() -> Path:
    """The project's reference data beside the repository; skipped where the checkout has no shared/."""
    if not (REFERENCE / "kvk.json").is_file() or not (REFERENCE / "fkeys.json").is_file():
        pytest.skip(f"reference data not found at {REFERENCE} (the repository's sibling shared/ is absent)")
    return REFERENCE


@pytest.fixture
async def kb(plexor: Any) -> Any:
    async with plexor.client(installed=["keyboard"]) as client:
        yield Call(client)
