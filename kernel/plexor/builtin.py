"""The kernel's own tools, shipped as a plugin that uses the same hooks as every other."""

from __future__ import annotations

from typing import Any

from plexor import Context, hookimpl

PLEXOR_NAMESPACE = "plexor"


@hookimpl
def plexor_add_config(config: Any) -> None:
    # [plexor] database_url: the kernel's own database (tasks...); PLEXOR_DATABASE_URL overrides it (plexor.state).
    config.add("database_url", str, None, help="the kernel's database URL (postgresql://...); default: "
               "plexor.sqlite3 in the data directory")
    # [plexor.auth] and [plexor.profiles.NAME]: read by plexor.auth when serving HTTP (docs/security.md).
    config.add("auth", dict, None, help="OAuth 2.1 resource server: issuer, resource, scopes... (docs/security.md)")
    config.add("profiles", dict, None, help="named tool profiles: [plexor.profiles.NAME] tools = [...] (docs/security.md)")


@hookimpl
def plexor_register_tools(register: Any, settings: Any) -> None:
    ro = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    register(health, annotations=ro, ready_required=False, blocking=False)
    register(plugins, annotations=ro, ready_required=False, blocking=False)


def health(ctx: Context) -> dict[str, Any]:
    """Report the server's health: the serving process's pid and version, the kernel state and uptime,
    the schema hash of all tools, and for each plugin its version, state, readiness (with warm-up
    progress) and error. Call this first when something does not work, or to tell which server answered.
    """
    return ctx._kernel.health()


def plugins(ctx: Context) -> dict[str, Any]:
    """List every plugin with its distribution, version, state, namespace, tools, resources and error.

    Use it to find which tools a plugin offers or why a plugin is unavailable.
    """
    return {"plugins": [r.describe() for r in sorted(ctx._kernel.records.values(), key=lambda r: r.name)]}
