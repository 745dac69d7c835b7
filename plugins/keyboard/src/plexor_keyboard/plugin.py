"""The keyboard plugin's hooks: macOS virtual key codes as MCP tools and resources.

This module is the entry point, so it imports only ``plexor`` and the standard
library; the catalog (JSON data, the alias index) is built on the first call and
RapidFuzz is imported on the first lookup that misses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plexor import Cache, Context, NotFound, PlexorError, Result, hookimpl

if TYPE_CHECKING:  # pragma: no cover - types only: ConfigSpec and Settings would load plexor.config at import
    import click

    from plexor import ConfigSpec, PluginHandle, ResourceRegistrar, Settings, TemplateRegistrar, ToolRegistrar
    from plexor_keyboard.catalog import Catalog

PLEXOR_NAMESPACE = "keyboard"
PLEXOR_ICON = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCI+PHJlY3QgeD0iMS41IiB5PSI1IiB3aWR0aD0iMjEiIGhlaWdodD0iMTQiIHJ4PSIyIiBmaWxsPSIjNDQ0Ii8+PHBhdGggZD0iTTQgOGgydjJINHptMyAwaDJ2Mkg3em0zIDBoMnYyaC0yem0zIDBoMnYyaC0yem0zIDBoMnYyaC0yek00IDExaDJ2Mkg0em0zIDBoMnYySDd6bTMgMGgydjJoLTJ6bTMgMGgydjJoLTJ6bTMgMGg0djJoLTR6TTYgMTRoMTJ2Mkg2eiIgZmlsbD0iI2ZmZiIvPjwvc3ZnPg=="  # a keyboard, embedded (plexor.hints)
STATIC = Cache(ttl=86400, scope="public")  # the catalog is built in: the same for everyone, all day

_READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False, "destructiveHint": False}


def __getattr__(name: str) -> Any:
    # LAYOUT_IDS lives in plexor_keyboard.layouts (the layout vocabulary); it stays importable from
    # here without loading that module when the plugin is imported.
    if name == "LAYOUT_IDS":
        from plexor_keyboard.layouts import LAYOUT_IDS

        return LAYOUT_IDS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _catalog() -> Catalog:
    from plexor_keyboard.catalog import get_catalog

    return get_catalog()


def _default_layout(settings: Settings) -> str:
    """The layout id of the default_layout setting (any form the layout vocabulary accepts)."""
    from plexor_keyboard.layouts import configured_layout

    return configured_layout(settings)


# ------------------------------------------------------------------------ hooks
@hookimpl
def plexor_add_config(config: ConfigSpec) -> None:
    # No ``choices``: the value takes the same forms as the ``layout`` argument ("intel",
    # "Touch Bar"), which plexor_register_tools checks, with a did-you-mean.
    config.add(
        "default_layout",
        str,
        "apple_silicon_2020plus",
        help="Keyboard generation used for 'F{n}+' answers when a call names no layout: a layout id "
             "or a short form such as 'intel', 'external', 'aluminium', 'touch bar'.",
    )


@hookimpl
def plexor_register_tools(register: ToolRegistrar, settings: Settings) -> None:
    _default_layout(settings)  # a value outside the layout vocabulary fails the plugin at start, naming its source
    # Lookups take microseconds: run them on the event loop rather than hop to a thread.
    for tool in (lookup_keycode, search_keys, list_categories, get_key_combinations):
        register(tool, annotations=_READ_ONLY, blocking=False, cache=STATIC)


@hookimpl
def plexor_register_resources(register: ResourceRegistrar, settings: Settings) -> None:
    register("keycode://all", read_all, name="All macOS virtual key codes", cache=STATIC,
             description="Every kVK_* constant with its name, code, hex, category and aliases.")
    register("keycode://aliases", read_aliases, name="Key aliases", cache=STATIC,
             description="Every alias, abbreviation and glyph, with the key it names (and the alternatives "
                         "of ambiguous names).")
    register.lister(list_category_resources, cache=STATIC)


@hookimpl
def plexor_register_resource_templates(register: TemplateRegistrar, settings: Settings) -> None:
    register("keycode://category/{category}", read_category, name="Keys of one category",
             description="The keys of one category (letters, numbers, function-keys, modifiers, navigation, "
                         "editing, keypad, punctuation, media, iso-jis).",
             complete={"category": complete_category}, cache=STATIC)


@hookimpl
def plexor_register_commands(cli: click.Group, plugin: PluginHandle) -> None:
    import click

    def _run_cli(produce: Callable[[str], dict[str, Any]]) -> None:
        _print_result(produce, plugin)

    @cli.group(name="keyboard", help="macOS virtual key codes: look up keys and parse shortcuts.")
    def group() -> None:
        pass

    @group.command(name="lookup", help="Look up a key by name, alias, glyph, constant, code or 'F4+'.")
    @click.argument("key_name")
    @click.option("--fuzzy", is_flag=True, help="Suggest near names when nothing matches exactly.")
    @click.option("--layout", default=None, help="Keyboard generation for F-key secondary functions: a layout id "
                  "or a short form ('intel', 'external', 'aluminium', 'touch bar'); default: the default_layout "
                  "setting.")
    def lookup_cmd(key_name: str, fuzzy: bool, layout: str | None) -> None:
        _run_cli(lambda default: _catalog().lookup(key_name, fuzzy=fuzzy, layout=layout, default_layout=default))

    @group.command(name="combo", help="Parse a shortcut such as 'cmd+shift+4' or '⌘⇧4'.")
    @click.argument("shortcut")
    def combo_cmd(shortcut: str) -> None:
        from plexor_keyboard.shortcuts import parse_shortcut

        _run_cli(lambda default: parse_shortcut(shortcut, _catalog()))

    @group.command(name="categories", help="List the key categories.")
    def categories_cmd() -> None:
        _run_cli(lambda default: {"categories": _catalog().categories_summary()})


def _print_result(produce: Callable[[str], dict[str, Any]], plugin: PluginHandle) -> None:
    """Print the result as JSON; exit 1 for a failed lookup, 2 for bad input or configuration.

    ``produce`` receives the configured default layout (plexor.toml or PLEXOR_KEYBOARD_DEFAULT_LAYOUT),
    read through the plugin's handle: the kernel's own config code, no server started.
    """
    import click

    from plexor import ConfigError, InvalidArgument

    try:
        data = produce(_default_layout(plugin.settings))
    except PlexorError as err:
        click.echo(err.render(), err=True)
        raise SystemExit(2 if isinstance(err, (InvalidArgument, ConfigError)) else 1) from None
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    if data.get("found") is False:  # `lookup --fuzzy` found nothing: its suggestions are printed, the lookup failed
        raise SystemExit(1)


@hookimpl
def plexor_error_guidance(exception: BaseException, context: dict[str, Any]) -> str | None:
    if isinstance(exception, ImportError) and "rapidfuzz" in str(exception):
        return "Typo-tolerant lookup needs RapidFuzz: reinstall plexor-keyboard (pip install plexor-keyboard)."
    if type(exception).__name__ == "CatalogError":
        return "The installed plexor-keyboard has inconsistent key data; reinstall it."
    return None


# ------------------------------------------------------------------------ tools
def lookup_keycode(ctx: Context, key_name: str | int, fuzzy: bool = False, layout: str | None = None) -> Any:
    """Find a macOS virtual key code (kVK_* constant from Apple's Events.h) for a key.

    Accepts a key name ("Return"), an alias or abbreviation ("esc", "cmd", "pgdn", "fwd delete", "globe"),
    a glyph ("⌘", "⌫", "↩"), a typed symbol including shifted ones ("/", "?", "~"), a side ("right command",
    "lshift"), a keypad name ("numpad enter", "keypad 5", "numpad *"), a constant ("kVK_Space") or a code
    ("49", "0x31", "code 0": a reverse lookup listing every key with that code). "F4+" returns F4 with its
    printed secondary function (brightness, Mission Control, Spotlight, media...) on the chosen keyboard
    generation, and what it is on the others. Ambiguous names ("enter", "del", "+") answer with the most
    likely key and list `alternatives`. Returns {found, key: {name, constant, code, hex, category, aliases},
    alternatives, match, ...}. When nothing matches: with fuzzy=true, {found: false, suggestions: [up to five
    keys with a 0-1 confidence]}; with fuzzy=false, an error naming the closest key.

    :param key_name: what to look up: a name, alias, glyph, symbol, constant, decimal or hex code, or "F{n}+".
    :param fuzzy: when nothing matches exactly, return up to five typo-tolerant suggestions instead of an error.
    :param layout: keyboard generation for F-key secondary functions: apple_silicon_2020plus (default: Apple
        silicon Macs and Magic Keyboards since 2021), intel_laptop_2011_2020_backlit,
        external_2011_2020_no_backlight, aluminium_2007_2010, macbook_air_wellspring4_2010, touch_bar_2016_2022;
        short forms such as "intel", "external" or "touch bar" work too, in any case.
    """
    # default_layout was checked against the layout vocabulary at start; the catalog resolves its form.
    default = ctx.settings.get("default_layout")
    result = _catalog().lookup(str(key_name), fuzzy=fuzzy, layout=layout, default_layout=default)
    if result.get("found") is False:
        if result["suggestions"]:
            best = result["suggestions"][0]
            advice = (f"No key is named {result['query']!r}; the closest is {best['key']['name']!r} "
                      f"(confidence {best['confidence']}). Look it up by that name to confirm.")
        else:
            advice = (f"Nothing is close to {result['query']!r}. Call keyboard_search_keys or "
                      "keyboard_list_categories to browse the keys.")
        return Result(result, guidance=[advice])
    return result


def search_keys(query: str | None = None, category: str | None = None) -> Any:
    """Search the 120 macOS keys by part of a name, alias, glyph or constant, and/or by category.

    Use it to browse ("arrow", "keypad", "bracket") or to list a category; use keyboard_lookup_keycode
    for one exact key. With neither argument it lists every key. Returns {found, count, keys: [{name,
    constant, code, hex, category, aliases}, ...]}, best matches first; when nothing matches, also
    `suggestions` of near names.

    :param query: text to find in key names, aliases and constants (case-insensitive), or a code ("0x31").
    :param category: one category id or name: letters, numbers, function-keys, modifiers, navigation,
        editing, keypad, punctuation, media, iso-jis (see keyboard_list_categories).
    """
    result = _catalog().search(query, category)
    if not result["found"]:
        where = f" in category {result['category']!r}" if result["category"] else ""
        advice = f"No key matches {query!r}{where}."
        if result.get("suggestions"):
            advice += f" Did you mean {result['suggestions'][0]['key']['name']!r}?"
        advice += " Try a shorter part of the name, or keyboard_list_categories."
        return Result(result, guidance=[advice])
    return result


def list_categories(category: str | None = None) -> dict[str, Any]:
    """List the key categories with a description, how many keys each has and a few examples.

    Use a category's id with keyboard_search_keys(category=...) or read keycode://category/{id}.
    Give `category` to get that one category with every key in it ({name, constant, code, hex, ...}).

    :param category: one category, by id or name (letters, numbers, function-keys, modifiers, navigation,
        editing, keypad, punctuation, media, iso-jis; "numpad" or "function keys" work too); leave it out
        to list them all.
    """
    catalog = _catalog()
    cats = catalog.categories_summary()
    if category is not None and category.strip():
        cid = catalog.resolve_category(category)  # an unknown one is an error with a did-you-mean
        cats = [dict(c, keys=[k.to_dict() for k in catalog.in_category(cid)]) for c in cats if c["id"] == cid]
    return {"count": len(cats), "total_keys": sum(c["count"] for c in cats), "categories": cats}


def get_key_combinations(shortcut: str) -> dict[str, Any]:
    """Parse a keyboard shortcut into its modifiers and its one main key, with codes and event flags.

    Accepts "cmd+shift+4", "⌘⇧4", "ctrl-alt-delete", "Command + Option + Esc", "^C", "cmd++" and sides
    ("right option+a"). Returns the modifiers in Apple's canonical order (⌃ Control, ⌥ Option, ⇧ Shift,
    ⌘ Command; fn and ⇪ before them), each with its key code and event modifier flag mask
    (NSEventModifierFlags / CGEventFlags, e.g. Command 0x100000), the combined `modifier_flags`, the main
    `key` {name, constant, code, hex, ...}, and the `canonical` form ("⇧⌘4"). A shifted symbol as the main
    key ("cmd+?") adds the Shift it needs. A shortcut with no main key or with several is an error.

    :param shortcut: the shortcut as written, with '+', '-' or spaces between keys, or glued glyphs.
    """
    from plexor_keyboard.shortcuts import parse_shortcut

    return parse_shortcut(shortcut, _catalog())


# -------------------------------------------------------------------- resources
def read_all() -> dict[str, Any]:
    """Every key, ordered by code."""
    catalog = _catalog()
    return {"count": len(catalog.keys), "keys": [k.to_dict() for k in catalog.keys]}


def read_aliases() -> dict[str, Any]:
    """Every alias with the key it names."""
    table = _catalog().aliases_table()
    return {"count": len(table), "aliases": table}


def read_category(category: str) -> dict[str, Any]:
    """The keys of one category."""
    from plexor import InvalidArgument

    catalog = _catalog()
    try:
        cid = catalog.resolve_category(category)
    except InvalidArgument as err:
        raise NotFound(f"no key category {category!r}", err.guidance, data=err.data) from None
    info = catalog.categories[cid]
    keys = catalog.in_category(cid)
    return {"id": cid, "name": info["name"], "description": info["description"], "count": len(keys),
            "keys": [k.to_dict() for k in keys]}


def list_category_resources() -> list[dict[str, Any]]:
    """One resource per category (so that resources/list shows them)."""
    from plexor_keyboard.names import CATEGORIES

    return [{"uri": f"keycode://category/{cid}", "name": f"Keys: {title}", "description": desc,
             "mime_type": "application/json"} for cid, title, desc, _ in CATEGORIES]


def complete_category(prefix: str) -> list[str]:
    """Category ids starting with ``prefix`` (for completion/complete)."""
    from plexor_keyboard.names import CATEGORIES

    p = (prefix or "").strip().lower()
    return [cid for cid, *_ in CATEGORIES if cid.startswith(p)] or [
        cid for cid, title, *_ in CATEGORIES if p in cid or p in title.lower()
    ]
