"""``plexor bundle``: an MCP Bundle (``.mcpb``) for Claude Desktop, with the plugins the user names.

A bundle is a zip file with a ``manifest.json`` (the MCPB manifest, version 0.3) at its root. This one is
a ``python`` bundle: ``server/lib`` holds the kernel, the named plugins and every package they need,
installed by pip from where each was installed here (a checkout, or its released version), so the bundle
installs and runs without a network. ``server/main.py`` runs ``plexor serve`` (stdio) with those packages
first on the path and ``PLEXOR_PLUGINS`` set to the named plugins.

Some dependencies are compiled (pydantic-core, for one), so a bundle runs on the platform and the Python
minor version it was built with; the manifest says so (``compatibility``), and Claude Desktop refuses it
elsewhere instead of failing at start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from plexor.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from importlib.metadata import Distribution

__all__ = ["build_bundle", "bundle_cmd", "manifest"]

MANIFEST_VERSION = "0.3"
DESCRIPTION = "An MCP server whose tools, resources and prompts come from plugins."
PLATFORMS = {"linux": "linux", "darwin": "darwin", "win32": "win32"}

MAIN = '''"""Entry point of the Plexor MCP Bundle: `plexor serve` (stdio) with the packages bundled in lib/."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

from plexor.cli import main  # noqa: E402 - after the bundled packages are first on the path

