"""Loading plugins: discovery, import, hook checking, settings, registration and clash refusal.

Every plugin is loaded on its own: an import error, a misspelt hook, a hook that
raises, an invalid registration or a name clash fails *that* plugin with the
reason, and the others carry on. Each hook implementation is called directly,
never as one combined pluggy call, so every registration knows its plugin.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import traceback
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Self

from plexor.apps import check_links
from plexor.core.base import KernelBase
from plexor.core.config import check_log_level, load_config_file, resolve_settings, unknown_names
from plexor.core.records import PluginRecord, State
from plexor.core.registry import (
    ModelRegistrar,
    PromptRegistrar,
    Registry,
    ResourceRegistrar,
    TemplateRegistrar,
    ToolRegistrar,
)
from plexor.core.specs import ToolSpec
from plexor.errors import ConfigError, PlexorError, PluginError
from plexor.extending import FEATURES
from plexor.hints import icons_of
from plexor.settings import ConfigSpec

if TYPE_CHECKING:  # pragma: no cover
    from peewee import Database

__all__ = ["BUILTIN", "Loader", "plugin_name_problems"]

BUILTIN = "plexor"


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _name_problem(var: str, name: str, installed: list[str]) -> str:
    near = difflib.get_close_matches(name, installed, n=1)
    return (f"{var} names {name!r}, which is not installed"
            + (f"; did you mean {near[0]!r}?" if near else f"; installed: {', '.join(sorted(installed))}"))


def plugin_name_problems(environ: Mapping[str, str]) -> list[str]:
    """Each PLEXOR_PLUGINS/PLEXOR_DISABLE name no installed plugin has, as a sentence with a did-you-mean.

    Reads the ``plexor`` entry-point names only (nothing is imported), so ``plexor serve`` can say it
    before the kernel loads (under stdio that is after the handshake).
    """
    variables = [(var, _csv(environ.get(var)) or []) for var in ("PLEXOR_PLUGINS", "PLEXOR_DISABLE")]
    if not any(names for _, names in variables):
        return []
    from importlib.metadata import entry_points

    installed = sorted({BUILTIN, *FEATURES, *(ep.name for ep in entry_points(group="plexor"))})
    return [_name_problem(var, name, installed) for var, names in variables for name in names if name not in installed]


class Loader(KernelBase):
    """Loading plugins: the part of :class:`plexor.core.kernel.Kernel` that runs in state ``loading``."""

    def load(self) -> Self:
        """Discover, import and register every plugin (state ``loading``); never raises for one plugin."""
        self.move_to(State.LOADING)
        self.warnings: list[str] = []  # for people: the CLI prints them as plain lines
        self.unknown_plugins: list[str] = []  # PLEXOR_PLUGINS/PLEXOR_DISABLE names nothing installed has
        self._keys: dict[str, list[str] | None] = {}
        try:
            check_log_level(self.environ)
            self._config = load_config_file(self.paths.config_file)
        except ConfigError as exc:
            self.error = exc.render()
            self.move_to(State.FAILED)
            raise
        only = _csv(self.environ.get("PLEXOR_PLUGINS"))
        blocked = set(_csv(self.environ.get("PLEXOR_DISABLE")) or [])
        seen: dict[str, PluginRecord] = {}
        for rec in self._candidates():
            rec.data_dir = self.paths.plugin_data_dir(rec.name)
            self._attach_handle(rec)
            if rec.name in seen:
                rec.move_to(State.FAILED)
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
            # PLEXOR_PLUGINS chooses content plugins; the built-in features go only by PLEXOR_DISABLE
            allowed = rec.name == BUILTIN or rec.name in FEATURES or only is None or rec.name in only
            if rec.name == BUILTIN and BUILTIN in blocked:
                self.log.warning("builtin_not_disabled", hint="the built-in plugin 'plexor' (plexor_health) is "
                                 "part of the kernel and cannot be disabled; PLEXOR_DISABLE=plexor is ignored")
            if (rec.name in blocked and rec.name != BUILTIN) or not allowed:
                rec.move_to(State.DISABLED)
                continue
            self._load_bounded(rec)
        self._note_unknown_names(only or [], sorted(blocked))
        known = {rec.name: self._keys.get(rec.name) for rec in self.records.values()}
        for warning in unknown_names(self.environ, self._config, self.paths.config_file, known):
            self.warnings.append(warning)
            self.log.warning("config_warning", warning=warning)  # a served kernel's only channel
        for rec in self.records.values():
            self.warnings.extend(rec.settings.warnings if rec.settings else [])
        return self

    def _candidates(self) -> list[PluginRecord]:
        """Every plugin to consider, in loading order: the built-in ones, those given in-process, the installed ones."""
        from plexor.version import __version__

        candidates: list[PluginRecord] = []
        if self._builtin:
            candidates.append(PluginRecord(BUILTIN, "plexor", __version__, entry_point="plexor.builtin"))
            candidates.extend(PluginRecord(name, "plexor", __version__, entry_point=module)
                              for name, module in FEATURES.items())
        for name, obj in self._extra:
            candidates.append(PluginRecord(name, getattr(obj, "__distribution__", "(in-process)"),
                                           getattr(obj, "__version__", "?"), module=obj))
        if self._load_entry_points:
            candidates.extend(self._discover())
        return candidates

    def _note_unknown_names(self, only: list[str], blocked: list[str]) -> None:
        """Each PLEXOR_PLUGINS/PLEXOR_DISABLE name no plugin has, kept with its did-you-mean and logged."""
        for var, names in (("PLEXOR_PLUGINS", only), ("PLEXOR_DISABLE", blocked)):
            for name in names:
                if name not in self.records:
                    hint = _name_problem(var, name, list(self.records))
                    self.unknown_plugins.append(hint)
                    self.log.warning("plugin_not_installed", plugin=name, variable=var, hint=hint)

    def hookspecs(self) -> tuple[ModuleType, ...]:
        """The content hooks (:mod:`plexor.hookspecs`) and the server-extension hooks (:mod:`plexor.extending`)."""
        from plexor import extending, hookspecs

        return (hookspecs, extending)

    def register_features(self) -> None:
        """Register the built-in plugin and the server features not disabled with pluggy now.

        A server is built before its plugins load under stdio (the handshake goes out first), and
        its capabilities, methods and request layers come from these plugins' server-extension
        hooks (:mod:`plexor.extending`); loading them later finds them registered already.
        """
        import importlib

        if not self._builtin:
            return
        blocked = set(_csv(self.environ.get("PLEXOR_DISABLE")) or [])
        for name, module in (("plexor", "plexor.builtin"), *FEATURES.items()):
            if name in blocked and name != BUILTIN or self.pm.get_plugin(name) is not None:
                continue
            self.pm.register(importlib.import_module(module), name=name)

    def _attach_handle(self, rec: PluginRecord) -> None:
        from plexor.handle import PluginHandle

        def open_database() -> Database:  # for CLI commands: the served kernel opens it before startup
            from plexor.core.storage import migrate, open_database

            url = rec.settings.get("database_url") if rec.settings else None
            db = open_database(rec.name, rec.data_dir, url)
            migrate(db, rec.name, rec.registry.models, rec.registry.migrations)
            return db

        # gauges: telemetry follows the kernel's; resource_updated() publishes through the kernel's notifier
        rec.handle = PluginHandle(rec, open_database, gauges=self.gauges, notifier=self.notifier)
        rec.on_move = self._plugin_moved

    def _discover(self) -> list[PluginRecord]:
        from importlib.metadata import entry_points

        found = []
        for ep in sorted(entry_points(group="plexor"), key=lambda e: (e.dist.name if e.dist else "", e.name)):
            dist = ep.dist
            found.append(PluginRecord(ep.name, dist.name if dist else "?", dist.version if dist else "?", entry_point=ep))
        return found

    def _load_bounded(self, rec: PluginRecord) -> None:
        """Load one plugin in a thread of its own; a hang at import or in a register hook fails it after
        PLEXOR_START_WAIT seconds (1 at least) and the other plugins load on."""
        import threading

        worker = threading.Thread(target=self._load_one, args=(rec,), name=f"plexor-load-{rec.name}", daemon=True)
        worker.start()
        worker.join(max(self.start_wait, 1.0))
        if worker.is_alive():
            self.fail_plugin(rec, PluginError(
                f"importing or registering did not finish within {max(self.start_wait, 1.0):g} s (PLEXOR_START_WAIT)",
                "Something in the plugin's module or its register hooks waits forever (a network call, a lock?): "
                "move it into plexor_startup or a function that needs it, or raise PLEXOR_START_WAIT."), "loading")

    def _load_one(self, rec: PluginRecord) -> None:
        rec.move_to(State.LOADING)
        try:
            if rec.module is None:
                ep = rec.entry_point
                if isinstance(ep, str):
                    import importlib

                    rec.module = importlib.import_module(ep)
                else:
                    rec.module = ep.load()
            self._register_hooks(rec)
            rec.namespace = getattr(rec.module, "PLEXOR_NAMESPACE", None) or rec.name.replace("-", "_")
            rec.icons = icons_of(getattr(rec.module, "PLEXOR_ICON", None), f"plugin {rec.name!r}: PLEXOR_ICON")
            staged = Registry()
            spec = ConfigSpec(rec.name)
            self.call_hook(rec, "plexor_add_config", config=spec)
            self._keys[rec.name] = list(spec.settings) + ["database_url"]
            self.call_hook(rec, "plexor_register_models", register=ModelRegistrar(staged, rec.name))
            if staged.models and "database_url" not in spec.settings:
                spec.add("database_url", str, None, help="database URL (postgresql://...); default: a SQLite file")
            table = self._config.get(rec.name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"[{rec.name}] in {self.paths.config_file} must be a table",
                                  f"Write it as [{rec.name}] followed by key = value lines.")
            rec.settings = resolve_settings(spec, table, self.paths.config_file, rec.data_dir, self.environ)
            for warning in rec.settings.warnings:
                self.log.warning("config_warning", plugin=rec.name, warning=warning)
            s, ns, sep = rec.settings, rec.namespace, self.separator
            self.call_hook(rec, "plexor_register_tools", register=ToolRegistrar(staged, rec.name, ns, sep), settings=s)
            self.call_hook(rec, "plexor_register_resources", register=ResourceRegistrar(staged, rec.name), settings=s)
            self.call_hook(rec, "plexor_register_resource_templates", register=TemplateRegistrar(staged, rec.name), settings=s)
            self.call_hook(rec, "plexor_register_prompts", register=PromptRegistrar(staged, rec.name, ns, sep), settings=s)
            check_links(staged, rec.name, self.registry)
            self._refuse_clashes(rec, staged)
            if rec.state is not State.LOADING:  # given up on (it hung) while this thread was still working
                return
            rec.registry = staged
            self.registry.merge(staged)
        except Exception as exc:  # noqa: BLE001 - isolate the plugin, whatever it raised
            self.fail_plugin(rec, exc, "loading")
        except SystemExit as exc:  # a plugin calling sys.exit() at import must not stop the server
            self.fail_plugin(rec, RuntimeError(f"plugin called sys.exit({exc.code})"), "loading")

    def _register_hooks(self, rec: PluginRecord) -> None:
        """Register the module with pluggy; a hook name that matches no hookspec fails the plugin."""
        specs = sorted(name for name in dir(self.pm.hook) if name.startswith("plexor_"))
        for attr in dir(rec.module):
            if not attr.startswith("plexor_") or attr in specs or not callable(getattr(rec.module, attr, None)):
                continue
            near = difflib.get_close_matches(attr, specs, n=1, cutoff=0.6)
            raise PluginError(
                f"{attr} matches no Plexor hook" + (f"; did you mean {near[0]}?" if near else ""),
                f"Rename it{' to ' + near[0] if near else ''}, or give it a name without the plexor_ prefix. "
                f"Hooks: {', '.join(specs)}.",
            )
        if self.pm.get_plugin(rec.name) is rec.module:  # a built-in one, registered before loading
            return
        try:
            self.pm.register(rec.module, name=rec.name)
        except Exception as exc:  # pluggy's PluginValidationError: arguments the hookspec does not have
            raise PluginError(f"a hook of {rec.name} does not match its hookspec: {exc}",
                              "Compare its parameters with the hook's documentation (docs/authoring.md); "
                              "from 0.2 plexor_startup/plexor_shutdown take `plugin` (a PluginHandle).") from exc

    def _refuse_clashes(self, rec: PluginRecord, staged: Registry) -> None:
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

    def fail_plugin(self, rec: PluginRecord, exc: BaseException, phase: str) -> None:
        """Fail ``rec``'s plugin for ``exc`` in ``phase``: logged, unregistered, its registrations withdrawn."""
        text = exc.render() if isinstance(exc, PlexorError) else f"{type(exc).__name__}: {exc}"
        rec.failed_by_config = isinstance(exc, ConfigError)
        rec.fail(f"{phase} failed: {text}")
        self.log.error("plugin_failed", plugin=rec.name, phase=phase, error=text,
                       traceback="".join(traceback.format_exception(exc)) if not isinstance(exc, PlexorError) else None)
        if rec.module is not None and self.pm.is_registered(rec.module):
            with contextlib.suppress(Exception):  # best effort
                self.pm.unregister(rec.module)
        had_tools = any(t.plugin == rec.name for t in self.registry.tools.values())
        self.registry.remove_plugin(rec.name)
        if had_tools:
            self._notify("tools")

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


def _annotation_text(annotation: object) -> str:
    if annotation is inspect.Parameter.empty:
        return "untyped"
    if isinstance(annotation, str):
        return annotation
    qualname = getattr(annotation, "__qualname__", None)
    return f"{annotation.__module__}.{qualname}" if qualname else repr(annotation)
