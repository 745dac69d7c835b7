"""The kernel's default explanations: unknown names, and exceptions no plugin explained."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from plexor.core.specs import ToolSpec
from plexor.errors import NotFound, PlexorError, StorageError

__all__ = ["default_guidance", "suggest", "unknown_tool"]


def suggest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Near names: by the whole name, and by the part after the namespace."""
    pool = list(candidates)
    found = difflib.get_close_matches(name, pool, n=n, cutoff=0.6)
    tail = name.split("_", 1)[-1].split(".", 1)[-1]
    for cand in pool:
        if len(found) >= n:
            break
        if cand not in found and cand.endswith("_" + tail) and tail:
            found.append(cand)
    return found


def namespace_of(name: str, known: Iterable[str], separator: str = "_") -> str:
    """The namespace a tool name points at: the longest known one it starts with (namespaces may
    contain the separator, e.g. ``folder_search``), else the part before the first separator."""
    if "." in name:
        return name.split(".", 1)[0]
    best = ""
    for ns in known:
        if name.startswith(ns + separator) and len(ns) > len(best):
            best = ns
    return best or name.split(separator, 1)[0]


def unknown_tool(
    name: str,
    tools: Mapping[str, ToolSpec],
    namespaces: dict[str, str],
    unavailable: dict[str, tuple[str, str]],
    separator: str = "_",
) -> PlexorError:
    """A :class:`NotFound` for an unknown tool, with did-you-mean and the namespaces.

    :param unavailable: namespace -> (plugin, state) for failed and disabled plugins.
    """
    ns = namespace_of(name, list(namespaces) + list(unavailable), separator)
    if ns in unavailable and ns not in namespaces:
        plugin, state = unavailable[ns]
        if state == "disabled":
            return NotFound(
                f"the tool {name!r} belongs to the plugin {plugin!r}, which is disabled",
                f"It is turned off by PLEXOR_DISABLE or left out of PLEXOR_PLUGINS; enable {plugin} there and "
                "restart the server, or use another tool.",
                data={"namespace": ns, "plugin": plugin, "state": state},
            )
        return NotFound(
            f"the tool {name!r} belongs to the plugin {plugin!r}, which is not available (it failed)",
            "Run `plexor plugins` (or call plexor_health) to see why, fix it, and restart the server.",
            data={"namespace": ns, "plugin": plugin, "state": state},
        )
    near = suggest(name.replace(".", separator, 1), tools)
    spaces = sorted(namespaces)
    parts = []
    if near:
        parts.append("Did you mean " + " or ".join(repr(n) for n in near) + "?")
    if ns in namespaces:
        own = sorted(t for t, spec in tools.items() if spec.namespace == ns)
        parts.append(f"The {ns} tools are: {', '.join(own)}.")
        return NotFound(f"unknown tool {name!r}", " ".join(parts), data={"suggestions": near})
    parts.append(f"Namespaces: {', '.join(spaces) or 'none (no plugin is loaded)'}.")
    parts.append("Call tools/list for every tool and its arguments.")
    what = f"unknown tool {name!r}" if ns in namespaces else f"unknown tool {name!r} (no namespace {ns!r})"
    return NotFound(what, " ".join(parts), data={"suggestions": near, "namespaces": spaces})


def default_guidance(exc: BaseException, context: Mapping[str, object]) -> PlexorError:
    """Explain an exception that neither raised guidance nor was explained by its plugin."""
    if isinstance(exc, PlexorError):
        return exc
    plugin = context.get("plugin", "?")
    where = context.get("tool") or context.get("uri") or context.get("prompt") or "the call"
    request = context.get("request_id")
    ref = f" (request id {request})" if request is not None else ""
    try:
        import peewee

        db_error: tuple[type[BaseException], ...] = (peewee.PeeweeException,)
    except ImportError:  # pragma: no cover
        db_error = ()
    if db_error and isinstance(exc, db_error):
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "locked" in text or "busy" in text:
            hint = "Another process holds the database; retry in a moment."
        else:
            hint = f"Check the {plugin} database (disk space, permissions, database_url); the change was rolled back."
        return StorageError(f"{plugin}: a storage error in {where}: {text}", hint + ref)
    if isinstance(exc, TimeoutError):
        return PlexorError(f"{plugin}: {where} timed out", "Retry, or narrow the request so it does less work." + ref)
    if isinstance(exc, (FileNotFoundError, PermissionError)) and getattr(exc, "filename", None):
        return PlexorError(
            f"{plugin}: {where} could not open {exc.filename}: {exc.strerror or exc}",
            "Check that the path exists and is readable." + ref,
        )
    message = str(exc).strip() or type(exc).__name__
    return PlexorError(
        f"{plugin}: {where} failed: {type(exc).__name__}: {message}",
        "This looks like a bug in the plugin or an input it did not expect. Try other arguments; "
        f"the full traceback is in the server log{ref}.",
    )