main(["serve", *sys.argv[1:]], prog_name="plexor")
'''


def _distributions(names: list[str]) -> dict[str, Distribution]:
    """The installed distribution of each plugin named (a did-you-mean usage error for a name not installed)."""
    import difflib
    from importlib.metadata import entry_points

    found = {ep.name: ep for ep in entry_points(group="plexor")}
    dists: dict[str, Distribution] = {}
    problems = []
    for name in names:
        ep = found.get(name)
        if ep is None or ep.dist is None:
            near = difflib.get_close_matches(name, sorted(found), n=1)
            problems.append(f"{name!r} is not an installed plugin"
                            + (f"; did you mean {near[0]!r}?" if near else f" (installed: {', '.join(sorted(found)) or 'none'})"))
            continue
        dists[name] = ep.dist
    if problems:
        raise click.UsageError("; ".join(problems) + "\n`plexor plugins` lists the installed plugins.")
    return dists


def _requirement(dist: Distribution) -> str:
    """What pip installs ``dist`` from: the folder it was installed from (a checkout), else its exact version."""
    from urllib.parse import unquote, urlparse

    raw = dist.read_text("direct_url.json")
    if raw:
        url = str(json.loads(raw).get("url", ""))
        if url.startswith("file://"):
            path = unquote(urlparse(url).path)
            if os.name == "nt" and path.startswith("/"):
                path = path[1:]
            return path
    return f"{dist.metadata['Name']}=={dist.version}"


def _vendor(requirements: list[str], lib: Path) -> None:
    """Install ``requirements`` and everything they need into ``lib`` (pip ``--target``)."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
           "--no-warn-script-location", "--target", str(lib), *requirements]
    out = subprocess.run(cmd, capture_output=True, text=True)  # noqa: S603 - our interpreter's pip
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-15:])
        raise click.ClickException(f"pip could not install {', '.join(requirements)} into the bundle:\n{tail}\n"
                                   "Check that each is installable here (pip needs the package index, or a local "
                                   "wheel cache, while building; the bundle itself installs offline).")
    shutil.rmtree(lib / "bin", ignore_errors=True)  # console scripts with this machine's interpreter path
    for cache in list(lib.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def _tools(names: list[str]) -> list[dict[str, str]]:
    """Each tool the named plugins register (name and the first line of its description)."""
    from plexor.core.kernel import Kernel

    environ = {k: v for k, v in os.environ.items() if k not in ("PLEXOR_PLUGINS", "PLEXOR_DISABLE")}
    environ["PLEXOR_PLUGINS"] = ",".join(names)
    kernel = Kernel(environ=environ)
    kernel.load()
    return [{"name": t.name, "description": _first_sentence(t.description or t.name)}
            for t in sorted(kernel.registry.tools.values(), key=lambda t: t.name)]


def _first_sentence(text: str) -> str:
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    head, dot, _ = paragraph.partition(". ")
    return head + "." if dot else paragraph


def manifest(names: list[str], versions: dict[str, str], tools: list[dict[str, str]]) -> dict[str, object]:
    """The bundle's ``manifest.json`` (MCPB manifest 0.3) for the plugins ``names``."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    plugins = ", ".join(f"{n} {versions[n]}" for n in names) or "none (the kernel's own tools only)"
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "plexor",
        "display_name": "Plexor",
        "version": __version__,
        "description": DESCRIPTION,
        "long_description": (f"Plexor {__version__}, a microkernel MCP server, with these plugins: {plugins}. "
                             "Everything it needs is inside the bundle; nothing is downloaded at install."),
        "author": {"name": "Plexor developers"},
        "license": "MIT",
        "keywords": ["mcp", "plugins", *names],
        "server": {
            "type": "python",
            "entry_point": "server/main.py",
            "mcp_config": {
                "command": "python" if sys.platform == "win32" else "python3",
                "args": ["${__dirname}/server/main.py"],
                "env": {"PYTHONPATH": "${__dirname}/server/lib", "PYTHONNOUSERSITE": "1",
                        "PLEXOR_PLUGINS": ",".join(names)},
            },
        },
        "tools": tools,
        "tools_generated": True,  # a plugin may register tools from its settings (edgelake's YAML)
        "compatibility": {
            "platforms": [PLATFORMS.get(sys.platform, sys.platform)],
            "runtimes": {"python": f">={python},<{sys.version_info.major}.{sys.version_info.minor + 1}"},
        },
    }


def build_bundle(names: list[str], output: Path) -> dict[str, object]:
    """Build the bundle of the plugins ``names`` at ``output``; returns its manifest."""
    from importlib.metadata import distribution

    dists = _distributions(names)
    try:  # before pip's minute of work, not after it
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.UsageError(f"cannot write the bundle to {output}: {exc.strerror or exc}; "
                               "pass --output with a path in a folder you can write to") from exc
    requirements = [_requirement(distribution("plexor"))] + [_requirement(d) for d in dists.values()]
    with tempfile.TemporaryDirectory(prefix="plexor-bundle-") as tmp:
        root = Path(tmp)
        server = root / "server"
        _vendor(requirements, server / "lib")
        (server / "main.py").write_text(MAIN, encoding="utf-8")
        data = manifest(names, {n: d.version for n, d in dists.items()}, _tools(names))
        (root / "manifest.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        partial = output.with_name(output.name + ".part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(root).as_posix())
        os.replace(partial, output)
    return data


@click.command("bundle")
@click.argument("plugins", nargs=-1)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the bundle [default: plexor-VERSION.mcpb in the current directory].")
def bundle_cmd(plugins: tuple[str, ...], output: Path | None) -> None:
    """Build an MCP Bundle (.mcpb) for Claude Desktop with the PLUGINS named (e.g. keyboard arbor).

    The kernel, those plugins and every package they need go inside, installed by pip from where each
    is installed here, so the bundle installs with one click and no network. It runs on this platform
    and Python minor version (compiled dependencies). Open the file with Claude Desktop to install it.
    """
    names = list(dict.fromkeys(p.strip() for p in plugins if p.strip() and p.strip() != "plexor"))
    target = output or Path(f"plexor-{__version__}.mcpb")
    data = build_bundle(names, target)
    size = target.stat().st_size / 1_000_000
    click.echo(f"wrote {target} ({size:.1f} MB): Plexor {__version__} with "
               f"{', '.join(names) or 'no plugins'}, {len(tools) if isinstance(tools := data['tools'], list) else 0} tools; "
               "open it with Claude Desktop to install")
