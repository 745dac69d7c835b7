"""The kernel's own tools, shipped as a plugin that uses the same hooks as every other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from plexor.context import Context
from plexor.errors import NotFound
from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp_types import ServerCapabilities

    from plexor.extending import ServerSetup
    from plexor.protocols import ToolRegistrar
    from plexor.settings import ConfigSpec, Settings

PLEXOR_NAMESPACE = "plexor"


@hookimpl
def plexor_add_config(config: ConfigSpec) -> None:
    # [plexor] database_url: the kernel's own database (tasks...); PLEXOR_DATABASE_URL overrides it (plexor.features.state).
    config.add("database_url", str, None, help="the kernel's database URL (postgresql://...); default: "
               "plexor.sqlite3 in the data directory")
    # [plexor.auth] and [plexor.profiles.NAME]: read by plexor.features.auth when serving HTTP (docs/security.md).
    config.add("auth", dict, None, help="OAuth 2.1 resource server: issuer, resource, scopes... (docs/security.md)")
    config.add("profiles", dict, None, help="named tool profiles: [plexor.profiles.NAME] tools = [...] (docs/security.md)")


@hookimpl
def plexor_capabilities(capabilities: ServerCapabilities, protocol_version: str | None, setup: ServerSetup) -> None:
    # MCP Apps (io.modelcontextprotocol/ui): advertised while a loaded plugin offers an app (plexor.apps)
    from plexor.apps import advertise_apps

    advertise_apps(capabilities, setup.kernel.registry.resources.values())


@hookimpl
def plexor_register_tools(register: ToolRegistrar, settings: Settings) -> None:
    ro = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    register(health, annotations=ro, ready_required=False, blocking=False)
    register(plugins, annotations=ro, ready_required=False, blocking=False)


# The states a plugin can be in (plexor.core.records.State), as the state filter offers them.
PluginState = Literal["created", "loading", "starting", "ready", "draining", "stopped", "failed", "disabled"]


def health(ctx: Context, plugin: str | None = None) -> dict[str, object]:
    """Report the server's health: the serving process's pid and version, the kernel state and uptime,
    the schema hash of all tools, and for each plugin its version, state, readiness (with warm-up
    progress) and error. Call this first when something does not work, or to tell which server answered.

    :param plugin: report only this plugin (its name, e.g. "folder-search", or its tool prefix, e.g.
        "folders"); leave it out for every plugin.
    """
    report = ctx.kernel.health()
    if plugin is not None:
        name = _plugin_name(ctx, plugin)
        report["plugins"] = [r.describe() for r in ctx.kernel.records.values() if r.name == name]
    return report


def plugins(ctx: Context, plugin: str | None = None, state: PluginState | None = None) -> dict[str, object]:
    """List every plugin with its distribution, version, state, namespace, tools, resources and error.

    Use it to find which tools a plugin offers or why a plugin is unavailable.

    :param plugin: only this plugin (its name, e.g. "keyboard", or its tool prefix); leave it out for all.
    :param state: only the plugins in this state, e.g. "failed" to see what is broken and why.
    """
    records = sorted(ctx.kernel.records.values(), key=lambda r: r.name)
    if plugin is not None:
        name = _plugin_name(ctx, plugin)
        records = [r for r in records if r.name == name]
    if state is not None:
        records = [r for r in records if r.state.value == state]
    return {"plugins": [r.describe() for r in records]}


def _plugin_name(ctx: Context, given: str) -> str:
    """The plugin ``given`` names (its name or namespace, any case), or an error listing them."""
    records = ctx.kernel.records
    wanted = given.strip().lower()
    for rec in records.values():
        if wanted in (rec.name.lower(), (rec.namespace or "").lower()):
            return str(rec.name)
    import difflib

    names = sorted(records)
    near = difflib.get_close_matches(wanted, names + sorted({r.namespace for r in records.values() if r.namespace}),
                                     n=1, cutoff=0.6)
    hint = f"Did you mean {near[0]!r}? " if near else ""
    raise NotFound(f"no plugin named {given!r}",
                   f"{hint}Plugins: {', '.join(names) or '(none)'}; leave plugin out to see them all.",
                   data={"plugins": names})
