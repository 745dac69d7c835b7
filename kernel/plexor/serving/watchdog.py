"""Bounded exit: after the first signal (or stdin closing), a second one ends the process at once,
and a watchdog ends it if shutdown takes longer than promised, whatever a plugin does."""

from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from types import FrameType

    from plexor.core.kernel import Kernel

__all__ = ["EXIT_MARGIN", "Watchdog"]

EXIT_MARGIN = 5.0  # seconds beyond the grace periods before the watchdog ends the process


class Watchdog:
    """Ends the process if shutdown takes longer than promised; a second signal ends it at once."""

    def __init__(self, kernel: Kernel, bound: float) -> None:
        self.kernel = kernel
        self.bound = bound
        self._armed = False

    def arm(self, reason: str) -> None:
        """Make the next SIGTERM/SIGINT exit immediately, and start the clock (once)."""
        if threading.current_thread() is threading.main_thread():  # signal handlers live in the main thread only
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._second_signal)
        if self._armed:
            return
        self._armed = True
        _keep_waking()
        timer = threading.Timer(self.bound, self._expired, args=(reason,))
        timer.daemon = True
        timer.start()

    def _second_signal(self, signum: int, frame: FrameType | None) -> None:
        _hard_exit(f"second {signal.Signals(signum).name}: exiting at once", 128 + signum)

    def _expired(self, reason: str) -> None:
        _hard_exit(f"shutdown after {reason} took longer than {self.bound:g} s (a plugin's shutdown hook hangs?): "
                   "exiting", 1)


def _keep_waking() -> None:
    """Return the main thread to Python code every 50 ms while shutting down.

    A signal may be delivered to any thread (a sync shutdown hook runs in a worker thread), but its
    Python handler runs only when the main thread executes bytecode; an event loop asleep in epoll
    with nothing due would not, and the second SIGTERM would wait for it.
    """
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return

    def tick() -> None:
        loop.call_later(0.05, tick)

    tick()


def _hard_exit(message: str, code: int) -> None:
    import json
    import time

    line = json.dumps({"event": "exit_forced", "level": "error", "reason": message,
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    try:
        os.write(2, (line + "\n").encode())
    finally:
        os._exit(code)


async def _next_signal_by_handler() -> str:
    """SIGTERM/SIGINT through signal.signal (polled), then the previous handlers back."""
    import anyio

    got: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not got:
            await anyio.sleep(0.1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return signal.Signals(got[0]).name
