"""The plugin handle: the one kernel object a plugin touches.

Hooks (``plexor_startup``, ``plexor_shutdown``, ``plexor_register_commands``),
the per-call :class:`plexor.Context` (``ctx.plugin``) and plugin CLI commands
all receive the same :class:`PluginHandle`. It carries what the kernel resolved
for the plugin (settings, database, data directory, a logger) and the services
the plugin opened, and it reports warm-up progress. Everything behind it (the
kernel, its records, the registry) may change between releases; the handle is
the boundary and keeps its shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, SupportsFloat, TypeVar, cast

from plexor.errors import NotReady

if TYPE_CHECKING:  # pragma: no cover - typing only
    from enum import StrEnum

    from plexor.core.registry import Registry
    from plexor.log import Logger
    from plexor.notify import Notifier
    from plexor.settings import Settings

__all__ = ["PluginHandle"]

T = TypeVar("T")



class Record(Protocol):
    """What a handle reads of its plugin's record (:class:`plexor.core.records.PluginRecord`, which holds the
    handle: the record's module names this one, not the other way round)."""

    name: str
    namespace: str
    error: str | None
    progress: float | None
    progress_message: str | None
    settings: Settings | None
    database: Any  # a peewee Database (untyped), as PluginHandle.database gives it
    registry: Registry
    data_dir: Path

    @property
    def state(self) -> StrEnum: ...

    def warming(self, fraction: float | None = None, message: str | None = None) -> None: ...

    def warmed(self) -> None: ...


