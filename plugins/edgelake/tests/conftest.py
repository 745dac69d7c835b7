"""Fixtures: a stand-in EdgeLake node per test, and a connected Plexor MCP client pointed at it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from standin import StandIn  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the plugin's client runs on asyncio, as the Plexor server does


@pytest.fixture
def node() -> Iterator[StandIn]:
    with StandIn() as stand_in:
        yield stand_in


@pytest.fixture
def edgelake(plexor: Any, plexor_config: Any, node: StandIn) -> Any:
    """``async with edgelake(**settings) as client`` — the edgelake plugin, talking to the stand-in."""

    @asynccontextmanager
    async def open_client(**settings: Any) -> AsyncIterator[Any]:
        table = {"nodes": [node.address], "retries": 1, "backoff": 0.01}
        table.update(settings)
        plexor_config({"edgelake": table})
        async with plexor.client(installed=["edgelake"]) as client:
            yield client

    return open_client
