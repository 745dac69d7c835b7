"""Tasks: long tool calls that a client starts, leaves, and comes back for, on any worker.

A plugin says per tool whether it may run as a task::

    register(reindex, task="optional")     # "forbidden" (the default), "optional" or "required"

and the kernel does the rest, in both protocol eras (:mod:`plexor.features.tasks.protocol`,
:mod:`plexor.features.tasks.methods`):
the task lives in the kernel's database (:mod:`plexor.features.state`), so any worker, a
restarted server or the daemon answers ``tasks/get`` for it; the tool's
progress becomes the task's status message; ``ctx.ask`` inside a task puts it in
``input_required`` until the client answers. A task whose worker dies is marked
failed with advice, or run again when the tool is marked idempotent
(``annotations={"idempotentHint": True}``); expired tasks are deleted. A
2026-07-28 ``subscriptions/listen`` stream that asks for ``taskIds`` hears their
status changes (:mod:`plexor.features.tasks.listen`). See ``docs/tasks.md``.
"""

from __future__ import annotations

# The package imports none of its modules (and re-exports nothing): importing one of them, the runner say,
# does not load the protocol module and with it the MCP SDK.
__all__ = ["TASK_SUPPORT"]

TASK_SUPPORT = ("forbidden", "optional", "required")