class PluginHandle:
    """A plugin's view of the kernel: its settings, database, logger, data directory and services.

    Services are keyed by type, so reading one back is typed::

        @hookimpl
        def plexor_startup(plugin: PluginHandle) -> None:
            plugin.provide(Store(plugin.database, plugin.settings))

        def tree_get(ctx: Context, tree_id: str) -> dict:
            return ctx.service(Store).get(tree_id)

    While a service is missing (the plugin is still starting, or failed),
    :meth:`service` raises :class:`plexor.NotReady` with guidance built from the
    plugin's state and warm-up progress, so no plugin writes that check itself.
    """

    __slots__ = ("_record", "_services", "_closers", "_log", "_open_database", "_gauges", "_notifier")

    def __init__(self, record: Record, open_database: Callable[[], object] | None = None, *,
                 gauges: Gauges | None = None, notifier: Notifier | None = None) -> None:
        self._record = record
        self._services: dict[type, object] = {}
        self._closers: dict[type, Callable[[], object]] = {}
        self._log: Logger | None = None
        self._open_database = open_database
        self._gauges = gauges if gauges is not None else Gauges()  # the kernel's: telemetry follows them
        self._notifier = notifier  # the kernel's; None in a handle made outside one

    def __repr__(self) -> str:
        return f"<PluginHandle {self._record.name} {self._record.state.value}>"

    # -- what the kernel resolved ------------------------------------------------
    @property
    def name(self) -> str:
        """The plugin's name (its entry-point name, e.g. ``folder-search``)."""
        return self._record.name

    @property
    def namespace(self) -> str:
        """The prefix of the plugin's tool names (e.g. ``folder_search``)."""
        return self._record.namespace

    @property
    def state(self) -> str:
        """``loading``, ``starting``, ``ready``, ``draining``, ``stopped`` or ``failed``."""
        return self._record.state.value

    @property
    def settings(self) -> Settings:
        """The plugin's validated settings (``plexor.toml`` table and ``PLEXOR_<PLUGIN>_<KEY>``)."""
        settings = self._record.settings
        if settings is None:
            raise NotReady(f"the settings of {self.name!r} are not resolved yet",
                           "Read settings in plexor_startup or later, not at import time.")
        return settings

    @property
    def database(self) -> Any:
        """The plugin's peewee database, or ``None`` when it registered no models.

        Served, it is open before ``plexor_startup`` runs. In a CLI command it
        is opened (and migrated) on first use and closed when the command ends.
        """
        if self._record.database is None and self._open_database is not None and self._record.registry.models:
            self._record.database = self._open_database()
        return self._record.database

    @property
    def data_dir(self) -> Path:
        """The plugin's own data directory (created on first use by the kernel's storage)."""
        return Path(self._record.data_dir)

    @property
    def log(self) -> Logger:
        """A structlog logger bound to ``plugin=<name>``; JSON lines on stderr."""
        if self._log is None:
            from plexor.log import get_logger

            self._log = get_logger("plexor").bind(plugin=self.name)
        return self._log

    # -- services ---------------------------------------------------------------
    def provide(self, service: T, *, as_type: type[T] | None = None, close: Callable[[], object] | None = None) -> T:
        """Make ``service`` available to tools as ``ctx.service(type(service))``; returns it.

        :param close: called (and awaited, if it returns an awaitable) when the plugin shuts down,
            after ``plexor_shutdown`` and before the database closes, last provided first; so a
            plugin whose shutdown is "stop what I started" needs no shutdown hook.
        """
        kind = as_type or type(service)
        self._services[kind] = service
        if close is not None:
            self._closers[kind] = close
        return service

    def service(self, kind: type[T]) -> T:
        """The service of type ``kind``; :class:`plexor.NotReady` with guidance while there is none."""
        try:
            return cast(T, self._services[kind])  # provided as a ``kind`` (provide() is typed so)
        except KeyError:
            pass
        for registered, value in self._services.items():  # a subclass provided for a base class
            if issubclass(registered, kind):
                return cast(T, value)
        raise self.not_ready()

    def withdraw(self, kind: type[T]) -> T | None:
        """Remove and return the service of type ``kind`` (``None`` when there is none); its ``close``
        is then yours to call."""
        self._closers.pop(kind, None)
        return cast("T | None", self._services.pop(kind, None))

    async def close_services(self) -> None:
        """Run the ``close`` callbacks of what is still provided, newest first (the kernel, at shutdown)."""
        import inspect

        import anyio

        for kind in reversed(list(self._closers)):
            close = self._closers.pop(kind)
            self._services.pop(kind, None)
            if inspect.iscoroutinefunction(close):
                await close()
                continue
            result = await anyio.to_thread.run_sync(close, abandon_on_cancel=True)  # a sync stop may join threads
            if inspect.isawaitable(result):
                await result

    def not_ready(self) -> NotReady:
        """The guidance error for "this plugin cannot serve yet", from its state and progress."""
        rec = self._record
        if rec.state.value == "failed":
            return NotReady(f"the plugin {rec.name!r} failed: {rec.error}",
                            "Fix the cause (see `plexor plugins`) and restart the server.")
        if rec.state.value in ("draining", "stopped"):
            return NotReady(f"{rec.name} is shutting down", "Reconnect in a moment; a new server process will answer.")
        pct = f", {round(rec.progress * 100)}% done" if rec.progress is not None else ""
        return NotReady(f"{rec.name} is {rec.progress_message or 'still starting'}{pct}", "Retry in a few seconds.",
                        data={"plugin": rec.name, "progress": rec.progress})

    # -- change notifications ---------------------------------------------------------
    def resource_updated(self, uri: str) -> None:
        """Tell subscribed clients that the resource ``uri`` changed (``notifications/resources/updated``).

        Call it after the change is stored (a tree got a node, a document was re-indexed); clients
        that subscribed to ``uri`` (``resources/subscribe``, or ``subscriptions/listen`` from
        2026-07-28 on) read it again. Thread-safe and non-blocking: a sync tool running in a worker
        thread calls it directly. Cheap when nobody subscribed; a no-op outside a server.
        """
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"resource_updated needs the resource's URI as a non-empty string, not {uri!r}")
        if self._notifier is not None:
            self._notifier.publish("resources/updated", {"uri": uri})

    def offer(self, name: str, available: bool = True) -> None:
        """Offer or withdraw one of this plugin's tools or prompts while serving.

        A withdrawn tool or prompt is left out of ``tools/list``/``prompts/list`` and a call to it
        gets guidance to list again; offering it again brings it back. Clients are told
        (``notifications/tools/list_changed`` or ``prompts/list_changed``). Use it when what the
        plugin can do changes at run time (a backend it needs went away, a feature was switched
        off), rather than answering every call with an error. ``name`` is the tool's or prompt's
        full name (``arbor_tree_render``) or its method (``tree_render``). Thread-safe.
        """
        reg = self._record.registry
        ns = self._record.namespace
        found = False
        for kind, specs in (("tools", reg.tools), ("prompts", reg.prompts)):
            spec = specs.get(name) or next((s for s in specs.values() if s.name in (f"{ns}_{name}", f"{ns}-{name}")),
                                           None)
            if spec is None:
                continue
            found = True
            if spec.withdrawn == (not available):
                continue
            spec.withdrawn = not available
            if self._notifier is not None:
                self._notifier.publish(f"{kind}/list_changed")
        if not found:
            known = sorted([*reg.tools, *reg.prompts])
            raise ValueError(f"{self.name} has no tool or prompt named {name!r}; it has {', '.join(known) or 'none'}")

    def resource_list_changed(self) -> None:
        """Tell clients that the set of resources this plugin lists changed (one appeared or went away).

        Sends ``notifications/resources/list_changed``; clients list again. Thread-safe, non-blocking.
        A plugin becoming ready or failing needs no call: the kernel announces that itself.
        """
        if self._notifier is not None:
            self._notifier.publish("resources/list_changed")

    # -- metrics --------------------------------------------------------------------
    def gauge(self, name: str, description: str,
              read: Callable[[], GaugeValue], *,
              labels: Sequence[str] = (), unit: str = "1") -> None:
        """Declare a gauge: ``read()`` is called only when metrics are collected (a ``/metrics`` scrape,
        an OTLP export), never per request, and never at all when telemetry is off.

        It is exported as ``plexor.<namespace>.<name>`` (Prometheus: dots as underscores)::

            plugin.gauge("index.documents", "Documents indexed, per folder.",
                         lambda: {f.name: f.count() for f in folders}, labels=["folder"])

        :param read: returns a number; with ``labels``, a mapping from label values (a tuple, or a
            str for one label) to numbers. Keep it quick and thread-safe; if it raises, the gauge is
            left out of that collection and the error is logged.
        :param labels: label (attribute) names, lower-case; keep their values few (no ids, no paths
            of single files).
        :param unit: the OpenTelemetry unit (``"1"``, ``"{document}"``, ``"By"``).
        """
        gauge = PluginGauge(self.namespace, name, description, read, tuple(labels), unit)
        if gauge.otel_name in self._gauges:
            raise ValueError(f"{self.name} declares the gauge {name!r} twice; give each gauge its own name")
        self._gauges.add(gauge)

    # -- warm-up ------------------------------------------------------------------
    def warming(self, fraction: float | None = None, message: str | None = None) -> None:
        """Report background warm-up (0..1); the plugin stays ``starting`` until :meth:`warmed`."""
        self._record.warming(fraction, message)

    def warmed(self) -> None:
        """Warm-up finished: the plugin is ``ready``."""
        self._record.warmed()


