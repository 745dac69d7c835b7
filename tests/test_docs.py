"""The docs stay honest: every hook is documented and tested, and the tutorial runs as written."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from plexor import extending, hookspecs

ROOT = Path(__file__).resolve().parents[1]
AUTHORING = (ROOT / "docs" / "authoring.md").read_text(encoding="utf-8")
CONTENT_HOOKS = {n: f for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("plexor_")}
SERVER_HOOKS = {n: f for n, f in inspect.getmembers(extending, inspect.isfunction) if n.startswith("plexor_")}
HOOKS = CONTENT_HOOKS | SERVER_HOOKS


def test_there_are_hooks():
    assert len(CONTENT_HOOKS) == 10 and len(SERVER_HOOKS) == 11
    assert not set(CONTENT_HOOKS) & set(SERVER_HOOKS)


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hook_has_a_documentation_heading_with_its_signature(name):
    args = ", ".join(inspect.signature(HOOKS[name]).parameters)
    assert f"### `{name}({args})`" in AUTHORING, f"docs/authoring.md needs a section '### `{name}({args})`'"


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hookspec_documents_its_parameters_and_version(name):
    doc = inspect.getdoc(HOOKS[name]) or ""
    for param in inspect.signature(HOOKS[name]).parameters:
        assert f":param {param}:" in doc, f"{name} does not document {param}"
    assert ".. versionadded::" in doc


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hook_has_a_test_of_its_own(name):
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py"))
    assert re.search(rf"def test_hook_{name}\b", sources), f"write a test named test_hook_{name}"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", AUTHORING.split("## Tutorial", 1)[1].split("\n## ", 1)[0], re.S)


def test_the_tutorial_is_under_40_lines_and_runs(tmp_path):
    (toml_src,) = _blocks("toml")
    plugin_src, test_src = _blocks("python")
    assert len((toml_src + plugin_src + test_src).strip().splitlines()) < 50  # including blank lines
    code_lines = [ln for ln in (toml_src + plugin_src + test_src).splitlines() if ln.strip()]
    assert len(code_lines) < 40, len(code_lines)
    project = tomllib.loads(toml_src)
    entry_name, module = next(iter(project["project"]["entry-points"]["plexor"].items()))
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(plugin_src, encoding="utf-8")
    info = site / "plexor_hello-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['project']['name']}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[plexor]\n{entry_name} = {module}\n")
    (tmp_path / "test_hello.py").write_text(test_src, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PYTHONPATH"] = str(site)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_hello.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
