"""What the kernel's parts share: its settings, plugin records, registry, pluggy manager and listeners.

:class:`KernelBase` is the common ground of :mod:`plexor.core.loader` (loading),
:mod:`plexor.core.pipeline` (requests) and :mod:`plexor.core.kernel` (the lifecycle),
which :class:`plexor.core.kernel.Kernel` combines. It also calls hooks: always one
plugin's implementation at a time, never pluggy's combined call.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from plexor.core.config import Paths, paths
from plexor.core.records import PluginRecord, State, _Machine
from plexor.core.registry import Registry
from plexor.core.specs import MethodSpec
from plexor.errors import ConfigError, PlexorError
from plexor.handle import Gauges

if TYPE_CHECKING:  # pragma: no cover
    import anyio
    import pluggy
    from mcp.server.session import ServerSession
    from mcp.shared.message import CloseSSEStreamCallback
    from mcp.types import ProgressToken, RequestId

    from plexor.exchange import Exchange, Session

T = TypeVar("T")
N = TypeVar("N", int, float)

__all__ = ["KernelBase", "Observer", "Request"]


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One request as it enters the pipeline: what it is for, and the client channel it came on."""

    kind: str  # "tool", "uri", "prompt", "completion" or "listing": also the key naming it in error contexts
    name: str
    session: ServerSession | Session | None = None  # a task's run has a stand-in (plexor.features.tasks)
    request_id: RequestId | None = None
    progress_token: ProgressToken | None = None
    close_sse_stream: CloseSSEStreamCallback | None = None
    exchange: Exchange | None = None
    chosen: dict[str, str] | None = None  # completion: the template variables the client already filled in


class Observer(Protocol):
    """What the pipeline asks of ``kernel.telemetry`` (``plexor.features.telemetry.Telemetry``, above this layer)."""

    async def observe(self, run: Callable[..., Awaitable[object]], req: Request, plugin: str, *args: object) -> object: ...

    def refused(self, req: Request, plugin: str | None, exc: BaseException) -> None: ...


