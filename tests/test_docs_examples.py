"""Every Python example of docs/authoring.md and the plugin READMEs runs, not only the tutorial.

Each ```python block carries a marker right above it (tests/test_readme_commands.py reads them):

    <!-- example: plugin -->        a plugin module (or part of one): loaded by a real kernel and
                                    exercised through a real MCP client; see ``check_plugin``
    <!-- example: plugin NAME -->   the same, and installed as the plugin NAME for the test examples
    <!-- example: test -->          a pytest test: run by pytest in a scratch folder, with the named
                                    example plugins installed as pip would
    <!-- example: tutorial -->      run by tests/test_docs.py and tests/test_readme_commands.py
    <!-- not-run: why -->           cannot run here, and says why

The fragments refer to the plugin's own code (a ``Store``, an ``Index``, the functions ``search``
and ``reindex``...): ``STAND_INS`` supplies small ones. A fragment that defines tools without a
``plexor_register_tools`` gets them registered, and one without ``plexor_startup`` gets a ``Store``
provided, as the rest of its plugin would. The module is exactly prelude + stand-ins + block: no
``from __future__ import annotations`` hides an annotation that fails at import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner
from test_readme_commands import Block, blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "authoring.md", *sorted((ROOT / "plugins").glob("*/README.md"))]
PYTHON = [b for doc in DOCS for b in blocks(doc) if b.lang == "python"]

PRELUDE = "from typing import Any\nfrom plexor import hookimpl, Context, PluginHandle, InvalidArgument, NotFound\n"
STAND_INS = '''
class Store:
    """The plugin's own storage, as the fragments use it."""
    def __init__(self, database: Any = None) -> None:
        self.database = database
    def get_tree(self, tree_id: str) -> dict:
        return {"id": tree_id}
    def active(self) -> list:
        return ["t1", "t2"]
    def ids_starting(self, prefix: str) -> list:
        return [t for t in self.active() if t.startswith(prefix)]
    def sweep(self, scheduled_window: float, archive_window: float) -> dict:
        return {"archived": [], "purged": []}

class Index:
    """A search index that warms up in the background, as the fragments use it."""
    def __init__(self, settings: Any, data_dir: Any) -> None:
        self.stopped = False
    def start_in_background(self, on_progress: Any, on_done: Any) -> None:
        import threading
        def run() -> None:
            on_progress(0.5, "half way")
            on_done()
        threading.Thread(target=run, daemon=True).start()
    def stop(self) -> None:
        self.stopped = True

def search(query: str) -> dict:
    """Search the index."""
    return {"query": query}

def reindex() -> dict:
    """Rebuild the index."""
    return {"started": True}

def all_keys() -> dict:
    return {"keys": ["a"]}

def read_tree(tree_id: str) -> dict:
    return {"id": tree_id}

_BEFORE = set(globals()) | {"_BEFORE"}
'''
AUTO_HOOKS = '''
_MINE = [v for k, v in list(globals().items()) if k not in _BEFORE and callable(v)
         and getattr(getattr(v, "__code__", None), "co_varnames", ())[:1] == ("ctx",)]
if "plexor_register_tools" not in globals():
    @hookimpl
    def plexor_register_tools(register, settings):
        for function in _MINE:
            register(function)
if "plexor_startup" not in globals():
    @hookimpl
    def plexor_startup(plugin):
        plugin.provide(Store(plugin.database))
'''


def marker(block: Block) -> tuple[str, str]:
    assert block.marker is not None, (f"{block.name}: mark the example (<!-- example: plugin|test|tutorial --> or "
                                      "<!-- not-run: why -->); see tests/test_docs_examples.py")
    kind, detail = block.marker
    if kind == "example":
        what, _, name = detail.partition(" ")
        return what, name
    return kind, detail


def module_source(block: Block) -> str:
    return PRELUDE + STAND_INS + block.text + AUTO_HOOKS


def test_every_python_example_is_marked():
    assert len(PYTHON) >= 15
    for block in PYTHON:
        kind, detail = marker(block)
        assert kind in {"plugin", "test", "tutorial", "not-run"}, f"{block.name}: unknown example kind {kind!r}"
        if kind == "not-run":
            assert len(detail) >= 10, f"{block.name}: say why it cannot run"
    assert sum(marker(b)[0] == "plugin" for b in PYTHON) >= 10


def _load(block: Block) -> types.ModuleType:
    module = types.ModuleType(f"plexor_docs_{block.line}")
    # dont_inherit: this test module's `from __future__ import annotations` must not apply to the example
    exec(compile(module_source(block), block.name, "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    return module


async def check_plugin(plexor: Any, block: Block) -> None:
    """Loaded, ready and warning-free; every tool listed, every lister listing, fixed resources and prompts read."""
    name = "docs"
    module = _load(block)
    async with plexor.client(plugins=[(name, module)]) as client:
        rec = client.kernel.records[name]
        with anyio.fail_after(30):
            while rec.state.value == "starting":
                await anyio.sleep(0.02)
        assert rec.state.value == "ready", f"{block.name}: {rec.state.value}: {rec.error}"
        assert not rec.warnings and not (rec.settings and rec.settings.warnings), (block.name, rec.warnings)
        registry = rec.registry
        tools = {t.name for t in (await client.list_tools()).tools}
        assert set(registry.tools) <= tools, block.name
        listed = [r.uri for r in (await client.list_resources()).resources if not r.uri.startswith("plexor://")]
        fixed = {str(uri) for uri in registry.resources}
        if registry.listers:
            assert set(listed) - fixed, f"{block.name}: its resource lister listed nothing (see the kernel's log)"
        for uri in fixed:  # what a lister lists is read through a template, which a fragment may leave out
            assert (await client.read_resource(uri)).contents, (block.name, uri)
        if registry.templates:
            assert (await client.list_resource_templates()).resource_templates, block.name
        for prompt in (await client.list_prompts()).prompts:
            if prompt.name in registry.prompts:
                args = {a.name: "t1" for a in prompt.arguments or []}
                assert (await client.get_prompt(prompt.name, args)).messages, block.name
        if hasattr(module, "plexor_register_commands"):
            root = click.Group("plexor")
            module.plexor_register_commands(cli=root, plugin=rec.handle)
            for group_name, group in root.commands.items():
                for sub in getattr(group, "commands", {}) or {"": None}:
                    done = CliRunner().invoke(root, [group_name, *([sub] if sub else []), "--help"])
                    assert done.exit_code == 0, (block.name, done.output)


@pytest.mark.anyio
@pytest.mark.parametrize("block", [b for b in PYTHON if b.marker and marker(b)[0] == "plugin"], ids=lambda b: b.name)
async def test_plugin_examples_run(plexor, block: Block):
    if "plexor_arbor." in block.text:
        pytest.importorskip("plexor_arbor", reason="the example uses plexor-arbor's models")
    await check_plugin(plexor, block)


@pytest.mark.parametrize("block", [b for b in PYTHON if b.marker and marker(b)[0] == "test"], ids=lambda b: b.name)
def test_test_examples_pass(block: Block, tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    for source in PYTHON:
        kind, name = marker(source)
        if kind == "plugin" and name:
            module = f"plexor_{name}"
            (site / f"{module}.py").write_text(module_source(source), encoding="utf-8")
            info = site / f"{module}-0.1.0.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: plexor-{name}\nVersion: 0.1.0\n")
            (info / "entry_points.txt").write_text(f"[plexor]\n{name} = {module}\n")
    (tmp_path / "test_example.py").write_text(block.text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PYTHONPATH"] = str(site)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{block.name}\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    assert " passed" in done.stdout and "skipped" not in done.stdout
