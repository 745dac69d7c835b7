"""How a registered function is run: one rule, decided once at registration.

Every callable a plugin registers (tool, resource reader, template reader,
lister, prompt, completion function) becomes a :class:`Target`. Its *mode*
says how the pipeline calls it:

``async``     awaited on the event loop;
``asyncgen``  iterated on the event loop; its events (progress, logs, data,
              guidance, a final :class:`plexor.Result`) are handled here;
``thread``    a sync function that may block: run in a worker thread (cancelled, the call is
              answered at once; the thread, which nothing interrupts, runs on, its result dropped);
``inline``    a sync function declared quick (``blocking=False``): called on
              the loop, saving the thread hand-off.

The parameters annotated :class:`plexor.Context` are found here too, once, so
no call inspects a signature again.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, cast

from plexor.errors import PluginError
from plexor.events import Data, Guidance, Log, Progress, Result

__all__ = ["Mode", "Reporter", "Target", "dispatch", "target"]


class Reporter(Protocol):
    """What running an async generator needs of its call's context (:class:`plexor.Context` is one)."""

    async def progress(self, current: float, total: float | None = None, message: str | None = None) -> None: ...

    async def log(self, level: str, message: str) -> None: ...


Mode = Literal["async", "asyncgen", "thread", "inline"]


@dataclass(frozen=True, slots=True)
class Target:
    """A registered callable and how to call it."""

    func: Callable[..., object]
    mode: Mode
    context_params: tuple[str, ...]


def target(func: Callable[..., object], blocking: bool | None = None) -> Target:
    """Decide once how ``func`` runs: ``blocking=False`` keeps a sync function on the event loop."""
    from plexor.schema import context_params

    mode: Mode
    if inspect.isasyncgenfunction(func):
        mode = "asyncgen"
    elif inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None)):  # noqa: B004
        mode = "async"
    else:
        mode = "inline" if blocking is False else "thread"
    try:
        ctx = context_params(func)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        ctx = ()
    return Target(func, mode, ctx)


async def dispatch(t: Target, args: tuple[object, ...], kwargs: dict[str, object], ctx: Reporter) -> object:
    """Run ``t`` with the arguments; an async generator's events are acted on and folded into a Result."""
    if t.mode == "async":
        return await cast("Awaitable[object]", t.func(*args, **kwargs))  # mode "async": it returns an awaitable
    if t.mode == "inline":
        return t.func(*args, **kwargs)
    if t.mode == "thread":
        import anyio

        return await anyio.to_thread.run_sync(lambda: t.func(*args, **kwargs), abandon_on_cancel=True)
    return await _drive(t, cast("AsyncGenerator[object, None]", t.func(*args, **kwargs)), ctx)


async def _drive(t: Target, agen: AsyncGenerator[object, None], ctx: Reporter) -> Result:
    advice: list[str] = []
    collected: dict[str, object] = {}
    final: Result | None = None
    try:
        async for event in agen:
            if isinstance(event, Progress):
                await ctx.progress(event.current, event.total, event.message)
            elif isinstance(event, Log):
                await ctx.log(event.level, event.message)
            elif isinstance(event, Guidance):
                advice.append(event.text)
            elif isinstance(event, Result):
                final = event
                break
            elif isinstance(event, (Data, dict)):
                _merge(collected, event.value if isinstance(event, Data) else event)
            else:
                name = getattr(t.func, "__name__", "?")
                raise PluginError(f"{name} yielded {type(event).__name__}",
                                  "Yield Progress, Log, Data, Guidance, dict or Result.")
    finally:
        await agen.aclose()
    if final is None:
        return Result(collected, guidance=advice)
    return Result(final.data, final.text, advice + list(final.guidance), list(final.content))


def _merge(into: dict[str, object], part: Mapping[str, object]) -> None:
    for key, value in part.items():
        if isinstance(value, list) and isinstance(old := into.get(key), list):
            old.extend(value)
        else:
            into[key] = value