class KernelBase(_Machine):
    """The kernel's state; see :class:`plexor.core.kernel.Kernel` for the parameters."""

    def __init__(
        self,
        plugins: Iterable[tuple[str, object]] = (),
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
        self._config: dict[str, object] = {}
        self._inflight = 0
        self._idle: anyio.Event | None = None
        self._calls: set[anyio.CancelScope] = set()  # the calls in flight, which a drain stops past its grace period
        self._listeners: list[Callable[[str], object]] = []
        self._drain_listeners: list[Callable[[], object]] = []
        #: The protocol methods plugins added (``plexor_protocol_methods``), by method: the authorization
        #: layer decides them as it decides tools (``plexor.features.auth.decide``).
        self.protocol_methods: dict[str, MethodSpec] = {}
        self._kept: dict[type, object] = {}  # keep(): the features' per-kernel objects, by type
        self._keeping = threading.RLock()
        from plexor.notify import Notifier

        # every outbound change notification goes through it; a server may give it a shared backend (plexor.notify)
        self.notifier = Notifier()
        self._pm: pluggy.PluginManager | None = None
        # set when PLEXOR_OTEL is on (plexor.features.telemetry.for_kernel); off, Pipeline.run only checks it
        self.telemetry: Observer | None = None
        #: Every gauge the plugins declared (PluginHandle.gauge); telemetry follows them.
        self.gauges = Gauges()
        from plexor.log import configure, get_logger

        if "PLEXOR_LOG_LEVEL" in self.environ:
            configure(self.environ["PLEXOR_LOG_LEVEL"])
        self.log = get_logger("plexor")

    def config_tables(self) -> dict[str, object]:
        """The tables of ``plexor.toml`` as read when loading (empty before): e.g. the kernel database URL."""
        return self._config

    @property
    def pm(self) -> pluggy.PluginManager:
        """This kernel's pluggy manager: made per kernel (a factory, not an import-time global)."""
        if self._pm is None:
            import pluggy

            self._pm = pluggy.PluginManager("plexor")
            for specs in self.hookspecs():
                self._pm.add_hookspecs(specs)
        return self._pm

    def hookspecs(self) -> tuple[ModuleType, ...]:
        """The hookspec modules the plugin manager is made with: the loader names them, since the server-extension
        specs (plexor.extending) name this class and so cannot be imported from here."""
        raise NotImplementedError

    # -- hooks, one plugin at a time ----------------------------------------------------
    def call_hook(self, rec: PluginRecord, hook: str, **kwargs: object) -> object:
        """Call one plugin's implementation of ``hook`` (never the combined pluggy call)."""
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            if impl.plugin_name == rec.name:
                return impl.function(*[kwargs[a] for a in impl.argnames])
        return None

    def has_hook(self, rec: PluginRecord, hook: str) -> bool:
        return any(i.plugin_name == rec.name for i in getattr(self.pm.hook, hook).get_hookimpls())

    async def _run_hook(self, rec: PluginRecord, hook: str, timeout: float) -> None:
        """Run ``plexor_startup``/``plexor_shutdown`` within ``timeout`` seconds (``TimeoutError`` past it).

        A sync implementation runs in a worker thread, so one that blocks never freezes the event
        loop (``ping`` and every other plugin keep answering); if it hangs it is abandoned there.
        """
        import anyio

        impls = [i for i in getattr(self.pm.hook, hook).get_hookimpls() if i.plugin_name == rec.name]
        if not impls:
            return
        with anyio.fail_after(timeout):
            if inspect.iscoroutinefunction(impls[0].function):
                result = self.call_hook(rec, hook, plugin=rec.handle)
            else:
                result = await anyio.to_thread.run_sync(lambda: self.call_hook(rec, hook, plugin=rec.handle),
                                                        abandon_on_cancel=True)
            if inspect.isawaitable(result):
                await result

    def plugin_guidance(self, rec: PluginRecord, exc: BaseException, context: Mapping[str, object]) -> PlexorError | str | None:
        """The plugin's own ``plexor_error_guidance`` answer (str, PlexorError or None); never raises."""
        if not self.has_hook(rec, "plexor_error_guidance"):
            return None
        try:
            advice = self.call_hook(rec, "plexor_error_guidance", exception=exc, context=dict(context))
        except Exception as hook_exc:  # noqa: BLE001
            self.log.error("error_guidance_failed", plugin=rec.name, error=str(hook_exc))
            return None
        if inspect.isawaitable(advice):
            if hasattr(advice, "close"):
                advice.close()
            self.log.error("error_guidance_async", plugin=rec.name, hint="plexor_error_guidance must be synchronous")
            return None
        if isinstance(advice, PlexorError) or (isinstance(advice, str) and advice.strip()):
            return advice
        return None

    # ----------------------------------------------------------------- listeners
    def move_to(self, new: State) -> None:
        super().move_to(new)
        if new == State.DRAINING:  # e.g. the server ends subscriptions/listen streams, so nothing holds the exit
            for cb in list(self._drain_listeners):
                try:
                    cb()
                except Exception:  # noqa: BLE001
                    self.log.debug("drain_listener_failed")

    def on_drain(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` when the kernel starts draining (on the thread that drains it)."""
        self._drain_listeners.append(callback)

    def on_change(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call ``callback(kind)`` when the set of tools/resources/prompts changes; returns an unsubscribe."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _notify(self, kind: str) -> None:
        """The ``kind`` list (``tools``, ``resources`` or ``prompts``) changed: tell listeners, then clients."""
        for cb in list(self._listeners):
            try:
                cb(kind)
            except Exception:  # noqa: BLE001
                self.log.debug("listener_failed", kind=kind)
        self.notifier.publish(f"{kind}/list_changed")

    def _plugin_moved(self, rec: PluginRecord, old: State, new: State) -> None:
        """A plugin became ready or failed (from any thread): announce the lists that changed.

        A starting plugin's tools, prompts, templates and fixed resources are listed already (a
        call gets "still starting" guidance), so becoming ready adds only what its resource listers
        return; failing takes everything it offered away.
        """
        reg = rec.registry
        if new == State.READY and reg.listers:
            self._notify("resources")
        elif new == State.FAILED and old not in (State.CREATED, State.LOADING, State.DISABLED):
            for kind, offers in (("tools", reg.tools), ("resources", reg.resources or reg.listers or reg.templates),
                                 ("prompts", reg.prompts)):
                if offers:
                    self._notify(kind)

    def keep(self, kind: type[T], make: Callable[[], T]) -> T:
        """This kernel's one ``kind`` object, made by ``make()`` on first use (thread-safe): where a feature
        keeps its per-kernel state (the task runner, the kernel's database), not in a table keyed by kernels."""
        with self._keeping:
            if kind not in self._kept:
                self._kept[kind] = make()
            return cast(T, self._kept[kind])

    def kept(self, kind: type[T]) -> T | None:
        """This kernel's ``kind`` object if :meth:`keep` made one, else ``None``."""
        return cast("T | None", self._kept.get(kind))

    @property
    def inflight(self) -> int:
        """Requests in the pipeline now."""
        return self._inflight

    # ------------------------------------------------------------------- health
    def health(self) -> dict[str, object]:
        from plexor.schema import schema_hash
        from plexor.version import __version__

        return {
            "kernel": {"state": self.state.value, "version": __version__, "pid": self.pid,
                       "uptime_seconds": round(time.time() - self.started_at, 3), "inflight": self._inflight},
            "pid": self.pid, "version": __version__,
            "schema_hash": schema_hash(sorted((t.name, t.schema_hash) for t in self.registry.tools.values())),
            "plugins": [r.describe() for r in sorted(self.records.values(), key=lambda r: r.name)],
        } | ({"unknown_plugins": unknown} if (unknown := getattr(self, "unknown_plugins", [])) else {})


def _env_number(environ: Mapping[str, str], name: str, default: N, kind: Callable[[str], N], minimum: float) -> N:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value: N | None = kind(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ConfigError(f"{name}={raw!r} is not a valid value", f"Set {name} to a number of at least {minimum}, or unset it.")
    return value
