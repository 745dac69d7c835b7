"""The plugin author's kit: a pytest plugin (entry point ``pytest11``) with fixtures.

Fixtures
--------
``plexor_home``
    An isolated ``PLEXOR_HOME`` (config, data and logs in a temporary folder),
    with every other ``PLEXOR_*`` variable cleared for the test.
``plexor_config``
    ``plexor_config({"arbor": {"scheduled_window": 60}})`` writes ``plexor.toml``.
``plexor``
    A :class:`Harness`: ``async with plexor.client(plugins=[...]) as client``
    starts a real kernel with the chosen plugins and connects the SDK's MCP
    ``Client`` to it (in memory, with JSON-RPC framing); ``plexor.kernel(...)``
    gives the kernel alone; ``plexor.stdio_client(...)`` launches ``plexor
    serve`` as a subprocess and connects over stdio.
``plexor_postgres``
    A database URL of a PostgreSQL schema of the test's own (dropped afterwards),
    so tests running at once never share a table; the server is
    ``$PLEXOR_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
    the test is skipped, saying why, where none is reachable.

Plugins are chosen as installed names (``installed=["arbor"]``) or as objects
defined in the test (``plugins=[("hello", module_or_class)]``); registering
them for one test leaves nothing behind for the next.

Async tests use anyio's pytest plugin: mark them ``@pytest.mark.anyio``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from click.testing import Result
    from mcp import Client

    from plexor.core.kernel import Kernel
    from plexor.plugin_commands import PluginGroup

__all__ = ["Harness", "app_page_problems", "plexor", "plexor_config", "plexor_home", "plexor_postgres", "plugin_cli",
           "write_config"]

# Read when pytest loads this plugin, before plexor_home clears the PLEXOR_* variables of a test.
POSTGRES = os.environ.get("PLEXOR_TEST_POSTGRES") or "postgresql://postgres@127.0.0.1:5432/test"


def plugin_cli(environ: dict[str, str] | None = None) -> PluginGroup:
    """A fresh ``plexor`` root click group whose plugin commands are configured from ``environ``.

    The same group the console script runs (core commands plus every plugin's,
    each plugin handed its :class:`plexor.PluginHandle`), but built anew, so a
    test's ``PLEXOR_HOME`` and settings apply::

        result = CliRunner().invoke(plugin_cli(), ["arbor", "sweep", "--json"])
    """
    from plexor.cli import main
    from plexor.plugin_commands import PluginGroup

    group = PluginGroup(name="plexor", commands=dict(main.commands), params=list(main.params))
    group.environ = dict(os.environ if environ is None else environ)
    return group


def write_config(home: Path, tables: Mapping[str, Mapping[str, object]]) -> Path:
    """Write ``plexor.toml`` under ``home`` from ``{plugin: {key: value}}``."""
    lines: list[str] = []
    for table, values in tables.items():
        lines.append(f'["{table}"]')
        for key, value in values.items():
            lines.append(f"{key} = {_toml(value)}")
        lines.append("")
    path = home / "config" / "plexor.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _toml(value: object) -> str:
    import json

    if value is None:
        raise ValueError("TOML has no null: leave the key out to get its default")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {_toml(v)}" for k, v in value.items()) + "}"
    # A JSON string without \u escapes for non-ASCII is a valid TOML basic string.
    return json.dumps(str(value), ensure_ascii=False)


_URL_ATTRS = {"src", "href", "action", "formaction", "srcset", "poster", "data", "background", "xlink:href", "ping"}


def app_page_problems(html: str) -> list[str]:
    """What keeps an MCP App's page from being self-contained and locked down; ``[]`` when nothing does.

    The page must declare a Content-Security-Policy (a ``<meta http-equiv>``) with ``default-src 'none'``
    and ``connect-src 'none'`` that allows each inline ``<script>`` and ``<style>`` by its sha256; it may
    load nothing (no ``src``/``href``/... attribute but a ``data:`` URL or a ``#fragment``) and carry no
    inline event handler (``on*`` attribute)::

        assert app_page_problems(read_app()) == []
    """
    import base64
    import hashlib
    from html.parser import HTMLParser

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.open: tuple[str, list[str]] | None = None
            self.csp: str | None = None
            self.inline: list[tuple[str, str]] = []
            self.problems: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            named = {k.lower(): v or "" for k, v in attrs}
            if tag == "meta" and named.get("http-equiv", "").lower() == "content-security-policy":
                self.csp = named.get("content", "")
            for key, value in named.items():
                if key.startswith("on"):
                    self.problems.append(f"<{tag}> has an inline event handler {key}")
                elif key in _URL_ATTRS and not value.startswith(("data:", "#")):
                    self.problems.append(f"<{tag} {key}={value!r}> loads something")
            if tag in ("script", "style"):
                self.open = (tag, [])

        def handle_data(self, data: str) -> None:
            if self.open is not None:
                self.open[1].append(data)

        def handle_endtag(self, tag: str) -> None:
            if self.open is not None and tag == self.open[0]:
                self.inline.append((tag, "".join(self.open[1])))
                self.open = None

    page = Page()
    page.feed(html)
    problems, csp = page.problems, page.csp
    if csp is None:
        return [*problems, "no Content-Security-Policy <meta http-equiv> in the page"]
    rules = {part.split()[0]: part.split()[1:] for part in csp.split(";") if part.split()}
    for rule in ("default-src", "connect-src"):
        if rules.get(rule) != ["'none'"]:
            problems.append(f"the CSP's {rule} is {rules.get(rule)}, not 'none'")
    for tag, text in page.inline:
        digest = "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
        if rules.get(f"{tag}-src") != [digest]:
            problems.append(f"the CSP's {tag}-src does not allow exactly the page's inline <{tag}> ({digest})")
    return problems


class Harness:
    """Starts kernels and clients for one test, inside its ``PLEXOR_HOME``."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def environ(self, installed: Iterable[str] | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
        environ["PLEXOR_HOME"] = str(self.home)
        if installed is not None:
            environ["PLEXOR_PLUGINS"] = ",".join(installed)
        environ.update(env or {})
        return environ

    def cli(self, args: list[str], *, installed: Iterable[str] | None = None, env: dict[str, str] | None = None,
            input: str | None = None) -> Result:  # noqa: A002 - click's name
        """Run ``plexor ARGS`` in-process (plugin commands included); returns click's ``Result``."""
        from click.testing import CliRunner

        environ = self.environ(installed, env)
        return CliRunner().invoke(plugin_cli(environ), args, env=environ, input=input, catch_exceptions=False)

    @asynccontextmanager
    async def kernel(
        self,
        plugins: Iterable[tuple[str, object]] = (),
        *,
        installed: Iterable[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> AsyncIterator[Kernel]:
        """A started kernel with ``plugins`` (objects) and/or ``installed`` (entry-point names); stopped afterwards."""
        from plexor.core.kernel import Kernel

        kernel = Kernel(list(plugins), load_entry_points=installed is not None, environ=self.environ(installed, env))
        await kernel.start()
        try:
            yield kernel
        finally:
            await kernel.stop()

    @asynccontextmanager
    async def client(
        self,
        plugins: Iterable[tuple[str, object]] = (),
        *,
        installed: Iterable[str] | None = None,
        env: dict[str, str] | None = None,
        mode: str = "legacy",
        **client_kwargs: Any,
    ) -> AsyncIterator[Client]:
        """An MCP ``Client`` connected in memory to a started kernel; ``client.kernel`` is the kernel."""
        from mcp import Client

        from plexor.serving.server import build_server

        async with self.kernel(plugins, installed=installed, env=env) as kernel:
            server = build_server(kernel)
            async with Client(server, mode=mode, **client_kwargs) as client:  # type: ignore[arg-type]
                client.kernel = kernel  # type: ignore[attr-defined]
                yield client

    @asynccontextmanager
    async def stdio_client(
        self,
        *,
        installed: Iterable[str] | None = None,
        env: dict[str, str] | None = None,
        args: Iterable[str] = (),
        **client_kwargs: Any,
    ) -> AsyncIterator[Client]:
        """Launch ``python -m plexor serve`` in a subprocess and connect over stdio."""
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "plexor", "serve", *args],
            env=self.environ(installed, env),
        )
        async with Client(params, mode=client_kwargs.pop("mode", "legacy"), **client_kwargs) as client:
            yield client


@pytest.fixture
def plexor_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``PLEXOR_HOME`` for this test; other ``PLEXOR_*`` variables are cleared."""
    for key in list(os.environ):
        if key.startswith("PLEXOR_"):
            monkeypatch.delenv(key)
    home = tmp_path / "plexor-home"
    home.mkdir()
    monkeypatch.setenv("PLEXOR_HOME", str(home))
    return home


@pytest.fixture
def plexor_config(plexor_home: Path) -> Callable[[Mapping[str, Mapping[str, object]]], Path]:
    """``plexor_config({"plugin": {"key": value}})`` writes the test's ``plexor.toml``."""

    def write(tables: Mapping[str, Mapping[str, object]]) -> Path:
        return write_config(plexor_home, tables)

    return write


@pytest.fixture
def plexor(plexor_home: Path) -> Harness:
    """A :class:`Harness` bound to this test's ``PLEXOR_HOME``."""
    return Harness(plexor_home)


@pytest.fixture
def plexor_postgres() -> Iterator[str]:
    """A PostgreSQL schema of this test's own: yields the database URL whose ``search_path`` is it.

    The schema is dropped afterwards, so tests running at once (pytest-xdist workers, other sessions on the
    machine) never share a table. Skips, saying why, without psycopg2 or a reachable server.
    """
    import uuid

    try:
        import psycopg2
    except ImportError:
        pytest.skip("PostgreSQL tests need psycopg2 (pip install psycopg2-binary)")
    try:
        conn = psycopg2.connect(POSTGRES, connect_timeout=3)
    except psycopg2.OperationalError as exc:
        pytest.skip(f"no PostgreSQL reachable at {POSTGRES} (PLEXOR_TEST_POSTGRES): {str(exc).strip()}")
    conn.autocommit = True
    schema = f"plexor_test_{uuid.uuid4().hex[:12]}"
    with conn.cursor() as cur:
        cur.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{POSTGRES}{'&' if '?' in POSTGRES else '?'}options=-csearch_path%3D{schema}"
    finally:
        with conn.cursor() as cur:
            cur.execute("SET lock_timeout = '20s'")
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()
