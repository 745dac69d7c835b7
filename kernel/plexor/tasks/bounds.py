"""What a caller's tasks may take (``docs/security.md#limits``): how many run and are kept, and how big they are."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from plexor.tasks.store import TaskRow, TaskStore

__all__ = ["check_new_task", "oversized", "release"]


class Tasks(Protocol):
    """What admission reads of :class:`plexor.tasks.runner.Tasks` (which imports this module)."""

    kernel: Any
    store: TaskStore
    started: dict[str, TaskRow]
    pending: dict[str, int]

    async def db(self, fn: Any, *args: Any, **kwargs: Any) -> Any: ...


async def check_new_task(tasks: Tasks, owner: str, arguments: dict[str, Any]) -> None:
    """Refuse a task over ``PLEXOR_MAX_TASK_ARGUMENTS_BYTES``, past ``PLEXOR_MAX_TASKS_PER_CALLER`` running in this
    process, or past ``PLEXOR_MAX_STORED_TASKS_PER_CALLER`` kept (unexpired) anywhere.

    An admitted task holds a slot in ``tasks.pending`` (taken before any await, so concurrent calls count it) until
    the caller gives it back with :func:`release` once the task is started and stored or has failed to be."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.limits import refuse, value

    environ = tasks.kernel.environ
    most = int(value("task_arguments_bytes", environ))
    size = len(json.dumps(arguments, default=str))
    if size > most:
        raise MCPError(types.INVALID_PARAMS, refuse("task_arguments_bytes", most, f"the task's arguments are {size} "
                                                    "bytes", "pass a reference (a path, a URI) instead of the data"))
    pending = tasks.pending.get(owner, 0)
    running = pending + sum(1 for row in tasks.started.values() if row.owner == owner)
    most = int(value("tasks_per_caller", environ))
    if running >= most:
        raise MCPError(types.INVALID_REQUEST, refuse("tasks_per_caller", most, f"this caller has {running} tasks "
                                                     "running", "wait for one to end, or cancel one"))
    tasks.pending[owner] = pending + 1
    most = int(value("stored_tasks_per_caller", environ))
    try:
        kept = await tasks.db(tasks.store.owned, owner, time.time())
    except BaseException:
        release(tasks, owner)
        raise
    kept += tasks.pending[owner] - 1  # the others admitted but not stored yet
    if kept >= most:
        release(tasks, owner)
        raise MCPError(types.INVALID_REQUEST, refuse("stored_tasks_per_caller", most, f"this caller has {kept} tasks "
                                                     "kept", "ask for shorter ttls, or wait for some to expire"))


def release(tasks: Tasks, owner: str) -> None:
    """Give back the slot :func:`check_new_task` took."""
    left = tasks.pending.get(owner, 0) - 1
    if left > 0:
        tasks.pending[owner] = left
    else:
        tasks.pending.pop(owner, None)


def oversized(result: dict[str, Any], environ: Mapping[str, str]) -> str | None:
    """Why ``result`` cannot be stored (over ``PLEXOR_MAX_TASK_RESULT_BYTES``), or None."""
    from plexor.limits import refuse, value

    most = int(value("task_result_bytes", environ))
    size = len(json.dumps(result, default=str))
    if size <= most:
        return None
    return refuse("task_result_bytes", most, f"the task's result is {size} bytes", "return less (page it, or write "
                  "it to a file and return its path)")
