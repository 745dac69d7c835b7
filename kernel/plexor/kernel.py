"""The kernel: plugin loading, the lifecycle state machine, and calls.

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
import datetime
import enum
import inspect
import json
import os
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from plexor.config import ConfigSpec, Paths, Settings, load_config_file, paths, resolve_settings
from plexor.context import Context
from plexor.errors import ConfigError, InvalidArgument, NotFound, NotReady, PlexorError, PluginError
from plexor.events import Data, Guidance, Log, Progress, Result
from plexor.guidance import default_guidance, unknown_tool
from plexor.registry import (
    ModelRegistrar,
    PromptRegistrar,
    Registry,
    ResourceRegistrar,
    TemplateRegistrar,
    ToolRegistrar,
    ToolSpec,
)
from plexor.schema import context_params

__all__ = ["BUILTIN", "Kernel", "Outcome", "PluginRecord", "State"]

BUILTIN = "plexor"


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

    def _move(self, new: State) -> None:
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
    module: Any = None
    entry_point: Any = None
    namespace: str = ""
    state: State = State.CREATED
    error: str | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    settings: Settings | None = None
    database: Any = None
    registry: Registry = dataclasses.field(default_factory=Registry)
    services: dict[str, Any] = dataclasses.field(default_factory=dict)
    progress: float | None = None
    progress_message: str | None = None
    history: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    _started: Any = None  # anyio.Event set when the startup hook has finished
    _warming: bool = False

    def __repr__(self) -> str:
        return f"<plugin {self.name} {self.state.value}>"

    # -- readiness, for plugins that warm up in the background -----------------
    def warming(self, fraction: float | None = None, message: str | None = None) -> None:
        """Report background warm-up (0..1); the plugin stays ``starting`` until :meth:`warmed`."""
        self._warming = True
        self.progress = None if fraction is None else max(0.0, min(1.0, float(fraction)))
        self.progress_message = message
        if self.state == State.READY:
            # Re-warming (a full re-index) does not take a plugin out of service.
            return

    def warmed(self) -> None:
        """Warm-up finished: the plugin is ``ready``."""
        self._warming = False
        self.progress = 1.0
        self.progress_message = None
        if self.state == State.STARTING and self._started is not None and self._started.is_set():
            self._move(State.READY)

    def fail(self, error: str) -> None:
        self.error = error
        if self.state not in (State.FAILED, State.STOPPED, State.DISABLED):
            self._move(State.FAILED)

    def describe(self) -> dict[str, Any]:
        reg = self.registry
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "namespace": self.namespace,
            "state": self.state.value,
            "ready": self.state == State.READY,
            "progress": self.progress,
            "progress_message": self.progress_message,
            "error": self.error,
            "warnings": list(self.warnings) + list(self.settings.warnings if self.settings else []),
            "tools": sorted(reg.tools),
            "resources": sorted(reg.resources),
            "resource_templates": sorted(reg.templates),
            "prompts": sorted(reg.prompts),
        }


@dataclasses.dataclass
class Outcome:
    """The result of one tool call, before it is put on the wire."""

    data: dict[str, Any] | None
    text: str
    is_error: bool
    meta: dict[str, Any]
    error: PlexorError | None = None
    content: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def to_json(value: Any) -> Any:
    """Round-trip through JSON so the result is plain JSON types."""
    return json.loads(json.dumps(value, default=_jsonable, ensure_ascii=False))


class Kernel(_Machine):
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

    # ------------------------------------------------------------------ loading
    def load(self) -> Kernel:
        """Discover, import and register every plugin (state ``loading``); never raises for one plugin."""
        self._move(State.LOADING)
        try:
            self._config = load_config_file(self.paths.config_file)
        except ConfigError as exc:
            self.error = exc.render()
            self._move(State.FAILED)
            raise
        only = _csv(self.environ.get("PLEXOR_PLUGINS"))
        blocked = set(_csv(self.environ.get("PLEXOR_DISABLE")) or [])
        candidates: list[PluginRecord] = []
        if self._builtin:
            candidates.append(PluginRecord(BUILTIN, "plexor", _version(), entry_point="plexor.builtin"))
        for name, obj in self._extra:
            candidates.append(PluginRecord(name, getattr(obj, "__distribution__", "(in-process)"),
                                           getattr(obj, "__version__", "?"), module=obj))
        if self._load_entry_points:
            candidates.extend(self._discover())
        seen: dict[str, PluginRecord] = {}
        for rec in candidates:
            if rec.name in seen:
                rec._move(State.FAILED)
                other = seen[rec.name]
                rec.error = (
                    f"plugin name {rec.name!r} is claimed by both {other.distribution} and {rec.distribution}; "
                    f"{rec.distribution} was refused. Uninstall one of them."
                )
                self.records[f"{rec.name}@{rec.distribution}"] = rec
                self.log.error("plugin_refused", plugin=rec.name, error=rec.error)
                continue
            seen[rec.name] = rec
            self.records[rec.name] = rec
            allowed = rec.name == BUILTIN or only is None or rec.name in only
            if rec.name == BUILTIN and BUILTIN in blocked:
                self.log.warning("builtin_not_disabled", hint="the built-in plugin 'plexor' (plexor_health) is "
                                 "part of the kernel and cannot be disabled; PLEXOR_DISABLE=plexor is ignored")
            if (rec.name in blocked and rec.name != BUILTIN) or not allowed:
                rec._move(State.DISABLED)
                continue
            self._load_one(rec)
        for var, names in (("PLEXOR_PLUGINS", only or []), ("PLEXOR_DISABLE", sorted(blocked))):
            for name in names:
                if name not in self.records:
                    import difflib

                    near = difflib.get_close_matches(name, list(self.records), n=1)
                    self.log.warning("plugin_not_installed", plugin=name, variable=var,
                                     hint=f"{var} names {name!r}, which is not installed"
                                     + (f"; did you mean {near[0]!r}?" if near else f"; installed: {', '.join(sorted(self.records))}"))
        return self

    def _discover(self) -> list[PluginRecord]:
        from importlib.metadata import entry_points

        found = []
        for ep in sorted(entry_points(group="plexor"), key=lambda e: (e.dist.name if e.dist else "", e.name)):
            dist = ep.dist
            found.append(PluginRecord(ep.name, dist.name if dist else "?", dist.version if dist else "?", entry_point=ep))
        return found

    def _load_one(self, rec: PluginRecord) -> None:
        rec._move(State.LOADING)
        try:
            if rec.module is None:
                ep = rec.entry_point
                if isinstance(ep, str):
                    import importlib

                    rec.module = importlib.import_module(ep)
                else:
                    rec.module = ep.load()
            self.pm.register(rec.module, name=rec.name)
            rec.namespace = getattr(rec.module, "PLEXOR_NAMESPACE", None) or rec.name.replace("-", "_")
            staged = Registry()
            spec = ConfigSpec(rec.name)
            self._call(rec, "plexor_add_config", config=spec)
            self._call(rec, "plexor_register_models", register=ModelRegistrar(staged, rec.name))
            if staged.models and "database_url" not in spec.settings:
                spec.add("database_url", str, None, help="database URL (postgresql://...); default: a SQLite file")
            table = self._config.get(rec.name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"[{rec.name}] in {self.paths.config_file} must be a table", f"Write it as [{rec.name}] followed by key = value lines.")
            rec.settings = resolve_settings(spec, table, self.paths.config_file, self.paths.plugin_data_dir(rec.name), self.environ)
            for warning in rec.settings.warnings:
                self.log.warning("config_warning", plugin=rec.name, warning=warning)
            s = rec.settings
            self._call(rec, "plexor_register_tools", register=ToolRegistrar(staged, rec.name, rec.namespace, self.separator), settings=s)
            self._call(rec, "plexor_register_resources", register=ResourceRegistrar(staged, rec.name), settings=s)
            self._call(rec, "plexor_register_resource_templates", register=TemplateRegistrar(staged, rec.name), settings=s)
            self._call(rec, "plexor_register_prompts", register=PromptRegistrar(staged, rec.name, rec.namespace, self.separator), settings=s)
            owner = self.registry.namespaces.get(rec.namespace)
            clashes = self.registry.clashes(staged)
            if owner and owner != rec.name and staged.tools:
                clashes.insert(0, ("tool namespace", rec.namespace, owner))
            if clashes:
                what, name, other = clashes[0]
                other_dist = self.records[other].distribution if other in self.records else other
                raise PluginError(
                    f"{what} {name!r} of {rec.distribution} (plugin {rec.name}) clashes with {other_dist} (plugin {other}); "
                    f"{rec.distribution} was refused",
                    "Uninstall one of the two, or block one with PLEXOR_DISABLE.",
                    data={"clashes": [list(c) for c in clashes]},
                )
            rec.registry = staged
            self.registry.merge(staged)
        except Exception as exc:  # noqa: BLE001 - isolate the plugin, whatever it raised
            self._fail_plugin(rec, exc, "loading")
        except SystemExit as exc:  # a plugin calling sys.exit() at import must not stop the server
            self._fail_plugin(rec, RuntimeError(f"plugin called sys.exit({exc.code})"), "loading")

    def _fail_plugin(self, rec: PluginRecord, exc: BaseException, phase: str) -> None:
        text = exc.render() if isinstance(exc, PlexorError) else f"{type(exc).__name__}: {exc}"
        rec.fail(f"{phase} failed: {text}")
        self.log.error("plugin_failed", plugin=rec.name, phase=phase, error=text,
                       traceback="".join(traceback.format_exception(exc)) if not isinstance(exc, PlexorError) else None)
        if self.pm.is_registered(rec.module):
            try:
                self.pm.unregister(rec.module)
            except Exception:  # noqa: BLE001 - best effort
                pass
        had_tools = any(t.plugin == rec.name for t in self.registry.tools.values())
        self.registry.remove_plugin(rec.name)
        if had_tools:
            self._notify("tools")

    def _call(self, rec: PluginRecord, hook: str, **kwargs: Any) -> Any:
        """Call one plugin's implementation of ``hook`` (never the combined pluggy call)."""
        caller = getattr(self.pm.hook, hook)
        for impl in caller.get_hookimpls():
            if impl.plugin_name != rec.name:
                continue
            return impl.function(*[kwargs[a] for a in impl.argnames])
        return None

    def has_hook(self, rec: PluginRecord, hook: str) -> bool:
        return any(i.plugin_name == rec.name for i in getattr(self.pm.hook, hook).get_hookimpls())

    @staticmethod
    def prepare_tool(spec: ToolSpec) -> None:
        """Derive a tool's schemas; a signature with no JSON schema is a :class:`PluginError` naming the tool."""
        try:
            spec.schema_hash  # noqa: B018 - computing it derives the schemas
        except PlexorError:
            raise
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            try:
                shown = ", ".join(f"{n}: {_annotation_text(p.annotation)}"
                                  for n, p in inspect.signature(spec.func).parameters.items())
            except (TypeError, ValueError):
                shown = "?"
            raise PluginError(
                f"tool {spec.name!r} has a parameter or return type with no JSON schema ({shown}): {first}",
                "Use JSON-friendly types: str, int, float, bool, list, dict, Literal, TypedDict or pydantic models.",
            ) from exc

    def plugin(self, name: str) -> PluginRecord:
        """The record of plugin ``name`` (its settings, services, database, readiness)."""
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
                    db = open_database(rec.name, self.paths.plugin_data_dir(rec.name), url)
                    migrate(db, rec.name, rec.registry.models, staged_migrations)
                    return db

                rec.database = await anyio.to_thread.run_sync(open_and_migrate)
            if self.has_hook(rec, "plexor_startup"):
                result = self._call(rec, "plexor_startup", kernel=self)
                if inspect.isawaitable(result):
                    await result
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
                    if self.has_hook(rec, "plexor_shutdown"):
                        result = self._call(rec, "plexor_shutdown", kernel=self)
                        if inspect.isawaitable(result):
                            await result
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
        from plexor.schema import schema_hash

        return {
            "kernel": {"state": self.state.value, "version": _version(), "pid": self.pid,
                       "uptime_seconds": round(time.time() - self.started_at, 3)},
            "pid": self.pid,
            "version": _version(),
            "schema_hash": schema_hash(sorted((t.name, t.schema_hash) for t in self.registry.tools.values())),
            "plugins": [r.describe() for r in sorted(self.records.values(), key=lambda r: r.name)],
        }

    # -------------------------------------------------------------------- calls
    def resolve_tool(self, name: str) -> ToolSpec:
        spec = self.registry.tools.get(name)
        if spec is None and "." in name:
            spec = self.registry.tools.get(name.replace(".", self.separator, 1))
        if spec is None:
            unavailable: dict[str, tuple[str, str]] = {}
            for r in self.records.values():
                if r.state in (State.FAILED, State.DISABLED):
                    # A disabled plugin was never imported, so only its name hints at its namespace.
                    ns = r.namespace or getattr(r.module, "PLEXOR_NAMESPACE", None) or r.name.replace("-", "_")
                    unavailable[ns] = (r.name, r.state.value)
            raise unknown_tool(name, self.registry.tools, self.registry.namespaces, unavailable, self.separator)
        return spec

    async def _gate(self, rec: PluginRecord, ready_required: bool) -> None:
        import anyio

        if self.state in (State.DRAINING, State.STOPPED):
            raise NotReady("the server is shutting down", "Reconnect in a moment; a new server process will answer.")
        if rec.state == State.STARTING and rec._started is not None and not rec._started.is_set():
            with anyio.move_on_after(self.start_wait):
                await rec._started.wait()
        if rec.state == State.FAILED:
            raise NotReady(f"the plugin {rec.name!r} failed: {rec.error}", "Fix the cause (see `plexor plugins`) and restart the server.")
        if rec.state == State.READY or (rec.state == State.STARTING and not ready_required and rec._started.is_set()):
            return
        if rec.state == State.STARTING:
            pct = f", {round(rec.progress * 100)}% done" if rec.progress is not None else ""
            what = rec.progress_message or "still starting"
            raise NotReady(f"{rec.name} is {what}{pct}", "Retry in a few seconds.",
                           data={"plugin": rec.name, "progress": rec.progress})
        raise NotReady(f"the plugin {rec.name!r} is {rec.state.value}", "Retry in a few seconds, or restart the server.")

    def _enter(self) -> None:
        self._inflight += 1

    def _leave(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._idle is not None:
            self._idle.set()  # only drain() creates the event it waits on

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        session: Any = None,
        request_id: Any = None,
        progress_token: Any = None,
        close_sse_stream: Any = None,
        exchange: Any = None,
    ) -> Outcome:
        """Run a tool and return its :class:`Outcome`; failures become error outcomes, never exceptions.

        Two exceptions escape on purpose, for the server to answer: :class:`plexor.asking.InputRequired`
        (the tool asked the client something; 2026-07-28 clients get an ``InputRequiredResult``) and,
        on 2026-07-28 exchanges, :class:`plexor.asking.AskError` (a JSON-RPC error by the spec).
        """
        spec: ToolSpec | None = None
        try:
            spec = self.resolve_tool(name)
            rec = self.records[spec.plugin]
            await self._gate(rec, spec.ready_required)
            if arguments is not None and not isinstance(arguments, dict):
                raise InvalidArgument("arguments must be a JSON object", "Pass named arguments, e.g. {\"key\": \"value\"}.")
            values = spec.signature.validate(arguments)
            ctx = Context(self, rec, request_id=request_id, session=session, progress_token=progress_token, name=spec.name,
                          close_sse_stream=close_sse_stream, exchange=exchange)
            for p in spec.signature.context_params:
                values[p] = ctx
            self._enter()
            try:
                data, text, advice, extra = await self._invoke(spec, values, ctx)
            finally:
                self._leave()
            meta = {"plexor/provenance": spec.provenance, "plexor/schemaHash": spec.schema_hash}
            if advice:
                text = text + "\n\n" + "\n".join(f"Guidance: {a}" for a in advice)
            return Outcome(data, text, False, meta, content=extra)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes guidance
            import anyio

            if isinstance(exc, anyio.get_cancelled_exc_class()) or isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            if _escapes(exc, exchange):
                raise
            return self._error_outcome(exc, spec, name, arguments, request_id)

    def _error_outcome(self, exc: BaseException, spec: ToolSpec | None, name: str, arguments: Any, request_id: Any) -> Outcome:
        err = self.explain(exc, {"plugin": spec.plugin if spec else None, "tool": spec.name if spec else name,
                                 "arguments": arguments, "request_id": _short_id() if request_id is None else request_id})
        meta = {"plexor/provenance": spec.provenance if spec else "plexor/kernel"}
        if spec:
            meta["plexor/schemaHash"] = spec.schema_hash
        return Outcome({"error": err.payload()}, err.render(), True, meta, err)

    def explain(self, exc: BaseException, context: dict[str, Any]) -> PlexorError:
        """Turn any exception into guidance: the plugin's own hook first, the kernel default last."""
        if isinstance(exc, PlexorError):
            return exc
        plugin = context.get("plugin")
        request_id = context.get("request_id")
        if request_id is None:
            request_id = _short_id()
        context["request_id"] = request_id
        self.log.error("call_failed", request_id=str(request_id), plugin=plugin,
                       where=context.get("tool") or context.get("uri"),
                       traceback="".join(traceback.format_exception(exc)))
        rec = self.records.get(plugin) if plugin else None
        if rec is not None and self.has_hook(rec, "plexor_error_guidance"):
            try:
                advice = self._call(rec, "plexor_error_guidance", exception=exc, context=dict(context))
            except Exception as hook_exc:  # noqa: BLE001
                self.log.error("error_guidance_failed", plugin=plugin, error=str(hook_exc))
                advice = None
            if inspect.isawaitable(advice):
                advice.close() if hasattr(advice, "close") else None
                self.log.error("error_guidance_async", plugin=plugin, hint="plexor_error_guidance must be synchronous")
                advice = None
            if isinstance(advice, PlexorError):
                return advice
            if isinstance(advice, str) and advice.strip():
                message = str(exc).strip() or type(exc).__name__
                return PlexorError(f"{plugin}: {message}", f"{advice.strip()} (request id {request_id})")
        return default_guidance(exc, context)

    async def _invoke(
        self, spec: ToolSpec, values: dict[str, Any], ctx: Context
    ) -> tuple[dict[str, Any], str, list[str], list[dict[str, Any]]]:
        import anyio

        advice: list[str] = []
        if spec.kind == "asyncgen":
            collected: dict[str, Any] = {}
            final: Any = None
            agen = spec.func(**values)
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
                        raise PluginError(f"tool {spec.name} yielded {type(event).__name__}", "Yield Progress, Log, Data, Guidance, dict or Result.")
            finally:
                await agen.aclose()
            value: Any = final if final is not None else collected
        elif spec.kind == "async":
            value = await spec.func(**values)
        elif spec.blocking:
            value = await anyio.to_thread.run_sync(lambda: spec.func(**values))
        else:
            value = spec.func(**values)
        text: str | None = None
        extra: list[dict[str, Any]] = []
        if isinstance(value, Result):
            advice.extend(value.guidance)
            text = value.text
            extra = _check_blocks(spec, value.content)
            value = value.data
        if not isinstance(value, (dict, list, str, int, float, bool, type(None))):
            value = _jsonable(value)  # a pydantic model or dataclass becomes its dict before any wrapping
        if spec.signature.wraps_result or not isinstance(value, dict):
            value = {"result": value} if value is not None else {}
        # One dumps in the common case; a second pass only when the value held
        # non-JSON types (datetimes, dataclasses...) that had to be converted.
        converted: list[bool] = []

        def default(obj: Any) -> Any:
            converted.append(True)
            return _jsonable(obj)

        try:
            dumped = json.dumps(value, default=default, ensure_ascii=False, allow_nan=False)
        except ValueError:  # NaN or infinity: not JSON; send null, as structuredContent would
            converted.append(True)
            dumped = json.dumps(_finite(value), default=default, ensure_ascii=False)
        data = json.loads(dumped) if converted else value
        if spec.signature.output_schema is not None:
            _check_output(spec, data)
        if text is None:
            text = dumped
        return data, text, advice, extra

    # ---------------------------------------------------------------- resources
    def _find_resource(self, uri: str) -> tuple[Any, dict[str, Any]]:
        spec = self.registry.resources.get(uri)
        if spec is not None:
            return spec, {}
        for tmpl in self.registry.templates.values():
            match = tmpl.matcher.match(uri)
            if match is not None:
                return tmpl, dict(match)
        scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
        owner = self.registry.schemes.get(scheme)
        if owner:
            forms = sorted([t for t, s in self.registry.templates.items() if s.plugin == owner]
                           + [u for u, s in self.registry.resources.items() if s.plugin == owner])
            raise NotFound(f"no resource matches {uri!r}", f"{owner} serves: {', '.join(forms)}.")
        schemes = ", ".join(f"{s}://" for s in sorted(self.registry.schemes)) or "none"
        raise NotFound(f"no resource matches {uri!r} (unknown scheme {scheme!r})", f"Known schemes: {schemes}. Call resources/list or resources/templates/list.")

    async def read_resource(
        self, uri: str, *, session: Any = None, request_id: Any = None, exchange: Any = None
    ) -> list[dict[str, Any]]:
        """Read ``uri``; returns ``[{"uri", "mime_type", "text"|"blob"}]``. Raises :class:`PlexorError` subclasses."""
        import anyio

        spec, variables = self._find_resource(uri)
        rec = self.records[spec.plugin]
        await self._gate(rec, spec.ready_required)
        ctx = Context(self, rec, request_id=request_id, session=session, name=uri, exchange=exchange)
        for pname in context_params(spec.reader):
            variables[pname] = ctx
        self._enter()
        try:
            if spec.kind == "async":
                value = await spec.reader(**variables)
            else:
                value = await anyio.to_thread.run_sync(lambda: spec.reader(**variables))
        except PlexorError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.explain(exc, {"plugin": spec.plugin, "uri": uri, "request_id": request_id}) from exc
        finally:
            self._leave()
        if isinstance(value, bytes):
            import base64

            return [{"uri": uri, "mime_type": spec.mime_type, "blob": base64.b64encode(value).decode()}]
        if isinstance(value, str):
            return [{"uri": uri, "mime_type": spec.mime_type, "text": value}]
        return [{"uri": uri, "mime_type": spec.mime_type, "text": json.dumps(to_json(value), ensure_ascii=False)}]

    async def list_resources(self) -> list[dict[str, Any]]:
        """Fixed resources plus what each plugin's lister says exists now (a failing lister is skipped and logged)."""
        import anyio

        out = [{"uri": s.uri, "name": s.name, "description": s.description, "mime_type": s.mime_type}
               for s in self.registry.resources.values() if self.records[s.plugin].state in (State.READY, State.STARTING)]
        for plugin, lister in list(self.registry.listers):
            rec = self.records[plugin]
            if rec.state != State.READY:
                continue
            try:
                args = (Context(self, rec, name="resources/list"),) if context_params(lister) else ()
                if inspect.iscoroutinefunction(lister):
                    items = await lister(*args)
                else:
                    items = await anyio.to_thread.run_sync(_call_list, lister, args)
                for item in items:
                    out.append({"mime_type": "application/json", **item})
            except Exception as exc:  # noqa: BLE001
                self.log.error("resource_lister_failed", plugin=plugin, error=f"{type(exc).__name__}: {exc}")
        return out

    # ------------------------------------------------------------------ prompts
    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, *, session: Any = None, request_id: Any = None,
        exchange: Any = None,
    ) -> tuple[str, list[dict[str, Any]]]:
        """Render a prompt: ``(description, [{"role", "text"}])``."""
        import anyio

        spec = self.registry.prompts.get(name) or self.registry.prompts.get(name.replace(".", self.separator, 1))
        if spec is None:
            from plexor.guidance import suggest

            near = suggest(name, self.registry.prompts)
            raise NotFound(f"unknown prompt {name!r}", ("Did you mean " + " or ".join(map(repr, near)) + "? " if near else "")
                           + f"Prompts: {', '.join(sorted(self.registry.prompts)) or 'none'}.")
        rec = self.records[spec.plugin]
        await self._gate(rec, True)
        values = spec.signature.validate(arguments)
        for p in spec.signature.context_params:
            values[p] = Context(self, rec, name=name, session=session, request_id=request_id, exchange=exchange)
        try:
            if spec.kind == "async":
                value = await spec.func(**values)
            else:
                value = await anyio.to_thread.run_sync(lambda: spec.func(**values))
        except PlexorError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.explain(exc, {"plugin": spec.plugin, "prompt": name}) from exc
        if isinstance(value, str):
            messages = [{"role": "user", "text": value}]
        else:
            messages = [m if isinstance(m, dict) else {"role": "user", "text": str(m)} for m in value]
        return spec.description, messages

    async def complete(self, ref_uri: str, argument: str, value: str) -> tuple[list[str], bool]:
        """Completions for a template variable (``completion/complete``): ``(values, has_more)``.

        At most 100 values are returned; ``has_more`` says the function offered more.
        A sync function runs in a worker thread, like readers and tools.
        """
        import anyio

        tmpl = self.registry.templates.get(ref_uri)
        if tmpl is None or argument not in tmpl.complete:
            return [], False
        func = tmpl.complete[argument]
        kwargs = {p: Context(self, self.records[tmpl.plugin], name=ref_uri) for p in context_params(func)}
        if tmpl.ready_required and self.records[tmpl.plugin].state != State.READY:
            return [], False
        if inspect.iscoroutinefunction(func):
            result = await func(value, **kwargs)
        else:
            result = await anyio.to_thread.run_sync(lambda: list(func(value, **kwargs)))
        values = [str(v) for v in list(result)[:101]]
        return values[:100], len(values) > 100


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


