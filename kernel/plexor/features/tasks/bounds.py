"""What a caller's tasks may take (``docs/security.md#limits``): how many run and are kept, and how big they are."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from plexor.limits import run_time  # stdlib only; imported once, not on every call (run_limit runs per request)

if TYPE_CHECKING:  # pragma: no cover
    from plexor.core.kernel import Kernel
    from plexor.features.tasks.store import TaskRow, TaskStore

__all__ = ["check_new_task", "limit_runs", "over_budget", "oversized", "release", "run_limit", "stored_size"]

P = ParamSpec("P")
T = TypeVar("T")


class RunLimit:
    """The run-time limit of a kernel's plain calls (``kernel.keep(RunLimit, ...)``), set by the transport that has
    one (--request-timeout over HTTP; stdio has none). A task obeys the same, unless its tool declares longer."""

    def __init__(self) -> None:
        self.seconds: float | None = None


def limit_runs(kernel: Kernel, seconds: float) -> None:
    """Calls of ``kernel`` may run ``seconds`` (its tools may declare longer); its tasks then obey the same."""
    kernel.keep(RunLimit, RunLimit).seconds = seconds


def run_limit(kernel: Kernel, tool: object, server: float | None = None) -> tuple[float | None, float | None]:
    """(how long a call or task of ``tool`` may run, the server's limit): None when the server has no limit."""
    if server is None:
        kept = kernel.kept(RunLimit)
        server = kept.seconds if kept is not None else None
    spec = kernel.find_tool(tool) if isinstance(tool, str) else None
    return run_time(server, getattr(spec, "timeout", None)), server


class Tasks(Protocol):
    """What admission reads of :class:`plexor.features.tasks.runner.Tasks` (which imports this module)."""

    @property
    def kernel(self) -> Kernel: ...

    @property
    def store(self) -> TaskStore: ...

    @property
    def started(self) -> dict[str, TaskRow]: ...

    @property
    def pending(self) -> dict[str, int]: ...

    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...


async def check_new_task(tasks: Tasks, owner: str, arguments: Mapping[str, object]) -> None:
    """Refuse a task over ``PLEXOR_MAX_TASK_ARGUMENTS_BYTES``, past ``PLEXOR_MAX_TASKS_PER_CALLER`` running in this
    process, or past ``PLEXOR_MAX_STORED_TASKS_PER_CALLER`` kept (unexpired) anywhere.

    An admitted task holds a slot in ``tasks.pending`` (taken before any await, so concurrent calls count it) until
    the caller gives it back with :func:`release` once the task is started and stored or has failed to be."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.limits import refuse, value

    environ = tasks.kernel.environ
    most = int(value("task_arguments_bytes", environ))
    size = stored_size(arguments)
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
        kept, kept_bytes = await tasks.db(tasks.store.usage, owner, time.time())
    except BaseException:
        release(tasks, owner)
        raise
    kept += tasks.pending[owner] - 1  # the others admitted but not stored yet
    if kept >= most:
        release(tasks, owner)
        raise MCPError(types.INVALID_REQUEST, refuse("stored_tasks_per_caller", most, f"this caller has {kept} tasks "
                                                     "kept", "ask for shorter ttls, or wait for some to expire"))
    budget = int(value("stored_task_bytes_per_caller", environ))
    if kept_bytes + size > budget:
        release(tasks, owner)
        raise MCPError(types.INVALID_REQUEST, refuse(
            "stored_task_bytes_per_caller", budget, f"this caller's tasks kept would hold {kept_bytes + size} bytes",
            "fetch and let finished tasks expire (shorter ttls), or pass smaller arguments"))


def release(tasks: Tasks, owner: str) -> None:
    """Give back the slot :func:`check_new_task` took."""
    left = tasks.pending.get(owner, 0) - 1
    if left > 0:
        tasks.pending[owner] = left
    else:
        tasks.pending.pop(owner, None)


def stored_size(value: object) -> int:
    """The bytes ``value`` takes stored (UTF-8 JSON, as ``plexor.features.tasks.store`` writes it)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def oversized(result: Mapping[str, object], environ: Mapping[str, str]) -> str | None:
    """Why ``result`` cannot be stored (over ``PLEXOR_MAX_TASK_RESULT_BYTES``), or None."""
    from plexor.limits import refuse, value

    most = int(value("task_result_bytes", environ))
    size = stored_size(result)
    if size <= most:
        return None
    return refuse("task_result_bytes", most, f"the task's result is {size} bytes", "return less (page it, or write "
                  "it to a file and return its path)")


async def over_budget(tasks: Tasks, owner: str, result: Mapping[str, object]) -> str | None:
    """Why ``result`` cannot be kept: the caller's tasks would pass ``PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER``."""
    from plexor.limits import refuse, value

    budget = int(value("stored_task_bytes_per_caller", tasks.kernel.environ))
    size = stored_size(result)
    _count, kept = await tasks.db(tasks.store.usage, owner, time.time())
    if kept + size <= budget:
        return None
    return refuse("stored_task_bytes_per_caller", budget, f"with this result of {size} bytes, this caller's tasks kept "
                  f"would hold {kept + size} bytes", "fetch and let finished tasks expire (shorter ttls), or return less")
