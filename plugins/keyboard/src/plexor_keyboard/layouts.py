"""Keyboard generations ("layouts") and the one vocabulary that names them everywhere.

The same words are accepted in the ``layout`` tool argument, the CLI's
``--layout``, ``default_layout`` in plexor.toml and ``PLEXOR_KEYBOARD_DEFAULT_LAYOUT``:
a layout id of ``data/fkeys.json`` or one of its short forms, in any case, with
spaces, '-' or '_' between words. A value outside it gets a did-you-mean.

The ids are spelled out here, not read from the data, so that the setting is
checked when the plugin starts without loading the catalog; the catalog builder
refuses data whose layouts differ from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor import ConfigError, InvalidArgument
from plexor_keyboard.model import norm

if TYPE_CHECKING:  # pragma: no cover
    from plexor import Settings

__all__ = [
    "DEFAULT_LAYOUT",
    "LAYOUT_ALIASES",
    "LAYOUT_IDS",
    "configured_layout",
    "find_layout",
    "layout_id",
    "layout_guidance",
]

LAYOUT_IDS = (
    "apple_silicon_2020plus",
    "intel_laptop_2011_2020_backlit",
    "external_2011_2020_no_backlight",
    "aluminium_2007_2010",
    "macbook_air_wellspring4_2010",
    "touch_bar_2016_2022",
)
DEFAULT_LAYOUT = LAYOUT_IDS[0]

# Short forms of the ids; the first one of each id is the one error messages show.
LAYOUT_ALIASES: dict[str, str] = {
    "apple silicon": "apple_silicon_2020plus",
    "apple silicon 2020+": "apple_silicon_2020plus",
    "current": "apple_silicon_2020plus",
    "modern": "apple_silicon_2020plus",
    "m1": "apple_silicon_2020plus",
    "2021": "apple_silicon_2020plus",
    "magic keyboard 2021": "apple_silicon_2020plus",
    "intel": "intel_laptop_2011_2020_backlit",
    "intel laptop": "intel_laptop_2011_2020_backlit",
    "legacy": "intel_laptop_2011_2020_backlit",
    "legacy laptop": "intel_laptop_2011_2020_backlit",
    "external": "external_2011_2020_no_backlight",
    "external keyboard": "external_2011_2020_no_backlight",
    "magic keyboard 2015": "external_2011_2020_no_backlight",
    "aluminium": "aluminium_2007_2010",
    "aluminum": "aluminium_2007_2010",
    "wellspring": "macbook_air_wellspring4_2010",
    "macbook air 2010": "macbook_air_wellspring4_2010",
    "touch bar": "touch_bar_2016_2022",
    "touchbar": "touch_bar_2016_2022",
}

# normal form -> (layout id, the form as written); ids first, so an id always wins.
_FORMS: dict[str, tuple[str, str]] = {norm(lid): (lid, lid) for lid in LAYOUT_IDS}
for _form, _lid in LAYOUT_ALIASES.items():
    _FORMS.setdefault(norm(_form), (_lid, _form))


def find_layout(value: str) -> str | None:
    """The layout id ``value`` names, or ``None``."""
    if value in LAYOUT_IDS:  # the common case, without normalising
        return value
    found = _FORMS.get(norm(value))
    return found[0] if found else None


def layout_guidance(value: str) -> str:
    """What to write instead of ``value``: the nearest accepted form, then every id with a short form."""
    import difflib

    near = difflib.get_close_matches(norm(value), list(_FORMS), n=1, cutoff=0.6)
    hint = ""
    if near:
        lid, written = _FORMS[near[0]]
        hint = f"Did you mean {written!r}" + (f" ({lid})" if written != lid else "") + "? "
    short = {lid: form for form, lid in reversed(LAYOUT_ALIASES.items())}
    listed = "; ".join(f"{lid} (or {short[lid]!r})" for lid in LAYOUT_IDS)
    return (f"{hint}Use one of: {listed}. Case, spaces, '-' and '_' do not matter. "
            f"Leave it out for {DEFAULT_LAYOUT} (current Apple silicon Macs and Magic Keyboards).")


def layout_id(value: str) -> str:
    """The layout id for a ``layout`` argument or ``--layout`` flag; an unknown one is an invalid argument."""
    found = find_layout(value)
    if found is None:
        raise InvalidArgument(f"unknown layout {value!r}", layout_guidance(value), data={"layouts": list(LAYOUT_IDS)})
    return found


def configured_layout(settings: Settings) -> str:
    """The layout id of the ``default_layout`` setting; an unknown one is a configuration error naming its source."""
    value = settings.get("default_layout")
    if value is None or not str(value).strip():
        return DEFAULT_LAYOUT
    found = find_layout(str(value))
    if found is None:
        source = _describe_source(settings.sources.get("default_layout", ""))
        raise ConfigError(
            f"default_layout = {value!r} in {source} is not a keyboard layout",
            layout_guidance(str(value)),
            data={"key": "default_layout", "source": source, "layouts": list(LAYOUT_IDS)},
        )
    return found


def _describe_source(source: str) -> str:
    # Settings.sources holds the variable's name, the config file's path, or "default".
    if source.startswith("PLEXOR_"):
        return f"environment variable {source}"
    if source in ("", "default"):
        return "the default"
    return f"[keyboard] of {source}"
