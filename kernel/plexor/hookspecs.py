"""Every hook a Plexor plugin can implement.

A plugin is a module (found through the ``plexor`` entry-point group) whose
functions are decorated with :data:`plexor.hookimpl` and named after the specs
below. The kernel calls each plugin's implementation **on its own**, never as
one combined pluggy call, so that every registration knows which plugin made
it and one plugin's failure stays its own (it ends in state ``failed``; the
others carry on). Because of that, pluggy's ``historic`` and ``firstresult``
markers would mean nothing here and none is used: each plugin's one
implementation is called once, and its answer is that plugin's answer.

A module function whose name starts with ``plexor_`` but matches no hook below
fails its plugin with a did-you-mean, so a misspelt hook never loads silently.

All hooks are optional. ``docs/authoring.md`` has a section and a working
example per hook; ``tests/test_docs.py`` fails when one is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    import click

    from plexor.core.registry import (
        ModelRegistrar,
        PromptRegistrar,
        ResourceRegistrar,
        TemplateRegistrar,
        ToolRegistrar,
    )
    from plexor.handle import PluginHandle
    from plexor.settings import ConfigSpec, Settings

hookspec = pluggy.HookspecMarker("plexor")
#: Marks a plugin function as the implementation of a ``plexor_*`` hook (the plugin API re-exports it
#: as ``plexor.hookimpl``; the kernel's built-in plugins import it from here).
hookimpl = pluggy.HookimplMarker("plexor")


@hookspec
def plexor_add_config(config: ConfigSpec) -> None:
    """Declare the settings this plugin reads, with types and defaults.

    Values come from the plugin's table in ``plexor.toml`` and from
    ``PLEXOR_<PLUGIN>_<KEY>`` environment variables, and are validated before
    any other hook runs; a bad value fails the plugin with a message naming the
    key and the file.

    :param config: call ``config.add(key, type, default, help=...)`` once per key.

    .. versionadded:: 0.1.0
    """


@hookspec
def plexor_register_tools(register: ToolRegistrar, settings: Settings) -> None:
    """Register the plugin's tools.

    :param register: ``register(func, name=None, ...)``; the tool is exposed as
        ``<namespace>_<name>``; its input schema comes from the signature and
        its description from the docstring.
    :param settings: this plugin's validated settings.

    .. versionadded:: 0.1.0
    """


@hookspec
def plexor_register_resources(register: ResourceRegistrar, settings: Settings) -> None:
    """Register fixed resources (``register(uri, reader, ...)``) and listers of dynamic ones.

    :param register: ``register(uri, reader, name=..., mime_type=...)`` for a fixed URI;
        ``register.lister(func)`` for a function returning resources that exist right now;
        ``register.app(uri, reader, ...)`` for an MCP App's ``ui://`` page (see :mod:`plexor.apps`).
    :param settings: this plugin's validated settings.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0 ``register.app`` (MCP Apps).
    """


@hookspec
def plexor_register_resource_templates(register: TemplateRegistrar, settings: Settings) -> None:
    """Register RFC 6570 resource templates, such as ``arbor://tree/{tree_id}``.

    :param register: ``register(uri_template, reader, name=..., mime_type=..., complete=...)``;
        the reader receives the template variables as keyword arguments.
    :param settings: this plugin's validated settings.

    .. versionadded:: 0.1.0
    """


@hookspec
def plexor_register_prompts(register: PromptRegistrar, settings: Settings) -> None:
    """Register prompts: functions whose string parameters are the prompt's arguments.

    :param register: ``register(func, name=None, description=None)``.
    :param settings: this plugin's validated settings.

    .. versionadded:: 0.1.0
    """


@hookspec
def plexor_register_models(register: ModelRegistrar) -> None:
    """Register peewee models; the kernel binds them to the plugin's own database.

    The database is a SQLite file under the data directory (WAL, foreign keys,
    busy timeout) unless the plugin's ``database_url`` setting names another
    (``postgresql://...``). Schema changes are declared as numbered migrations
    with ``register.migration(version, func)``.

    :param register: ``register(*model_classes)`` and ``register.migration(n, func)``.

    .. versionadded:: 0.1.0
    """


@hookspec
def plexor_register_commands(cli: click.Group, plugin: PluginHandle) -> None:
    """Add the plugin's command group to the ``plexor`` CLI (``plexor <plugin> ...``).

    :param cli: the root click group; add exactly one group named after the plugin.
    :param plugin: the plugin's handle: its settings come from the kernel's own config code
        (``plexor.toml`` and ``PLEXOR_<PLUGIN>_<KEY>``), and ``plugin.database`` opens the
        plugin's database on first use. No command needs to start a kernel.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0 receives ``plugin``.
    """


@hookspec
def plexor_startup(plugin: PluginHandle) -> object:
    """Open resources and start background work; may return an awaitable.

    Runs in state ``starting``, after the plugin's database is open. Make what
    tools need available with ``plugin.provide(service)``; tools read it back
    with ``ctx.service(Type)``. A plugin that keeps warming up afterwards (an
    index build) calls ``plugin.warming(fraction, message)`` and ``plugin.warmed()``.

    :param plugin: the plugin's handle (settings, database, logger, data directory, services).

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0 receives the plugin's handle instead of the kernel.
    """


@hookspec
def plexor_shutdown(plugin: PluginHandle) -> object:
    """Stop background work and release resources; may return an awaitable.

    Runs in state ``draining``, after in-flight requests of every kind finished
    and before the database is closed. ``plugin.withdraw(Type)`` takes a service back.

    :param plugin: the plugin's handle.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0 receives the plugin's handle instead of the kernel.
    """


@hookspec
def plexor_error_guidance(exception: BaseException, context: Mapping[str, object]) -> str | None:
    """Explain an exception raised by this plugin's code; synchronous.

    Return guidance text (what to do next), or ``None`` to let the kernel's
    default explain it. Must not be a coroutine: an un-awaited coroutine would
    count as an answer.

    :param exception: the exception a tool, resource or prompt raised.
    :param context: ``{"plugin", "tool" or "uri", "arguments"}``.

    .. versionadded:: 0.1.0
    """
