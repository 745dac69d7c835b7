"""What the browser tests share: the pinned npm packages and Chromium (setup.sh), a real MCP client
over Streamable HTTP, and ``apps/test-host/drive.mjs``, which loads the test host in Chromium and runs a plan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MODULES = REPO / "apps" / "node_modules"
CHROMIUM = os.environ.get("PLEXOR_CHROMIUM", "/usr/bin/chromium")
# Where the READMEs' and docs' screenshots live; a run writes them only with PLEXOR_APPS_SHOTS=1.
SHOTS = REPO / "docs" / "images"


def need_browser() -> None:
    """Skip unless setup.sh installed what the tests drive (the ``apps`` tox env runs it first)."""
    if not (MODULES / "playwright-core").is_dir() or not Path(CHROMIUM).exists() or shutil.which("node") is None:
        pytest.skip("run bash tests/apps/setup.sh first (node, the pinned npm packages and Chromium)")


def drive(url: str, plan: dict[str, Any], shots: Path) -> dict[str, Any]:
    """Run ``plan`` in Chromium through the test host against the server at ``url``; the driver's report."""
    plan = {**plan, "shots": str(shots)}
    done = subprocess.run(["node", str(REPO / "apps" / "test-host" / "drive.mjs"), url, json.dumps(plan)], capture_output=True,
                          text=True, timeout=180, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in report, report["error"] + "\n" + done.stderr[-2000:]
    assert report["host"]["error"] is None, report["host"]["error"]
    return report


def keep_shots(shots: Path, *names: str) -> None:
    """Copy the named screenshots to docs/images when PLEXOR_APPS_SHOTS=1 (how the docs' pictures are made)."""
    if os.environ.get("PLEXOR_APPS_SHOTS") == "1":
        for name in names:
            shutil.copyfile(shots / f"{name}.png", SHOTS / f"{name}.png")


async def call(url: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call over Streamable HTTP with the SDK's client; its structured result."""
    from mcp import Client

    async with Client(url) as client:
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content
        data: dict[str, Any] = result.structured_content or {}
        return data