_BLOCKS = {"text": ("text",), "image": ("data", "mimeType"), "audio": ("data", "mimeType"),
           "resource": ("resource",), "resource_link": ("uri", "name")}


def _check_blocks(spec: ToolSpec, blocks: list[Any]) -> list[dict[str, Any]]:
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _BLOCKS or any(k not in block for k in _BLOCKS[kind]):
            raise PluginError(
                f"{spec.name} returned an invalid content block: {str(block)[:120]}",
                f"This is a bug in the plugin {spec.plugin!r}: use plexor.image(), plexor.audio() or "
                "plexor.embedded_resource(), or an MCP content-block dict.",
            )
    return list(blocks)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _check_output(spec: ToolSpec, data: Any) -> None:
    """Refuse a result that breaks the tool's declared output schema (clients would reject it)."""
    validator = spec._output_validator
    if validator is None:
        from jsonschema import validators

        cls = validators.validator_for(spec.signature.output_schema)
        validator = spec._output_validator = cls(spec.signature.output_schema)
    error = next(iter(validator.iter_errors(data)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the result"
        raise PluginError(
            f"{spec.name} returned data that does not match its declared output schema ({where}: {error.message})",
            f"This is a bug in the plugin {spec.plugin!r}; nothing was sent. Report it to the plugin's author.",
        )


def _call_list(func: Callable[..., Any], args: tuple[Any, ...]) -> list[Any]:
    return list(func(*args))


def _merge(into: dict[str, Any], part: dict[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, list) and isinstance(into.get(key), list):
            into[key].extend(value)
        else:
            into[key] = value


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "untyped"
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__qualname__", None) and f"{annotation.__module__}.{annotation.__qualname__}" or repr(annotation)


def _escapes(exc: BaseException, exchange: Any) -> bool:
    """Whether ``exc`` must leave call_tool for the server to answer (see its docstring)."""
    from plexor.asking import AskError, InputRequired

    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:  # asked inside a task group
        exc = exc.exceptions[0]
    return isinstance(exc, InputRequired) or (isinstance(exc, AskError) and exchange is not None and exchange.modern)


def _short_id() -> str:
    return uuid.uuid4().hex[:12]


def _version() -> str:
    from plexor import __version__

    return __version__