#: What a gauge's ``read()`` returns: a number, or (with labels) numbers by label values.
GaugeValue = float | Mapping[str, float] | Mapping[tuple[str, ...], float]


def _number(value: object) -> float:
    if isinstance(value, SupportsFloat | str):  # what float() takes (a numpy number too)
        return float(value)
    raise TypeError(f"{value!r} is not a number")


class PluginGauge:
    """A gauge a plugin declared with :meth:`plexor.PluginHandle.gauge`: what to call it and how to read it.

    ``read()`` returns a number, or (with ``labels``) a mapping from label values (a tuple, or a str
    for one label) to numbers. It runs only when metrics are collected, never per request.
    """

    __slots__ = ("otel_name", "prometheus_name", "description", "read", "labels", "unit")

    def __init__(self, namespace: str, name: str, description: str, read: Callable[[], GaugeValue],
                 labels: tuple[str, ...], unit: str) -> None:
        import re

        if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", name):
            raise ValueError(f"gauge name {name!r} is not lower-case words joined by '.' or '_' "
                             "(e.g. 'index.documents'); the plugin's namespace is prefixed for you")
        for label in labels:
            if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", label) or label.startswith("__"):
                raise ValueError(f"gauge {name!r}: label {label!r} is not lower-case words joined by '.' or '_'")
        if not callable(read):
            raise ValueError(f"gauge {name!r}: read must be a function that returns the value, got {read!r}")
        self.otel_name = f"plexor.{namespace}.{name}"
        self.prometheus_name = self.otel_name.replace(".", "_")
        self.description, self.read, self.labels, self.unit = description, read, labels, unit

    def values(self, log: Logger) -> list[tuple[dict[str, str], float]] | None:
        """``(labels, value)`` pairs from ``read()``; ``None`` (and a log line) when reading fails."""
        try:
            found = self.read()
            if not self.labels:
                return [({}, _number(found))]
            if not isinstance(found, Mapping):
                raise TypeError(f"read() returned {found!r}, not a mapping from label values to numbers")
            out = []
            for key, value in dict(found).items():
                values = (key,) if isinstance(key, str) else tuple(key)
                if len(values) != len(self.labels):
                    raise ValueError(f"{values!r} does not give one value for each label of {self.labels!r}")
                out.append(({label: str(v) for label, v in zip(self.labels, values, strict=True)}, _number(value)))
            return out
        except Exception as exc:  # noqa: BLE001 - a plugin's broken gauge must not break the scrape
            log.warning("gauge_unreadable", gauge=self.otel_name, error=f"{type(exc).__name__}: {exc}")
            return None


class Gauges:
    r"""The gauges the plugins of one kernel declared (``kernel.gauges``), read only when metrics are collected.

    Whoever exports them (telemetry, when switched on) :meth:`follow`\ s them: it hears of each one,
    those declared before it was there included.
    """

    def __init__(self) -> None:
        self._declared: dict[str, PluginGauge] = {}  # by exported name
        self._followers: list[Callable[[PluginGauge], None]] = []

    def __contains__(self, otel_name: object) -> bool:
        return otel_name in self._declared

    def add(self, gauge: PluginGauge) -> None:
        self._declared[gauge.otel_name] = gauge
        for follower in list(self._followers):
            follower(gauge)

    def all(self) -> list[PluginGauge]:
        """Every gauge, in the order declared."""
        return list(self._declared.values())

    def follow(self, declared: Callable[[PluginGauge], None]) -> None:
        """Call ``declared(gauge)`` for every gauge declared so far and each declared from now on."""
        self._followers.append(declared)
        for gauge in self.all():
            declared(gauge)
