"""The kernel: the lifecycle state machine, composed with loading and the request pipeline.

:mod:`plexor.loader` loads plugins, :mod:`plexor.pipeline` serves requests;
this module holds the states, the plugin records and start/drain/stop.

"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from plexor.config import Paths, paths
from plexor.errors import ConfigError, NotFound
from plexor.loader import BUILTIN, Loader
from plexor.pipeline import Pipeline
from plexor.records import TRANSITIONS, PluginRecord, State, _Machine
from plexor.registry import Registry
from plexor.results import Outcome, to_json

__all__ = ["BUILTIN", "TRANSITIONS", "Kernel", "Outcome", "PluginRecord", "State", "to_json"]


class Kernel(Loader, Pipeline, _Machine):
    """Loads plugins, drives their lifecycle and serves calls in-process.

    :param plugins: extra plugins to load, as ``(name, module_or_object)`` pairs
        (tests and embedding); they are loaded like entry-point plugins.
    :param load_entry_points: discover installed plugins (group ``plexor``).
    :param environ: environment to read ``PLEXOR_*`` from (default ``os.environ``).
    """

    def __init__(
        self,
        plugins: Iterable[tuple[str, Any]] = (),
        *,
        load_entry_points: bool = True,
        environ: Mapping[str, str] | None = None,
        builtin: bool = True,
    ) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.paths: Paths = paths(self.environ)
        self.state = State.CREATED
        self.history: list[tuple[str, str]] = []
        self.error: str | None = None
        self.records: dict[str, PluginRecord] = {}
        self.registry = Registry()
        self.separator = self.environ.get("PLEXOR_SEPARATOR", "_") or "_"
        if self.separator not in ("_", "-"):
            raise ConfigError(
                f"PLEXOR_SEPARATOR={self.separator!r} cannot join tool names",
                "Use '_' (the default) or '-': tool names must match ^[A-Za-z0-9_-]{1,64}$ for every major LLM API.",
            )
        self.page_size = _env_number(self.environ, "PLEXOR_PAGE_SIZE", 100, int, minimum=1)
        self.start_wait = _env_number(self.environ, "PLEXOR_START_WAIT", 15.0, float, minimum=0)
        self.started_at = time.time()
        self.pid = os.getpid()
        self._extra = list(plugins)
        self._load_entry_points = load_entry_points
        self._builtin = builtin
        self._config: dict[str, Any] = {}
        self._inflight = 0
        self._idle: Any = None
        self._listeners: list[Callable[[str], Any]] = []
        self._pm: Any = None
        from plexor.log import configure, get_logger

        if "PLEXOR_LOG_LEVEL" in self.environ:
            configure(self.environ["PLEXOR_LOG_LEVEL"])
        self.log = get_logger("plexor")

    def __repr__(self) -> str:
        return f"<Kernel {self.state.value}>"

    @property
    def pm(self) -> Any:
        """This kernel's pluggy manager: made per kernel (a factory, not an import-time global)."""
        if self._pm is None:
            import pluggy

            from plexor import hookspecs

            self._pm = pluggy.PluginManager("plexor")
            self._pm.add_hookspecs(hookspecs)
        return self._pm

    def plugin(self, name: str) -> PluginRecord:
        """The kernel's record of plugin ``name`` (state, error, settings, database): for tests and embedding.

        Plugins never need this: they get their :class:`plexor.PluginHandle`.
        """
        try:
            return self.records[name]
        except KeyError:
            raise NotFound(f"no plugin named {name!r}", f"Installed: {', '.join(sorted(self.records)) or 'none'}.") from None

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> Kernel:
        """Open storage and run startup hooks, each plugin on its own; ends in ``ready``."""
        import anyio

        if self.state == State.CREATED:
            self.load()
        self._move(State.STARTING)
        active = [r for r in self.records.values() if r.state == State.LOADING]
        for rec in active:
            rec._started = anyio.Event()
            rec._move(State.STARTING)
        async with anyio.create_task_group() as tg:
            for rec in active:
                tg.start_soon(self._start_one, rec)
        if self.state == State.STARTING:  # a signal may have started draining meanwhile
            self._move(State.READY)
        self.log.info("kernel_ready", plugins={r.name: r.state.value for r in self.records.values()})
        return self

    async def _start_one(self, rec: PluginRecord) -> None:
        import anyio

        try:
            for spec in rec.registry.tools.values():
                # Derive schemas now (deferred from loading); a signature pydantic
                # cannot describe fails this plugin here, not a later tools/list.
                self.prepare_tool(spec)
            if rec.registry.models:
                from plexor.storage import migrate, open_database

                url = rec.settings.get("database_url") if rec.settings else None
                staged_migrations = rec.registry.migrations

                def open_and_migrate() -> Any:
                    db = open_database(rec.name, rec.data_dir, url)
                    migrate(db, rec.name, rec.registry.models, staged_migrations)
                    return db

                rec.database = await anyio.to_thread.run_sync(open_and_migrate)
            await self._call_async(rec, "plexor_startup", plugin=rec.handle)
            rec._started.set()
            if rec.state == State.STARTING and not rec._warming:
                rec._move(State.READY)
        except Exception as exc:  # noqa: BLE001 - isolate
            rec._started.set()
            self._fail_plugin(rec, exc, "startup")
            await self._close_storage(rec)

    async def drain(self, timeout: float = 30.0) -> None:
        """Refuse new calls and wait (up to ``timeout`` seconds) for in-flight ones to finish."""
        import anyio

        if self.state in (State.READY, State.STARTING):
            self._move(State.DRAINING)
            for rec in self.records.values():
                if rec.state in (State.READY, State.STARTING):
                    rec._move(State.DRAINING)
        if self._inflight:
            self.log.info("draining", inflight=self._inflight)
            self._idle = anyio.Event()
            with anyio.move_on_after(timeout):
                await self._idle.wait()

    async def stop(self, timeout: float = 30.0) -> None:
        """Drain, run shutdown hooks, close storage; ends in ``stopped``."""
        if self.state == State.STOPPED:
            return
        if self.state in (State.CREATED, State.LOADING, State.FAILED):
            for rec in self.records.values():
                await self._close_storage(rec)
                if rec.state == State.LOADING:
                    rec._move(State.STOPPED)
            self._move(State.STOPPED)
            self.log.info("kernel_stopped")
            return
        await self.drain(timeout)
        for rec in self.records.values():
            if rec.state == State.DRAINING:
                try:
                    await self._call_async(rec, "plexor_shutdown", plugin=rec.handle)
                except Exception as exc:  # noqa: BLE001
                    self.log.error("plugin_shutdown_failed", plugin=rec.name, error=f"{type(exc).__name__}: {exc}")
                await self._close_storage(rec)
                rec._move(State.STOPPED)
            elif rec.state == State.FAILED:
                await self._close_storage(rec)
        self._move(State.STOPPED)
        self.log.info("kernel_stopped")

    async def _close_storage(self, rec: PluginRecord) -> None:
        db = rec.database
        if db is None:
            return
        rec.database = None
        try:
            if hasattr(db, "close_all"):
                db.close_all()
            if not db.is_closed():
                db.close()
        except Exception as exc:  # noqa: BLE001
            self.log.error("storage_close_failed", plugin=rec.name, error=str(exc))

    # ----------------------------------------------------------------- listeners
    def on_change(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Call ``callback(kind)`` when the set of tools/resources/prompts changes; returns an unsubscribe."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _notify(self, kind: str) -> None:
        for cb in list(self._listeners):
            try:
                cb(kind)
            except Exception:  # noqa: BLE001
                self.log.debug("listener_failed", kind=kind)

    # ------------------------------------------------------------------- health
    def health(self) -> dict[str, Any]:
        from plexor import __version__
        from plexor.schema import schema_hash

        return {
            "kernel": {"state": self.state.value, "version": __version__, "pid": self.pid,
                       "uptime_seconds": round(time.time() - self.started_at, 3)},
            "pid": self.pid,
            "version": __version__,
            "schema_hash": schema_hash(sorted((t.name, t.schema_hash) for t in self.registry.tools.values())),
            "plugins": [r.describe() for r in sorted(self.records.values(), key=lambda r: r.name)],
        }


def _env_number(environ: Mapping[str, str], name: str, default: Any, kind: type, minimum: float) -> Any:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ConfigError(f"{name}={raw!r} is not a valid value", f"Set {name} to a number of at least {minimum}, or unset it.")
    return value
