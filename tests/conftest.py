"""Shared helpers for the kernel's tests: plugins built in the test, real entry points on disk."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from plexor import hookimpl


def make_plugin(name: str = "demo", namespace: str | None = None, **hooks):
    """A plugin module built from plain functions, e.g. ``make_plugin(plexor_register_tools=fn)``.

    Each function is marked with ``hookimpl``, exactly as a plugin author would.
    """
    module = types.ModuleType(f"plexor_test_{name.replace('-', '_')}")
    if namespace:
        module.PLEXOR_NAMESPACE = namespace
    for hook, func in hooks.items():
        assert hook.startswith("plexor_"), hook
        func.__name__ = hook
        setattr(module, hook, hookimpl(func))
    return module


def tools_plugin(name: str = "demo", namespace: str | None = None, **funcs):
    """A plugin registering each keyword function as a tool named after the keyword."""

    def register_tools(register, settings):
        for method, func in funcs.items():
            register(func, name=method)

    return make_plugin(name, namespace, plexor_register_tools=register_tools)


@pytest.fixture
def site_dir(tmp_path, monkeypatch):
    """A folder on sys.path where tests install real distributions (dist-info + entry points)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    yield site
    for mod in [m for m in sys.modules if m.startswith("plexor_fake")]:
        del sys.modules[mod]


def install_fake_dist(site: Path, dist: str, entry_name: str, module: str, source: str, version: str = "1.0") -> None:
    """Write a module and a dist-info with a ``plexor`` entry point, as pip would."""
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[plexor]\n{entry_name} = {module}\n", encoding="utf-8")


@contextlib.contextmanager
def relay_site(tmp: Path, worker_tools: list[str], plugins: dict[str, str]) -> Iterator[dict[str, str]]:
    """The environment of a ``plexor connect`` test: the fake plugins ``plugins`` (name -> source, each
    installed as ``plexor-NAME``), a tool profile ``worker`` admitting ``worker_tools``; its daemon stopped after."""
    from conformance.serving import fixture_env

    home, site = tmp / "home", tmp / "site"
    (home / "config").mkdir(parents=True)
    site.mkdir()
    (home / "config" / "plexor.toml").write_text(f"[plexor.profiles.worker]\ntools = {json.dumps(worker_tools)}\n")
    for name, source in plugins.items():
        install_fake_dist(site, f"plexor-{name}", name, f"plexor_{name}", source)
    environ = fixture_env(home, PLEXOR_PLUGINS=",".join(plugins))
    environ["PYTHONPATH"] = os.pathsep.join([str(site), environ["PYTHONPATH"]])
    with daemon_stopped(environ):
        yield environ


@contextlib.contextmanager
def daemon_stopped(environ: dict[str, str]) -> Iterator[dict[str, str]]:
    """``environ``, and the shared daemon it names stopped at the end (a test's ``plexor connect`` started it)."""
    from plexor.features.daemon.process import read_registry, registry_path, stop_daemon

    try:
        yield environ
    finally:
        info = read_registry(registry_path(environ))
        if info is not None:
            with contextlib.suppress(OSError):
                stop_daemon(info, wait=10)


# Each test runs once in `tox`: the kernel env (PLEXOR_SUITE=kernel: the kernel and the template plugin)
# runs every test not marked `all_plugins`; the `all` env (PLEXOR_SUITE=all: every package installed)
# runs only the tests marked `all_plugins` and the folders below, which need every plugin. Without
# PLEXOR_SUITE (a plain `pytest tests`), everything runs.
SUITE = os.environ.get("PLEXOR_SUITE", "")
ALL_PLUGIN_FOLDERS = ("integration", "interop", "bundle")
_PLUGIN_MISSING = re.compile(r"(plexor[-_](arbor|keyboard|folder[-_]search|edgelake)|the (arbor|keyboard|folder-search|"
                             r"edgelake) plugin)[^.]*not installed", re.IGNORECASE)


def _needs_all(item: pytest.Item) -> bool:
    parts = Path(str(item.fspath)).parts
    return item.get_closest_marker("all_plugins") is not None or any(
        parts[i] == "tests" and parts[i + 1] in ALL_PLUGIN_FOLDERS for i in range(len(parts) - 1))


# Tests marked `serial` assert a wall-clock bound of a second or two, which a busy machine can break: tox
# runs the kernel env in two passes, `--serial=skip` on every core (pytest-xdist), then `--serial=only`
# in one process, alone. Without the option (a plain `pytest tests`), they run with the rest.
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--serial", choices=("skip", "only"), default=None,
                     help="skip the tests marked `serial`, or run only them (tox's two passes)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = items
    if SUITE in ("kernel", "all"):
        keep = [item for item in keep if _needs_all(item) == (SUITE == "all")]
    serial = config.getoption("--serial")
    if serial is not None:
        keep = [item for item in keep if (item.get_closest_marker("serial") is not None) == (serial == "only")]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # The serial pass finding none (a `-k` or path in tox's posargs that selects none of them) is no error.
    if session.config.getoption("--serial") == "only" and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    # A test that skips in the kernel env because a shipped plugin is missing would then run nowhere:
    # it must be marked `all_plugins` so the `all` env runs it.
    if SUITE == "kernel" and report.skipped and isinstance(report.longrepr, tuple) \
            and _PLUGIN_MISSING.search(str(report.longrepr[2])):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} skipped in the kernel env ({report.longrepr[2]}): mark it "
                           "`@pytest.mark.all_plugins` so that the `all` env runs it")
    return report
