"""The Arbor plugin's hooks (the ``plexor`` entry point).

This module imports only ``plexor`` and the standard library; peewee, the
store, the renderer and click are imported inside the hooks that need them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from plexor import ConfigError, PluginHandle, hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from plexor_arbor.store import Store

PLEXOR_NAMESPACE = "arbor"
NAME = "arbor"
PLEXOR_ICON = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCI+PHBhdGggZD0iTTExIDEzaDJ2OWgtMnoiIGZpbGw9IiM3YTUyMzAiLz48Y2lyY2xlIGN4PSIxMiIgY3k9IjgiIHI9IjYiIGZpbGw9IiMyZThiNTciLz48Y2lyY2xlIGN4PSI3IiBjeT0iMTIiIHI9IjQiIGZpbGw9IiMzY2IzNzEiLz48Y2lyY2xlIGN4PSIxNyIgY3k9IjEyIiByPSI0IiBmaWxsPSIjM2NiMzcxIi8+PC9zdmc+"  # a tree, embedded (plexor.hints)

# The tools whose results the tree viewer (ui://arbor/tree.html) shows, for hosts that speak MCP Apps.
VIEWED = frozenset({"tree_render", "tree_get", "tree_get_skeleton", "tree_get_head", "node_get",
                    "context_get_path", "context_list_leaves"})
DAY = 86_400.0
SETTINGS = {
    "scheduled_window": (7 * DAY, "seconds a tree stays scheduled for deletion before the sweeper archives it"),
    "archive_window": (30 * DAY, "seconds a tree stays archived before the sweeper purges it for good"),
    "sweep_interval": (3_600.0, "seconds between background sweeps; 0 turns the background sweeper off"),
}


@hookimpl
def plexor_add_config(config: Any) -> None:
    for key, (default, help_text) in SETTINGS.items():
        config.add(key, float, default, help=help_text)
    config.add("listed_trees", int, 10,
               help="how many active trees resources/list shows (pinned first, then the newest); 0 for none. "
                    "Every tree stays readable through the arbor://tree/{tree_id} templates")
    config.add("database_url", str, None,
               help="database URL such as postgresql://user@host/db (default: a SQLite file in the data directory)")


def check_settings(settings: Any) -> None:
    """Refuse negative windows or intervals, naming the key."""
    for key in SETTINGS:
        value = settings[key]
        if value is None or value < 0:
            raise ConfigError(
                f"[arbor] {key} = {value!r} ({settings.sources.get(key, 'default')}) must be 0 or more seconds",
                f"Set {key} to a number of seconds, e.g. {int(SETTINGS[key][0])}.",
            )
    listed = settings["listed_trees"]
    if listed is None or listed < 0:
        raise ConfigError(
            f"[arbor] listed_trees = {listed!r} ({settings.sources.get('listed_trees', 'default')}) must be 0 or more",
            "Set listed_trees to how many trees resources/list should show, e.g. 10 (0 lists none).")


@hookimpl
def plexor_register_models(register: Any) -> None:
    from plexor_arbor.models import MODELS, migration_1

    register(*MODELS)
    register.migration(1, migration_1)


@hookimpl
def plexor_register_tools(register: Any, settings: Any) -> None:
    check_settings(settings)
    from plexor_arbor.purge import PURGE_TOOLS
    from plexor_arbor.tools import TOOLS
    from plexor_arbor.view import APP_URI, tree_view

    for func, hints in [*TOOLS, *PURGE_TOOLS]:
        shown = func.__name__ in VIEWED  # hosts that speak MCP Apps show the result in the tree viewer
        register(func, annotations=hints, ui=APP_URI if shown else None)
    register(tree_view, annotations={"readOnlyHint": True}, ui=APP_URI, visibility=["app"])


@hookimpl
def plexor_register_resources(register: Any, settings: Any) -> None:
    from plexor_arbor.resources import list_resources
    from plexor_arbor.view import APP_URI, read_app

    register.lister(list_resources)
    register.app(APP_URI, read_app, name="Arbor tree viewer", prefers_border=True, blocking=False)


@hookimpl
def plexor_register_resource_templates(register: Any, settings: Any) -> None:
    from plexor_arbor.resources import RESOURCE_TEMPLATES, complete_tree_id

    for template, reader, name in RESOURCE_TEMPLATES:
        register(template, reader, name=name, mime_type="application/json", complete={"tree_id": complete_tree_id})


@hookimpl
def plexor_register_commands(cli: Any, plugin: PluginHandle) -> None:
    from plexor_arbor.cli import arbor
    from plexor_arbor.purge import purge_command

    arbor.add_command(purge_command)
    arbor.context_settings["obj"] = plugin  # each command reaches the handle with @click.pass_obj
    cli.add_command(arbor)


@hookimpl
def plexor_startup(plugin: PluginHandle) -> None:
    from plexor_arbor.store import Store

    store = plugin.provide(Store(plugin.database))
    interval = float(plugin.settings["sweep_interval"])
    if interval > 0:
        sweeper = Sweeper(plugin, store, interval)
        plugin.provide(sweeper, close=sweeper.stop).start()  # the kernel stops it at shutdown


@hookimpl
def plexor_error_guidance(exception: BaseException, context: dict[str, Any]) -> str | None:
    text = str(exception).lower()
    name = type(exception).__name__
    if "locked" in text or "busy" in text:
        return ("Another process is writing to the arbor database; the write waited for the busy timeout and gave up. "
                "Retry the call.")
    if name == "IntegrityError":
        return ("The database refused a write that would break the tree's consistency (another writer may have "
                "changed it at the same moment). Re-read the tree with arbor_tree_get and retry.")
    if name in ("OperationalError", "InterfaceError", "DatabaseError"):
        return ("The arbor database could not be reached or answered with an error. Check [arbor] database_url "
                "(or PLEXOR_ARBOR_DATABASE_URL) and that the database server is running, then retry.")
    return None


class Sweeper:
    """Runs :meth:`Store.sweep` every ``interval`` seconds in a daemon thread (first sweep at start)."""

    def __init__(self, plugin: PluginHandle, store: Store, interval: float) -> None:
        self.plugin = plugin
        self.store = store
        self.settings = plugin.settings
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="arbor-sweeper", daemon=True)
        self.runs = 0
        self.last: dict[str, Any] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def sweep_once(self) -> dict[str, Any]:
        from plexor_arbor.purge import announce_gone

        result = self.store.sweep(self.settings["scheduled_window"], self.settings["archive_window"])
        self.runs += 1
        self.last = result
        # Only active trees are listed, and the sweeper touches none: subscribers hear, listers need not.
        announce_gone(self.plugin, [*result["archived"], *result["purged"]], listed=False)
        if result["archived"] or result["purged"]:
            self.plugin.log.info("arbor_sweep", archived=len(result["archived"]), purged=len(result["purged"]))
        return result

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sweep_once()
            except Exception as exc:  # noqa: BLE001 - a failed sweep is retried at the next interval
                self.plugin.log.error("arbor_sweep_failed", error=f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.interval)
        # The thread's own database connection is not needed any more.
        try:
            self.store.db.close()
        except Exception:  # noqa: BLE001
            pass
