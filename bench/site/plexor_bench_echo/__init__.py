"""Bench-only plugin (namespace ``bench``): one async echo tool, the same work as the HTTP anchor's `echo`.

The conformance fixture's `test_echo` is a plain function, which plexor runs in a worker thread by
default (so a blocking tool cannot stall the event loop); the anchor's tool is a coroutine run inline.
`bench_echo` is a coroutine too, so bench/http_load.py can compare like with like and show the thread's
cost beside it. Loaded from ``bench/site`` on ``PYTHONPATH`` (a path-based entry point), never installed.
"""

from __future__ import annotations

from plexor import hookimpl

PLEXOR_NAMESPACE = "bench"


@hookimpl
def plexor_register_tools(register, settings):
    register(echo)


async def echo(text: str) -> dict:
    """Return ``text`` unchanged.

    :param text: anything.
    """
    return {"text": text}
