"""A separate server process appending to a shared tree (used by test_arbor_processes.py).

Usage: python arbor_writer.py TREE_ID PARENT_ID COUNT LABEL BARRIER_DIR
Starts a real kernel with the arbor plugin (database from the environment),
waits until every writer is ready, then appends COUNT nodes: even ones under
PARENT_ID (siblings competing for positions), odd ones after the head.
Prints a JSON summary on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio

from plexor.core.kernel import Kernel


async def main() -> None:
    tree_id, parent_id, count, label, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], Path(sys.argv[5])
    environ = dict(os.environ, PLEXOR_PLUGINS="arbor", PLEXOR_ARBOR_SWEEP_INTERVAL="0")
    kernel = Kernel(environ=environ)
    await kernel.start()
    (barrier / f"ready-{label}").touch()
    deadline = time.monotonic() + 60
    while len(list(barrier.glob("ready-*"))) < 2 and time.monotonic() < deadline:
        await anyio.sleep(0.01)
    created, errors = [], []
    for i in range(count):
        args = {"tree_id": tree_id, "content": f"{label}-{i}", "metadata": {"role": label}}
        if i % 2 == 0:
            args["parent"] = parent_id
        outcome = await kernel.call_tool("arbor_node_create_text", args)
        if outcome.is_error:
            errors.append(outcome.text)
        else:
            created.append(outcome.data["id"])
    await kernel.stop()
    print(json.dumps({"label": label, "created": created, "errors": errors}))


if __name__ == "__main__":
    anyio.run(main)
