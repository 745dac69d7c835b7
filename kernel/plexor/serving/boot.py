"""Loading the kernel once the first request has been answered (stdio)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from plexor.core.kernel import Kernel

if TYPE_CHECKING:  # pragma: no cover - typing only
    from anyio.abc import TaskGroup

__all__ = ["Boot"]


class Boot:
    """Loads and starts the kernel once the first request has been answered (stdio).

    The ``initialize`` result does not depend on plugins, so it goes out at the
    speed of the bare SDK; loading (plugin imports, registration) and starting
    (storage, startup hooks) follow at once, and any request that needs the
    plugins waits for loading to finish.
    """

    def __init__(self, kernel: Kernel, *, on_started: Callable[[], object] | None = None) -> None:
        import anyio

        self.kernel = kernel
        self.on_started = on_started
        self.loaded = anyio.Event()
        self.stopping = False  # the server is stopping: waiting requests are answered, nothing more starts
        self._tg: TaskGroup | None = None
        self._begun = False
        self.after_load: Callable[[], object] | None = None  # the server's extend(): plugins' layers and methods, before requests go on

    def attach(self, task_group: TaskGroup) -> None:
        self._tg = task_group

    def begin(self) -> None:
        if not self._begun and self._tg is not None:
            self._begun = True
            self._tg.start_soon(self._run)

    def abort(self) -> None:
        """The server is stopping: release the requests waiting for loading (they are answered
        "shutting down" instead of being dropped) and start no plugin."""
        self.stopping = True
        self.loaded.set()

    async def fallback(self, delay: float) -> None:
        """Begin anyway after ``delay`` seconds, so warm-up is not held back by a silent client."""
        import anyio

        await anyio.sleep(delay)
        self.begin()

    async def _run(self) -> None:
        import anyio

        from plexor.core.kernel import State

        await anyio.sleep(0)  # let the pending response be written first
        try:
            if self.kernel.state == State.CREATED:
                # In a worker thread so the loop keeps writing responses meanwhile.
                await anyio.to_thread.run_sync(self.kernel.load)
            if self.after_load is not None:
                self.after_load()
        except Exception as exc:  # noqa: BLE001 - e.g. a config file broken since the CLI checked it
            self.kernel.log.error("kernel_load_failed", error=str(exc))
        finally:
            self.loaded.set()
        if self.kernel.state == State.LOADING and not self.stopping:
            await self.kernel.start()
            if self.on_started is not None:
                self.on_started()
