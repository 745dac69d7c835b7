"""Running tasks in this process: creating them, leases, questions, cancellation, reaping and expiry.

One :class:`Tasks` per kernel and process (:func:`tasks_of`). It writes every
state change to the kernel's database first, so that any other process can
answer for the task; in-process it keeps only what cannot be shared (the
running coroutine, a wake-up for answers, the session to notify).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from pydantic import BaseModel

from plexor.core.results import Outcome
from plexor.features.tasks.bounds import check_new_task, over_budget, oversized, release, run_limit
from plexor.features.tasks.results import WORKER_DIED, tool_error
from plexor.features.tasks.session import Layers, TaskExchange, TaskRequest, TaskSession, Unstored, layered
from plexor.features.tasks.store import TaskRow, TaskStore
from plexor.limits import overran

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.session import ServerSession

    from plexor.core.base import KernelBase
    from plexor.core.kernel import Kernel

__all__ = ["DEFAULT_TTL_MS", "LEASE_SECONDS", "MAX_TTL_MS", "POLL_MS", "Tasks", "tasks_of"]

DEFAULT_TTL_MS = 3_600_000  # an hour: long enough to come back for a result
MAX_TTL_MS = 86_400_000
POLL_MS = 500
LEASE_SECONDS = 10.0  # a worker silent this long is presumed dead
HEARTBEAT_SECONDS = 2.0
SWEEP_SECONDS = 60.0
MAX_ATTEMPTS = 3  # an idempotent task is run at most this many times

P = ParamSpec("P")
T = TypeVar("T")
#: Tells a 2025-11-25 session that created a task of its new status (set by the protocol layer).
Notifier = Callable[["ServerSession", TaskRow], Awaitable[None]]


class Tasks:
    """This process's side of the kernel's tasks."""

    def __init__(self, kernel: Kernel) -> None:
        from plexor.features.state import kernel_state

        self.kernel = kernel
        self.store = TaskStore(kernel_state(kernel))
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self.running: dict[str, asyncio.Task[None]] = {}
        self.started: dict[str, TaskRow] = {}  # the rows of the tasks running here (owner, expiry)
        self.pending: dict[str, int] = {}  # owner -> tasks admitted but not started yet (tasks.bounds)
        self._wake: dict[str, asyncio.Event] = {}
        self._ended: dict[str, asyncio.Event] = {}
        self.unstored: dict[str, Unstored] = {}  # tasks whose call may still be answered directly
        self._inline = False  # the event loop's SQLite connection is set not to wait for locks
        self._sessions: dict[str, ServerSession] = {}  # task id -> the 2025-11-25 session that created it (for status)
        self._loop_task: asyncio.Task[None] | None = None
        self._last_sweep = 0.0
        self.notifier: Notifier | None = None
        # The server's request path (plexor.serving.layers.RequestPath), set by the protocol layer: a task's
        # run crosses the layers after `tasks` that a plain call crosses (plugins' observers).
        self.path: Layers | None = None

    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A store call in a worker thread: SQLite may wait for another process's write lock."""
        import anyio

        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    async def write(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A short store write: on SQLite done here when the file is free (a thread hop costs more than
        the write), in a worker thread when another process holds the lock (it may wait there)."""
        if self.store.state.dialect == "sqlite":
            import peewee

            if not self._inline:
                self.store.state.execute("PRAGMA busy_timeout = 0")  # this thread's connection never waits
                self._inline = True
            try:
                return fn(*args, **kwargs)
            except peewee.OperationalError as exc:  # locked by another process: each write is atomic, so retry
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
        return await self.db(fn, *args, **kwargs)

    async def read(self, task_id: str) -> TaskRow | None:
        """A task as stored; on SQLite read here (WAL readers never wait), elsewhere in a worker thread."""
        if self.store.state.dialect == "sqlite":
            return self.store.get(task_id)
        return await self.db(self.store.get, task_id)

    def ended(self, task_id: str) -> asyncio.Event | None:
        """Set when a task running here ends (None when it does not run here)."""
        if task_id not in self.running:
            return None
        event = self._ended.get(task_id)
        if event is None:
            event = self._ended[task_id] = asyncio.Event()
        return event

    # -- creating and running ------------------------------------------------------------
    async def create(self, *, tool: str, arguments: dict[str, object], era: str, owner: str,
                     capabilities: dict[str, object], ttl_ms: int | None, idempotent: bool,
                     session: ServerSession | None = None, start: bool = True,
                     store: bool = True) -> TaskRow:
        """Store a new task (durably: a ``tasks/get`` anywhere finds it once this returns) and start it here
        (unless ``start`` is false: a detaching call runs on as it is). With ``store`` false it is kept in
        memory until :meth:`materialize` (a call that ends at once is answered without ever storing it)."""
        self.ensure_loop()
        await check_new_task(self, owner, arguments)
        try:
            now = time.time()
            ttl = DEFAULT_TTL_MS if ttl_ms is None else max(1_000, min(int(ttl_ms), MAX_TTL_MS))
            row = TaskRow(
                task_id=secrets.token_urlsafe(18), owner=owner, era=era, tool=tool, arguments=arguments,
                capabilities=capabilities, status="working", status_message="the task has started",
                created_at=now, updated_at=now, ttl_ms=ttl, expires_at=now + ttl / 1000, poll_ms=POLL_MS,
                result=None, error=None, input_requests={}, input_responses={}, worker=self.worker, host=self.host,
                pid=self.pid, lease_until=now + LEASE_SECONDS, cancel_requested=False, idempotent=idempotent, attempts=1)
            if store:
                await self.write(self.store.create, row)
            else:
                self.unstored[row.task_id] = Unstored(row)
            if session is not None:
                self._sessions[row.task_id] = session
            if start:
                self.start(row)
        finally:
            release(self, owner)
        return row

    def start(self, row: TaskRow) -> None:
        self.started[row.task_id] = row
        self.running[row.task_id] = asyncio.get_running_loop().create_task(self._run(row), name=f"plexor-task-{row.task_id}")

    async def _run(self, row: TaskRow) -> None:
        task_id = row.task_id
        seconds, server = run_limit(self.kernel, row.tool)
        try:
            limit = asyncio.timeout(seconds)  # the run-time limit of a plain call (or its tool's own, longer)
            try:
                async with limit:
                    result, is_error = await self._call(row)
            except TimeoutError:
                if seconds is None or server is None or not limit.expired():  # the tool's own TimeoutError
                    raise
                message = overran("the task", seconds, server)
                self.kernel.log.info("task_timed_out", task=task_id, tool=row.tool, limit_seconds=seconds)
                await self._finish(task_id, "failed", message, error={
                    "code": WORKER_DIED, "message": message, "data": {"type": "timeout", "limit_seconds": seconds}})
                return
            too_big = oversized(result, self.kernel.environ)
            if too_big is None and task_id not in self.unstored:  # a call answered at once keeps nothing
                too_big = await over_budget(self, row.owner, result)
            if too_big is not None:
                await self._finish(task_id, "failed", too_big, error={"code": -32603, "message": too_big,
                                                                      "data": {"type": "result_too_large"}})
                return
            summary = "the tool reported an error" if is_error else "the task completed"
            await self._finish(task_id, "completed", summary, result=result)
        except asyncio.CancelledError:
            unstored = self.unstored.pop(task_id, None)
            if unstored is not None:
                unstored.error = {"code": WORKER_DIED, "message": "the call was cancelled"}
                unstored.finished.set()
            raise
        except BaseException as exc:  # noqa: BLE001 - a protocol-level failure becomes the task's error
            error = tool_error(exc)
            data = error.get("data")
            if isinstance(data, dict) and data.get("type") == "unexpected":
                self.kernel.log.error("task_failed", task=task_id, error=error["message"])
            await self._finish(task_id, "failed", str(error["message"]).splitlines()[0], error=error)
            if not isinstance(exc, Exception):
                raise
        finally:
            self.running.pop(task_id, None)
            self.started.pop(task_id, None)
            self._wake.pop(task_id, None)
            ended = self._ended.pop(task_id, None)
            if ended is not None:
                ended.set()
            self.notify(task_id, final=True)

    async def _call(self, row: TaskRow) -> tuple[dict[str, object], bool]:
        """Run the task's call through the request layers after ``tasks`` (the ones a plain call crosses there:
        plugins' observers; the run-time limit is ``_run``'s), then the pipeline; its wire result and error flag."""
        task_id = row.task_id

        async def pipeline(ctx: TaskRequest) -> object:
            return await self.kernel.call_tool(row.tool, row.arguments, session=ctx.session, request_id=ctx.request_id,
                                               exchange=TaskExchange(self, row))

        call: Callable[[TaskRequest], Awaitable[object]] = pipeline
        for layer in reversed(self.path.between("tasks", "timeout") if self.path is not None else []):
            call = layered(layer, call)
        answer = await call(TaskRequest({"name": row.tool, "arguments": row.arguments}, f"task:{task_id}",
                                        TaskSession(self, task_id), row.era))
        if isinstance(answer, Outcome):  # the pipeline's own answer
            return answer.wire(), bool(answer.is_error)
        wire = answer.model_dump(by_alias=True, exclude_none=True, mode="json") if isinstance(answer, BaseModel) else answer
        if not isinstance(wire, dict):
            raise TypeError(f"the request path answered a task's call with {type(wire).__name__}, not a result")
        return wire, bool(wire.get("isError"))

    async def _finish(self, task_id: str, status: str, message: str, *, result: dict[str, object] | None = None,
                      error: dict[str, object] | None = None) -> None:
        unstored = self.unstored.get(task_id)
        if unstored is not None:  # not stored (yet): its call answers, or materialize() settles it once stored
            unstored.status, unstored.message, unstored.result, unstored.error = status, message, result, error
            unstored.finished.set()
            return
        await self.write(self.store.settle, task_id, status, message, result=result, error=error)

    async def materialize(self, task_id: str) -> None:
        """Store a task kept in memory (its call is answered with the task after all, or it asks or reports)."""
        unstored = self.unstored.get(task_id)
        if unstored is None:
            return
        if unstored.storing:
            await unstored.stored.wait()
            return
        unstored.storing = True
        try:
            await self.write(self.store.create, unstored.row)
        finally:
            self.unstored.pop(task_id, None)
            unstored.stored.set()
        if unstored.finished.is_set():  # it ended while being stored
            await self.write(self.store.settle, task_id, unstored.status, unstored.message, result=unstored.result,
                          error=unstored.error)
            self.publish(task_id)

    # -- answers, cancellation, notifications ------------------------------------------------
    def wakeup(self, task_id: str) -> asyncio.Event:
        event = self._wake.get(task_id)
        if event is None:
            event = self._wake[task_id] = asyncio.Event()
        return event

    def answered(self, task_id: str) -> None:
        event = self._wake.get(task_id)
        if event is not None:
            event.set()

    async def cancel(self, task_id: str) -> bool:
        """Cancel a task; stops it at once when it runs here (elsewhere, its worker sees it on its next beat)."""
        done = await self.write(self.store.cancel, task_id, "cancelled by the client")
        running = self.running.get(task_id)
        if running is not None:
            running.cancel()
        if done:
            self.publish(task_id)
        return bool(done)

    def notify(self, task_id: str, *, final: bool = False) -> None:
        """A task's status changed: tell listen streams anywhere (2026-07-28) and its 2025-11-25 session."""
        self.publish(task_id)
        session = self._sessions.get(task_id)
        if final:
            self._sessions.pop(task_id, None)
        if session is None or self.notifier is None:
            return
        asyncio.get_running_loop().create_task(self._notify(session, task_id))

    def publish(self, task_id: str) -> None:
        """Publish ``tasks/status`` through the kernel's notifier (it crosses processes; plexor.features.tasks.listen
        delivers it). A task still kept in memory has no listeners (its id is not out yet)."""
        unstored = self.unstored.get(task_id)
        if unstored is not None and not unstored.storing:
            return
        try:
            self.kernel.notifier.publish("tasks/status", {"taskId": task_id})
        except Exception as exc:  # noqa: BLE001 - a notification must never fail the task; clients may poll
            self.kernel.log.debug("task_status_not_published", task=task_id, error=str(exc))

    async def _notify(self, session: ServerSession, task_id: str) -> None:
        try:
            row = await self.db(self.store.get, task_id)
            if row is not None and self.notifier is not None:
                await self.notifier(session, row)
        except Exception:  # noqa: BLE001 - a gone client
            self.kernel.log.debug("task_status_not_sent", task=task_id, exc_info=True)

    # -- the beat: leases, cancellations from elsewhere, dead workers, expiry ------------------------
    def ensure_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._beat(), name="plexor-tasks-beat")

    async def _beat(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception as exc:  # noqa: BLE001 - the database may be briefly unavailable: try again next beat
                self.kernel.log.warning("tasks_beat_failed", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def tick(self) -> None:
        """One beat: renew leases, stop tasks cancelled elsewhere, settle dead workers' tasks, drop expired ones."""
        for task_id in await self.db(self.store.renew, self.worker, LEASE_SECONDS):
            running = self.running.get(task_id)
            if running is not None:
                running.cancel()
        await self.reap()
        now = time.time()
        for task_id, row in list(self.started.items()):
            if row.expires_at is not None and row.expires_at < now and task_id in self.running:  # nobody can fetch it
                self.kernel.log.info("task_expired_running", task=task_id, tool=row.tool)
                self.running[task_id].cancel()
        if now - self._last_sweep >= SWEEP_SECONDS:
            self._last_sweep = now
            swept = await self.db(self.store.sweep, now)
            if swept:
                self.kernel.log.info("tasks_expired", deleted=swept)

    async def reap(self, only: str | None = None) -> None:
        """Settle the tasks of workers that died: run an idempotent tool again here, fail the rest with guidance."""
        for row in await self.db(self.store.stale, self.host, time.time()):
            if only is not None and row.task_id != only:
                continue
            if row.worker == self.worker:
                continue
            spec = self.kernel.registry.tools.get(row.tool)
            if row.idempotent and row.attempts < MAX_ATTEMPTS and spec is not None:
                if await self.db(self.store.claim, row, self.worker, self.pid, self.host, LEASE_SECONDS):
                    self.kernel.log.warning("task_restarted", task=row.task_id, tool=row.tool, dead_worker=row.worker)
                    fresh = await self.db(self.store.get, row.task_id)
                    if fresh is not None:
                        self.start(fresh)
                continue
            why = (f"the worker running this task ({row.host}, pid {row.pid}) stopped before it finished"
                   + (f" ({row.attempts} attempts)" if row.attempts > 1 else ""))
            advice = ("Call the tool again to start over; check the server's log for why the worker stopped. "
                      "Plexor re-runs a task by itself only for tools marked idempotent (idempotentHint).")
            error = {"code": WORKER_DIED, "message": f"{why}. {advice}",
                     "data": {"type": "worker_died", "host": row.host, "pid": row.pid, "guidance": advice}}
            if await self.db(self.store.settle, row.task_id, "failed", f"{why}. {advice}", error=error, worker=row.worker):
                self.kernel.log.warning("task_worker_died", task=row.task_id, tool=row.tool, dead_worker=row.worker)
                self.publish(row.task_id)

    async def close(self) -> None:
        """Stop the beat; tasks still running here are settled for others (re-run if idempotent, else failed)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
        for task_id, running in list(self.running.items()):
            running.cancel()
            row = await self.db(self.store.get, task_id)
            if row is None or row.terminal:
                continue
            if row.idempotent and row.attempts < MAX_ATTEMPTS:
                await self.db(self.store.state.execute, "UPDATE plexor_tasks SET lease_until = 0 WHERE task_id = ?",
                              (task_id,))
                continue
            advice = "The server stopped (a restart or a drain) while the task ran; call the tool again."
            await self.db(self.store.settle, task_id, "failed", advice,
                          error={"code": WORKER_DIED, "message": advice, "data": {"type": "server_stopped"}})
            self.publish(task_id)


def tasks_of(kernel: Kernel) -> Tasks:
    """The kernel's :class:`Tasks` in this process (made, and its table migrated, on first use)."""
    return kernel.keep(Tasks, lambda: Tasks(kernel))


def running_tasks(kernel: KernelBase) -> Tasks | None:
    """The kernel's :class:`Tasks` in this process if tasks were used here, else ``None`` (nothing to settle)."""
    return kernel.kept(Tasks)
