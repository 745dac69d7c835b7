"""The lifecycle states, their legal transitions, and the kernel's record of each plugin.

States, for the kernel and for each plugin::

    created -> loading -> starting -> ready -> draining -> stopped
                  \\          \\                   \\
                   `-> failed `-> failed           `-> failed

A plugin fails on its own: an import error, a hook that raises, an invalid
registration or a name clash puts *that* plugin in ``failed`` with the reason,
and the kernel and every other plugin carry on. ``docs/lifecycle.md`` draws it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from plexor.core.registry import Registry
from plexor.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from importlib.metadata import EntryPoint

    import anyio
    from peewee import Database

    from plexor.handle import PluginHandle

__all__ = ["TRANSITIONS", "PluginRecord", "State"]


class State(enum.StrEnum):
    CREATED = "created"
    LOADING = "loading"
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    STOPPED = "stopped"
    FAILED = "failed"
    DISABLED = "disabled"  # a plugin that was found but not loaded (PLEXOR_PLUGINS / PLEXOR_DISABLE)


TRANSITIONS: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.LOADING, State.FAILED, State.DISABLED, State.STOPPED}),
    # loading -> stopped: loaded for inspection (`plexor tools`) and never started.
    State.LOADING: frozenset({State.STARTING, State.FAILED, State.STOPPED}),
    State.STARTING: frozenset({State.READY, State.FAILED, State.DRAINING}),
    State.READY: frozenset({State.DRAINING}),
    # draining -> failed: a plugin whose startup hook raises after a signal began the drain.
    State.DRAINING: frozenset({State.STOPPED, State.FAILED}),
    # failed -> stopped: the kernel only (a broken config file, then stop); a failed plugin stays failed.
    State.FAILED: frozenset({State.STOPPED}),
    State.STOPPED: frozenset(),
    State.DISABLED: frozenset(),
}


class _Machine:
    state: State
    history: list[tuple[str, str]]

    def move_to(self, new: State) -> None:
        """Take the transition to ``new`` (a no-op when already there; refused unless :data:`TRANSITIONS` allows it)."""
        if new == self.state:
            return
        if new not in TRANSITIONS[self.state]:
            raise RuntimeError(f"{self!r}: illegal transition {self.state.value} -> {new.value}")
        self.history.append((self.state.value, new.value))
        self.state = new


@dataclasses.dataclass(eq=False)
class PluginRecord(_Machine):
    """One plugin: where it came from, its state, its error and its readiness."""

    name: str
    distribution: str = "?"
    version: str = "?"
    module: object = None  # the plugin: its module, or any object with its hook implementations
    entry_point: EntryPoint | str = ""  # an installed plugin's, or a built-in module's name; "": given as an object
    namespace: str = ""
    state: State = State.CREATED
    error: str | None = None
    failed_by_config: bool = False  # its configuration failed it: a command needing it exits 2, not 1
    warnings: list[str] = dataclasses.field(default_factory=list)
    settings: Settings | None = None
    database: Database | None = None
    registry: Registry = dataclasses.field(default_factory=Registry)
    data_dir: Path = Path(".")
    handle: PluginHandle = None  # type: ignore[assignment]  # attached by the loader, before anything reads it
    progress: float | None = None
    progress_message: str | None = None
    history: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    startup_done: anyio.Event | None = None  # made when the kernel starts and set when the startup hook has finished
    warming_up: bool = False  # between warming() and warmed()
    icons: list[dict[str, object]] | None = None  # from the module's PLEXOR_ICON (plexor.hints)
    on_move: Callable[[PluginRecord, State, State], object] | None = None  # after each transition (list-changed notices)

    def __repr__(self) -> str:
        return f"<plugin {self.name} {self.state.value}>"

    def move_to(self, new: State) -> None:
        old = self.state
        super().move_to(new)
        if self.on_move is not None and old != new:
            self.on_move(self, old, new)

    # -- readiness, for plugins that warm up in the background -----------------
    def warming(self, fraction: float | None = None, message: str | None = None) -> None:
        """Report background warm-up (0..1); the plugin stays ``starting`` until :meth:`warmed`."""
        self.warming_up = True
        self.progress = None if fraction is None else max(0.0, min(1.0, float(fraction)))
        self.progress_message = message
        if self.state == State.READY:
            # Re-warming (a full re-index) does not take a plugin out of service.
            return

    def warmed(self) -> None:
        """Warm-up finished: the plugin is ``ready``."""
        self.warming_up = False
        self.progress = 1.0
        self.progress_message = None
        if self.state == State.STARTING and self.started():
            self.move_to(State.READY)

    def started(self) -> bool:
        """Whether the plugin's startup hook has finished (it may still be warming up)."""
        return self.startup_done is not None and bool(self.startup_done.is_set())

    def fail(self, error: str) -> None:
        self.error = error
        if self.state not in (State.FAILED, State.STOPPED, State.DISABLED):
            self.move_to(State.FAILED)

    def describe(self) -> dict[str, object]:
        reg = self.registry
        return {
            "name": self.name, "distribution": self.distribution, "version": self.version, "namespace": self.namespace,
            "icons": self.icons or [], "state": self.state.value, "ready": self.state == State.READY,
            "progress": self.progress, "progress_message": self.progress_message, "error": self.error,
            "warnings": list(self.warnings) + list(self.settings.warnings if self.settings else []),
            "tools": sorted(reg.tools), "resources": sorted(reg.resources), "resource_templates": sorted(reg.templates),
            "prompts": sorted(reg.prompts),
        }
