"""The per-request time limit's clock: one timer per event loop for every request in flight.

``anyio.move_on_after`` arms a timer of the event loop for each request and cancels it when the
request ends: a heap push of a Python-compared handle and a cancellation, about twice the cost of
the cancel scope itself, for a limit that almost never fires. Here a request enters a cancel scope
without a deadline and is entered in :class:`Deadlines`; one timer, armed for the earliest
deadline, cancels the requests that are due when it fires and is armed again for the next. A
request is cancelled at its deadline, as with ``move_on_after`` (within the event loop's timer
resolution), and a request that ends first costs a dictionary entry, not a timer. The same clock
ends a 2026-07-28 answer's silence before its first ping (the ``direct`` feature, :mod:`plexor.features.direct.entry`): anything
with a ``cancel()`` can be entered.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.extending import Due

__all__ = ["Deadlines"]


class Deadlines:
    """Cancel scopes (or other :class:`plexor.extending.Due`) with the loop time each must be cancelled at; one loop timer for all.

    Every method runs on the event loop's thread (the middleware that uses it), so no lock is needed."""

    def __init__(self) -> None:
        self._due: dict[Due, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._at = float("inf")  # when the armed timer fires
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop it is armed on (an app may outlive a loop)

    def add(self, scope: Due, seconds: float) -> None:
        """Cancel ``scope`` ``seconds`` from now unless :meth:`discard` takes it out first."""
        loop = asyncio.get_running_loop()
        at = loop.time() + seconds
        self._due[scope] = at
        if at < self._at or loop is not self._loop:
            self._arm(loop, at)

    def discard(self, scope: Due) -> None:
        self._due.pop(scope, None)
        if not self._due and self._timer is not None:  # nothing in flight: no timer left behind
            self._timer.cancel()
            self._timer, self._at = None, float("inf")

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._at, self._loop = loop.call_at(at, self._fire, loop), at, loop

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._at = None, float("inf")
        now = loop.time()
        due = [scope for scope, at in self._due.items() if at <= now]
        for scope in due:
            del self._due[scope]
            scope.cancel()
        if self._due:
            self._arm(loop, min(self._due.values()))
