"""Test-only plugin for ``plexor connect`` losing its daemon in the middle of a call (tests/test_daemon.py).

Each tool appends ``text`` as a line to the file ``path`` (the side effect a test counts), then sleeps
``seconds``. They differ only in what they declare: ``append`` nothing (not safe to run twice), ``peek``
``readOnlyHint`` and ``touch`` ``idempotentHint`` (safe, so the relay may run them again); ``job``, declaring
nothing, may be called as a task.
"""

from __future__ import annotations

import anyio

from plexor import hookimpl

PLEXOR_NAMESPACE = "relayed"


@hookimpl
def plexor_register_tools(register):
    register(append)
    register(append, name="peek", annotations={"readOnlyHint": True})
    register(append, name="touch", annotations={"idempotentHint": True})
    # a call with a task parameter that runs as a plain request until it ends (it never detaches)
    register(append, name="job", task="optional", detach="manual")


async def append(path: str, text: str = "run", seconds: float = 0.0) -> dict:
    """Append ``text`` as a line to the file ``path``, then sleep ``seconds``.

    :param path: the file to append to.
    :param text: the line.
    :param seconds: how long to sleep afterwards.
    """
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    await anyio.sleep(seconds)
    return {"text": text, "slept": seconds}
