"""Shared helpers for the kernel's tests: plugins built in the test, real entry points on disk."""

from __future__ import annotations

import sys
import textwrap
import types
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
