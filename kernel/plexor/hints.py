"""What plugins declare about how their offerings look and keep: icons and cache hints.

**Icons.** A plugin names its icon with a module attribute, ``PLEXOR_ICON``; its tools,
resources, templates and prompts show it unless they declare their own with ``icons=``. An icon
is a URI (``data:image/svg+xml;base64,...`` embedded in the module is best: clients need not
fetch anything; or ``https://``), or a dict with MCP's fields ``{"src", "mimeType"?, "sizes"?,
"theme"?}``; a list gives several (sizes, light and dark themes)::

    PLEXOR_ICON = "data:image/svg+xml;base64,PHN2Zy..."

    register(search, icons=["https://example.org/search-dark.svg"])

**Cache hints** (2026-07-28, SEP-2549: ``ttlMs`` and ``cacheScope`` on cacheable results). A
resource, template, lister or tool may say how long what it offers stays fresh::

    register("keycode://all", read_all, cache=Cache(ttl=86400, scope="public"))

``ttl`` is in seconds; ``scope`` is ``"public"`` when the same answer is right for every caller,
``"private"`` when it may differ between callers (per-user data, authorization). Without a
declaration the hint is ``ttlMs: 0, private`` (always fetch again). A list's hint is the most
cautious of its items' (the shortest ttl, private if any is), and 0 while a plugin that could
change it is still starting; a read's hint is its resource's or template's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from plexor.errors import PluginError

__all__ = ["NO_CACHE", "Cache", "check_cache", "icons_of", "most_cautious"]

_ICON_KEYS = {"src", "mimeType", "sizes", "theme"}
_BY_SUFFIX = {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
              ".webp": "image/webp", ".ico": "image/x-icon"}


@dataclass(frozen=True)
class Cache:
    """A cache hint: fresh for ``ttl`` seconds, shareable across callers when ``scope`` is ``"public"``."""

    ttl: float = 0
    scope: Literal["public", "private"] = "private"

    def __post_init__(self) -> None:
        if not isinstance(self.ttl, int | float) or isinstance(self.ttl, bool) or self.ttl < 0:
            raise PluginError(f"Cache(ttl={self.ttl!r}): ttl must be a number of seconds, 0 or more",
                              "Write e.g. Cache(ttl=3600, scope='public'); ttl=0 means always fetch again.")
        if self.scope not in ("public", "private"):
            raise PluginError(f"Cache(scope={self.scope!r}) is not a scope",
                              "Use 'public' (the same answer for every caller) or 'private'.")

    @property
    def ttl_ms(self) -> int:
        return int(self.ttl * 1000)


NO_CACHE = Cache()


def check_cache(value: object, where: str) -> Cache | None:
    """``value`` as a :class:`Cache` (None stays None); a :class:`PluginError` naming ``where`` otherwise."""
    if value is None or isinstance(value, Cache):
        return value
    raise PluginError(f"{where}: cache={value!r} is not a plexor.Cache",
                      "Pass cache=plexor.Cache(ttl=<seconds>, scope='public' or 'private').")


def most_cautious(hints: Sequence[Cache | None]) -> Cache:
    """The hint of a list: its items' shortest ttl, private if any is; no hint at all for an undeclared item."""
    if not hints or any(h is None for h in hints):
        return NO_CACHE
    declared = [h for h in hints if h is not None]
    return Cache(min(h.ttl for h in declared), "public" if all(h.scope == "public" for h in declared) else "private")


def icons_of(value: object, where: str) -> list[dict[str, object]] | None:
    """MCP ``Icon`` dicts from a URI, a dict, or a list of them; a :class:`PluginError` naming ``where``."""
    if value is None:
        return None
    items = [value] if isinstance(value, str | Mapping) else value
    if not isinstance(items, Sequence) or isinstance(items, bytes):
        raise PluginError(f"{where}: icons={value!r} is not an icon or a list of icons",
                          "Give a data: or https: URI, a dict {'src': ..., 'mimeType': ...}, or a list of them.")
    out: list[dict[str, object]] = []
    for item in items:
        icon = {"src": item} if isinstance(item, str) else dict(item) if isinstance(item, Mapping) else None
        if icon is None or set(icon) - _ICON_KEYS or not isinstance(icon.get("src"), str):
            raise PluginError(f"{where}: {item!r} is not an icon",
                              f"An icon is a URI string or a dict with 'src' and optionally {sorted(_ICON_KEYS - {'src'})}.")
        src: str = icon["src"]
        if not (src.startswith("data:image/") or src.startswith("https://")):
            raise PluginError(f"{where}: the icon {src[:60]!r} is neither a data:image/ URI nor https://",
                              "Embed it (data:image/svg+xml;base64,...) or serve it over https; clients refuse other "
                              "schemes.")
        if "mimeType" not in icon:
            mime = src[5:].split(";", 1)[0].split(",", 1)[0] if src.startswith("data:") else \
                next((m for s, m in _BY_SUFFIX.items() if src.lower().split("?", 1)[0].endswith(s)), None)
            if mime:
                icon["mimeType"] = mime
        out.append(icon)
    return out
