"""A task's call as its tool sees it: the session its progress goes to, the exchange its questions go
through (``ctx.ask``), the request the layers after ``tasks`` see, a call that may still become a task,
and a task kept in memory until anyone needs it stored.

They reach the runner (:class:`plexor.features.tasks.runner.Tasks`, which imports this module) through
the small :class:`Runner` protocol.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from plexor.asking import Elicit, ListRoots, Question, Sample
from plexor.errors import PlexorError
from plexor.exchange import Exchange, check_answer, declares, missing_capability

if TYPE_CHECKING:  # pragma: no cover
    from mcp_types import RequestParamsMeta

    from plexor.context import Context
    from plexor.features.tasks.store import TaskRow, TaskStore

__all__ = ["Detachable", "Layers", "Runner", "TaskExchange", "TaskRequest", "TaskSession", "Unstored", "layered"]

P = ParamSpec("P")
T = TypeVar("T")


class Unstored:
    """A task not stored yet, and how it ended if it did before anyone needed it stored."""

    def __init__(self, row: TaskRow) -> None:
        self.row = row
        self.storing = False
        self.stored = asyncio.Event()
        self.finished = asyncio.Event()
        self.status = "completed"
        self.message = ""
        self.result: dict[str, object] | None = None
        self.error: dict[str, object] | None = None


class Runner(Protocol):
    """What a task's session, exchange and detaching call use of the runner."""

    @property
    def store(self) -> TaskStore: ...

    @property
    def running(self) -> dict[str, asyncio.Task[None]]: ...

    @property
    def unstored(self) -> Mapping[str, Unstored]: ...

    async def materialize(self, task_id: str) -> None: ...

    async def write(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...

    def wakeup(self, task_id: str) -> asyncio.Event: ...

    def notify(self, task_id: str, *, final: bool = False) -> None: ...


class TaskSession:
    """What a task's Context sees as its session: progress becomes the task's status message."""

    def __init__(self, tasks: Runner, task_id: str) -> None:
        self._tasks = tasks
        self._task_id = task_id
        self._last = 0.0

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        now = time.monotonic()
        if now - self._last < 0.2:  # a tight loop of progress must not become a tight loop of writes
            return
        self._last = now
        shown = f"{progress:g}/{total:g}" if total else (f"{progress:g}" if progress else "")
        text = (message or "progress") + (f" ({shown})" if shown else "")
        unstored = self._tasks.unstored.get(self._task_id)
        if unstored is not None:  # a call that reports progress is a long one: it becomes a task now
            unstored.row.status_message = text
        await self._tasks.materialize(self._task_id)
        await self._tasks.write(self._tasks.store.progress, self._task_id, text)

    async def send_log_message(self, *args: object, **kwargs: object) -> None:
        return None  # the protocol carries no log messages for tasks; ctx.log still logs locally


class TaskExchange(Exchange):
    """``ctx.ask`` inside a task: questions wait in the task (``input_required``) for the client's answers."""

    def __init__(self, tasks: Runner, row: TaskRow) -> None:
        super().__init__(modern=True, capabilities=row.capabilities)
        self._tasks = tasks
        self.task_id = row.task_id
        self.answers = dict(row.input_responses)  # answered before (a re-run after a worker died)

    def can_ask(self, what: str) -> bool:
        return declares(self.capabilities, what)

    async def ask(self, questions: Mapping[str, Question]) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        pending: dict[str, Question] = {}
        for key, question in questions.items():
            if not isinstance(question, (Elicit, Sample, ListRoots)):
                raise PlexorError(f"ctx.ask({key}=...) got {type(question).__name__}", "Pass Elicit(...), Sample(...) or ListRoots().")
            if key in self.answers:
                out[key] = check_answer(key, question, self.answers[key])
            else:
                pending[key] = question
        if not pending:
            return out
        for key, question in pending.items():
            if not declares(self.capabilities, question.capability):
                raise missing_capability(key, question.method)
        answers = await self._wait(pending)
        for key, question in pending.items():
            out[key] = self.answers[key] = check_answer(key, question, answers[key])
        tasks = self._tasks
        await tasks.write(tasks.store.resume, self.task_id)
        tasks.notify(self.task_id)
        return out

    async def _wait(self, pending: dict[str, Question]) -> dict[str, object]:
        """Put the questions in the task (``input_required``) and wait for every answer."""
        tasks = self._tasks
        await tasks.materialize(self.task_id)
        wake = tasks.wakeup(self.task_id)
        message = "waiting for the client to answer: " + ", ".join(pending)
        await tasks.write(tasks.store.ask, self.task_id, {k: q.wire() for k, q in pending.items()}, message)
        tasks.notify(self.task_id)
        while True:
            answers = await tasks.write(tasks.store.answers, self.task_id)
            if all(key in answers for key in pending):
                return answers
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), 0.25)  # another worker may take the answer: poll too
            except TimeoutError:
                pass


@dataclasses.dataclass
class TaskRequest:
    """A task's run as the request layers see a ``tools/call`` (the fields of the SDK's request context they read)."""

    params: dict[str, object]
    request_id: str
    session: TaskSession
    protocol_version: str
    method: str = "tools/call"
    meta: RequestParamsMeta | None = None
    request: None = None  # no HTTP request behind a task's run


#: A request layer as a task's run crosses it: ``async (request, call_next) -> result``.
TaskLayer = Callable[[TaskRequest, Callable[[TaskRequest], Awaitable[object]]], Awaitable[object]]


class Layers(Protocol):
    """The server's request path (:class:`plexor.serving.layers.RequestPath`), as a task's run crosses it."""

    def between(self, first: str, last: str) -> Sequence[TaskLayer]: ...


def layered(layer: TaskLayer, inner: Callable[[TaskRequest], Awaitable[object]]) -> Callable[[TaskRequest], Awaitable[object]]:
    """``inner`` behind ``layer``."""

    async def call(ctx: TaskRequest) -> object:
        return await layer(ctx, inner)

    return call


class Detachable:
    """A call of a ``detach="manual"`` tool that may still become a task (see :meth:`plexor.Context.detach`)."""

    def __init__(self, tasks: Runner, create: Callable[[], Awaitable[TaskRow]]) -> None:
        self.tasks = tasks
        self.create = create  # stores the task (not started: the call goes on running)
        self.row: TaskRow | None = None
        self.detached = asyncio.Event()

    @property
    def became_task(self) -> bool:
        return self.row is not None

    async def __call__(self, ctx: Context, message: str | None = None) -> bool:
        """:meth:`plexor.Context.detach` (set as ``plexor.context.DETACHER`` around the call): store the
        task, switch ``ctx`` to it, and let the request answer."""
        if self.row is not None:
            return False
        row = await self.create()
        if message:
            await self.tasks.write(self.tasks.store.progress, row.task_id, message)
        exchange = TaskExchange(self.tasks, row)
        exchange.answers.update(ctx.exchange.answers)  # answered before detaching
        exchange.state = dict(ctx.exchange.state)
        ctx.continue_in(TaskSession(self.tasks, row.task_id), exchange)
        self.row = row
        current = asyncio.current_task()
        if current is not None:
            self.tasks.running[row.task_id] = current  # tasks/cancel stops it
        self.detached.set()
        return True
