"""The ``edgelake`` Plexor plugin: EdgeLake tools declared in YAML over a robust REST client.

This entry-point module imports only ``plexor`` and the standard library; the
YAML loader, the pydantic-typed signatures and the HTTP client are imported
inside the hooks that need them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plexor import Context, PluginHandle, hookimpl

PLEXOR_NAMESPACE = "edgelake"
PLEXOR_ICON = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCI+PGVsbGlwc2UgY3g9IjEyIiBjeT0iNSIgcng9IjgiIHJ5PSIzIiBmaWxsPSIjMWY3OGI0Ii8+PHBhdGggZD0iTTQgNXYxNGMwIDEuNyAzLjYgMyA4IDNzOC0xLjMgOC0zVjVjMCAxLjctMy42IDMtOCAzUzQgNi43IDQgNXoiIGZpbGw9IiMyYTlmZDYiLz48cGF0aCBkPSJNNCAxMmMwIDEuNyAzLjYgMyA4IDNzOC0xLjMgOC0zIiBmaWxsPSJub25lIiBzdHJva2U9IiNmZmYiIHN0cm9rZS13aWR0aD0iMS4yIi8+PC9zdmc+"  # a database, embedded (plexor.hints)
PLUGIN = "edgelake"

# Catalogs built while registering, keyed by the plugin's Settings object, picked up at startup.
_catalogs: dict[int, tuple[Any, Any]] = {}


@hookimpl
def plexor_add_config(config: Any) -> None:
    config.add("nodes", list, ["127.0.0.1:32049"],
               help='EdgeLake nodes, "host:port" or "name=host:port" (the REST port); the first is the default')
    config.add("tools_file", Path, None, help="a YAML file of your own tools (same format as the shipped tools.yaml)")
    config.add("timeout", float, 20.0, help="seconds to wait for a local command")
    config.add("network_timeout", float, 60.0, help="seconds to wait for a command with destination network")
    config.add("connect_timeout", float, 5.0, help="seconds to wait for a connection to a node")
    config.add("max_rows", int, 10000, help="the most rows a tool returns; a larger reply is cut with guidance")
    config.add("retries", int, 2, help="extra attempts after a connection failure (read-only commands only)")
    config.add("backoff", float, 0.25, help="seconds before the first retry, doubled for each next one")
    config.add("max_connections", int, 16, help="calls in flight per node (each has its own connection)")
    config.add("max_reply_bytes", int, 64 * 1024 * 1024,
               help="the most bytes read of one reply; a larger reply is abandoned with an error naming this setting")
    config.add("user_agent", str, "AnyLog/1.23", help="the User-Agent the node expects")


def _catalog(settings: Any) -> Any:
    key = id(settings)
    if key not in _catalogs:
        from plexor import ConfigError
        from plexor_edgelake.client import parse_nodes
        from plexor_edgelake.toolspec import load_catalog

        parse_nodes(settings["nodes"])  # a bad node list fails the plugin before any tool is registered
        for name in ("timeout", "network_timeout", "connect_timeout", "max_rows", "max_connections", "max_reply_bytes"):
            if settings[name] <= 0:
                raise ConfigError(f"[edgelake] {name} = {settings[name]!r} must be greater than 0",
                                  f"Set {name} to a positive number.")
        for name in ("retries", "backoff"):
            if settings[name] < 0:
                raise ConfigError(f"[edgelake] {name} = {settings[name]!r} cannot be negative", f"Set {name} to 0 or more.")
        cache = Path(settings.data_dir) / "cache" if getattr(settings, "data_dir", None) else None
        _catalogs[key] = (settings, load_catalog(settings["tools_file"], cache_dir=cache))
    return _catalogs[key][1]


@hookimpl
def plexor_register_tools(register: Any, settings: Any) -> None:
    from plexor_edgelake.engine import make_tool_function

    catalog = _catalog(settings)
    nodes = settings["nodes"]
    hint = f"{nodes[0]}" if nodes else "the first configured node"
    for tool in catalog.tools.values():
        if tool.handler:
            annotations = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
        else:
            annotations = {"readOnlyHint": tool.read_only, "destructiveHint": not tool.read_only,
                           "idempotentHint": tool.read_only, "openWorldHint": True}
        if tool.title:
            annotations["title"] = tool.title
        if _long(tool):  # a query a client may run as a task (tasks/*), the node it asks in the status
            register(_reporting(make_tool_function(tool, hint), tool), tool.name, annotations=annotations, task="optional")
        else:
            register(make_tool_function(tool, hint), tool.name, annotations=annotations)


def _long(tool: Any) -> bool:
    """SQL queries and commands sent to other nodes: what may take long enough to run as a task."""
    text = tool.command.text if tool.command is not None else ""
    return text.startswith("sql ") or bool(tool.destination)


def _reporting(func: Any, tool: Any) -> Any:
    """``func`` reporting, before it asks the node, what it sends (a task's status message shows it)."""

    async def reporting(ctx: Context, **kwargs: Any) -> Any:
        where = kwargs.get("nodes") or kwargs.get("destination") or kwargs.get("node") or "the node"
        await ctx.progress(0, None, f"{tool.name}: asking {where}")
        return await func(ctx=ctx, **kwargs)

    for attr in ("__signature__", "__annotations__", "__doc__", "__name__", "__qualname__"):
        setattr(reporting, attr, getattr(func, attr))
    return reporting


@hookimpl
def plexor_register_resource_templates(register: Any, settings: Any) -> None:
    register("edgelake://database/{database}", read_database, name="EdgeLake database",
             description="The tables of one EdgeLake database (from the network's metadata).")
    register("edgelake://database/{database}/table/{table}", read_table, name="EdgeLake table",
             description="The columns and types of one EdgeLake table.")


async def _run_shipped(ctx: Context, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    from plexor import NotFound
    from plexor_edgelake.engine import Engine

    engine = ctx.service(Engine)
    tool = engine.catalog.tools.get(tool_name)
    if tool is None:
        raise NotFound(f"the tool edgelake_{tool_name} is disabled, so this resource cannot be read",
                       f"Re-enable {tool_name} in your [edgelake] tools_file.")
    from plexor_edgelake.client import EdgeLakeError

    try:
        result = await engine.run(tool, args)
    except EdgeLakeError as exc:
        # The node's "no such database / table" errors mean the resource does not exist: say so as not-found.
        if (exc.data or {}).get("err_code") in _MISSING:
            raise NotFound(exc.message, exc.guidance, data=exc.data) from None
        raise
    return result.data


_MISSING = {5, 29, 45, 132}  # unknown DBMS, no metadata, table metadata not loadable, local table not declared


async def read_database(database: str, ctx: Context) -> dict[str, Any]:
    """The tables of ``database``."""
    data = await _run_shipped(ctx, "list_tables", {"database": database})
    return {"database": database, "tables": data["tables"], "source": data["source"]}


async def read_table(database: str, table: str, ctx: Context) -> dict[str, Any]:
    """The schema of ``database``.``table``."""
    data = await _run_shipped(ctx, "get_schema", {"database": database, "table": table})
    return {"database": database, "table": table, "columns": data["columns"], "source": data["source"]}


@hookimpl
def plexor_startup(plugin: PluginHandle) -> None:
    from plexor_edgelake.engine import Engine

    engine = Engine(_catalog(plugin.settings), plugin.settings)
    plugin.provide(engine, close=engine.aclose)  # the kernel closes its connections at shutdown


@hookimpl
def plexor_shutdown(plugin: PluginHandle) -> None:
    _catalogs.pop(id(plugin.settings), None)
