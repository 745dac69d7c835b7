"""The kernel: loading (:mod:`plexor.core.loader`), requests (:mod:`plexor.core.pipeline`) and, here, the lifecycle.

The states and their legal transitions are in :mod:`plexor.core.records`;
``docs/lifecycle.md`` draws them. This module starts plugins, drains
in-flight requests of every kind, runs shutdown hooks and closes storage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor.core.loader import BUILTIN, Loader
from plexor.core.pipeline import Pipeline
from plexor.core.records import TRANSITIONS, PluginRecord, State
from plexor.core.results import Outcome, to_json
from plexor.core.specs import ToolSpec
from plexor.errors import NotFound, PlexorError, PluginError

if TYPE_CHECKING:  # pragma: no cover
    import anyio
    from peewee import Database

__all__ = ["BUILTIN", "TRANSITIONS", "Kernel", "Outcome", "PluginRecord", "State", "to_json"]


class Kernel(Loader, Pipeline):
    """Loads plugins, drives their lifecycle and serves calls in-process.

    :param plugins: extra plugins to load, as ``(name, module_or_object)`` pairs
        (tests and embedding); they are loaded like entry-point plugins.
    :param load_entry_points: discover installed plugins (group ``plexor``).
    :param environ: environment to read ``PLEXOR_*`` from (default ``os.environ``).
    :param builtin: load the built-in plugin (``plexor_health``, ``plexor_plugins``).
    """

    def __repr__(self) -> str:
        return f"<Kernel {self.state.value}>"

    def plugin(self, name: str) -> PluginRecord:
        """The kernel's record of plugin ``name`` (state, error, settings, database): for tests and embedding.

        Plugins never need this: they get their :class:`plexor.PluginHandle`.
        """
        try:
            return self.records[name]
        except KeyError:
            raise NotFound(f"no plugin named {name!r}", f"Installed: {', '.join(sorted(self.records)) or 'none'}.") from None

    def list_tools(self) -> list[ToolSpec]:
        """The look-up of ``tools/list``: every tool whose schemas derive (deriving them now if its plugin
        has not started); a tool whose signature has no JSON schema fails its plugin, not the list."""
        for spec in list(self.registry.tools.values()):
            try:
                self.prepare_tool(spec)
            except PlexorError as exc:
                self.fail_plugin(self.records[spec.plugin], exc, "loading")
        return [s for s in self.registry.tools.values()
                if self.records[s.plugin].state is not State.FAILED and not s.withdrawn]

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> Kernel:
        """Open storage and run startup hooks, each plugin on its own; ends in ``ready``."""
        import anyio

        if self.state == State.CREATED:
            self.load()
        self.move_to(State.STARTING)
        active = [(r, anyio.Event()) for r in self.records.values() if r.state == State.LOADING]
        for rec, done in active:
            rec.startup_done = done
            rec.move_to(State.STARTING)
        async with anyio.create_task_group() as tg:
            for rec, done in active:
                tg.start_soon(self._start_one, rec, done)
        if self.state == State.STARTING:  # a signal may have started draining meanwhile
            self.move_to(State.READY)
        self.log.info("kernel_ready", plugins={r.name: r.state.value for r in self.records.values()})
        return self

    async def _start_one(self, rec: PluginRecord, done: anyio.Event) -> None:
        import anyio

        try:
            for spec in rec.registry.tools.values():
                # schemas now (deferred from loading): one pydantic cannot make fails the plugin here, not tools/list
                self.prepare_tool(spec)
            if rec.registry.models:
                from plexor.core.storage import migrate, open_database

                url = rec.settings.get("database_url") if rec.settings else None
                staged_migrations = rec.registry.migrations

                def open_and_migrate() -> Database:
                    db = open_database(rec.name, rec.data_dir, url)
                    migrate(db, rec.name, rec.registry.models, staged_migrations)
                    return db

                rec.database = await anyio.to_thread.run_sync(open_and_migrate)
            # calls wait PLEXOR_START_WAIT for a start; a startup hook running twice that is hung: it fails alone
            try:
                await self._run_hook(rec, "plexor_startup", 2 * self.start_wait)
            except TimeoutError:
                raise PluginError(f"plexor_startup did not finish within {2 * self.start_wait:g} s (twice "
                                  "PLEXOR_START_WAIT)", "Do long warm-up in the background and report it with "
                                  "plugin.warming()/plugin.warmed(), or raise PLEXOR_START_WAIT.") from None
            done.set()
            if rec.state == State.STARTING and not rec.warming_up:
                rec.move_to(State.READY)
        except Exception as exc:  # noqa: BLE001 - isolate
            done.set()
            self.fail_plugin(rec, exc, "startup")
            await self._close_storage(rec)

    async def drain(self, timeout: float = 30.0) -> None:
        """Refuse new calls and wait (up to ``timeout`` seconds) for in-flight ones to finish."""
        import anyio

        if self.state in (State.READY, State.STARTING):
            self.move_to(State.DRAINING)
            for rec in self.records.values():
                if rec.state in (State.READY, State.STARTING):
                    rec.move_to(State.DRAINING)
        if self._inflight:
            self.log.info("draining", inflight=self._inflight)
            self._idle = anyio.Event()
            with anyio.move_on_after(timeout):
                await self._idle.wait()
        await self._drain_participants()
        if self._calls:  # past the grace period: each call still running is stopped and answered (core.pipeline)
            self._idle = anyio.Event()
            for scope in list(self._calls):
                scope.cancel()
            with anyio.move_on_after(2):  # their answers written (a sync tool's is at once: its thread is left to run on)
                await self._idle.wait()

    async def _drain_participants(self) -> None:
        """The ``plexor_drain`` hooks (:mod:`plexor.extending`), each on its own: e.g. tasks hands its running ones over."""
        import inspect

        for impl in reversed(self.pm.hook.plexor_drain.get_hookimpls()):  # pluggy's order; a failing one stops no other
            try:
                if inspect.isawaitable(result := impl.function(*(self for _ in impl.argnames))):  # `kernel`, if named
                    await result
            except Exception as exc:  # noqa: BLE001 - raised at the call or while awaited
                self.log.error("drain_participant_failed", plugin=impl.plugin_name, error=f"{type(exc).__name__}: {exc}")

    async def stop(self, timeout: float = 30.0) -> None:
        """Drain, run shutdown hooks and close provided services, close storage; ends in ``stopped``."""
        import anyio

        if self.state == State.STOPPED:
            return
        if self.state in (State.CREATED, State.LOADING, State.FAILED):
            for rec in self.records.values():
                await self._close_storage(rec)
                if rec.state == State.LOADING:
                    rec.move_to(State.STOPPED)
            self.move_to(State.STOPPED)
            self.log.info("kernel_stopped")
            return
        await self.drain(timeout)
        for rec in self.records.values():
            if rec.state == State.DRAINING:
                try:
                    await self._run_hook(rec, "plexor_shutdown", self.start_wait)
                    with anyio.fail_after(self.start_wait):
                        await rec.handle.close_services()
                except TimeoutError:
                    self.log.error("plugin_shutdown_timeout", plugin=rec.name, hint=f"plexor_shutdown (or a service close) did not "
                                   f"finish within PLEXOR_START_WAIT={self.start_wait:g} s; it was left behind")
                except Exception as exc:  # noqa: BLE001
                    self.log.error("plugin_shutdown_failed", plugin=rec.name, error=f"{type(exc).__name__}: {exc}")
                await self._close_storage(rec)
                rec.move_to(State.STOPPED)
            elif rec.state == State.FAILED:
                await self._close_storage(rec)
        self.move_to(State.STOPPED)
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
