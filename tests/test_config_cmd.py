"""A first configuration: `plexor config path|edit|validate`, `plexor paths` on a fresh machine, shell completion."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest
from conftest import install_fake_dist

SETTINGS = """
from plexor import hookimpl

@hookimpl
def plexor_add_config(config):
    config.add("level", int, 3, help="how loud")
    config.add("mode", str, "fast", choices=["fast", "slow"])
    config.add("roots", list, ["~/a"], help="folders")
    config.add("secret", str, None, help="an API key")
    config.add("strict", bool, False)
"""


@pytest.fixture
def run(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakeconf", "fakeconf", "plexor_fakeconf", SETTINGS)

    def go(*args, env=None, **kw):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
        environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir), PLEXOR_PLUGINS="fakeconf")
        environ.update(env or {})
        argv = [sys.executable, "-m", "plexor", *args] if "executable" not in kw else [kw.pop("executable"), *args]
        return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=120, **kw)

    return go


def test_paths_says_which_directories_do_not_exist_yet(run, plexor_home):
    out = run("paths")
    assert out.returncode == 0, out.stderr
    lines = dict(re.split(r"\s+", ln, maxsplit=1) for ln in out.stdout.splitlines())
    assert lines["config_dir"] == f"{plexor_home / 'config'}  (does not exist yet: `plexor config path` creates it)"
    assert "does not exist yet" in lines["config_file"]
    run("config", "path")
    out = run("paths")
    lines = dict(re.split(r"\s+", ln, maxsplit=1) for ln in out.stdout.splitlines())
    assert lines["config_dir"] == str(plexor_home / "config") and lines["config_file"].endswith("plexor.toml")


def test_config_path_creates_a_commented_starter_once(run, plexor_home):
    first = run("config", "path")
    path = plexor_home / "config" / "plexor.toml"
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"{path}\n" and f"created {path}" in first.stderr
    text = path.read_text(encoding="utf-8")
    assert tomllib.loads(text) == {}, "everything in the starter is commented out"
    assert "# [fakeconf]" in text and "# level = 3    # how loud (integer)" in text
    assert '# mode = "fast"    # string, one of fast, slow' in text
    assert "# secret =     # an API key (string; unset by default)" in text
    path.write_text(text + "[fakeconf]\nlevel = 5\n", encoding="utf-8")
    again = run("config", "path")
    assert again.returncode == 0 and "created" not in again.stderr
    assert path.read_text(encoding="utf-8").endswith("level = 5\n"), "an existing file is never overwritten"


def test_every_line_of_the_starter_uncommented_is_a_valid_configuration(run, plexor_home):
    run("config", "path")
    path = plexor_home / "config" / "plexor.toml"
    lines = []
    for ln in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"^# \[[\w-]+\]$", ln):
            lines.append(ln[2:])
        elif re.match(r"^# \w+ = \S", ln):
            lines.append(ln[2:].split("    #")[0])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert tomllib.loads(path.read_text())["fakeconf"] == {"level": 3, "mode": "fast", "roots": ["~/a"], "strict": False}
    done = run("config", "validate")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{path}: ok\n"


def test_validate_names_every_problem_and_exits_2(run, plexor_home):
    (plexor_home / "config").mkdir(parents=True)
    path = plexor_home / "config" / "plexor.toml"
    path.write_text('[fakeconf]\nlevl = 4\n\n[fakecnf]\nx = 1\n', encoding="utf-8")
    done = run("config", "validate")
    assert done.returncode == 2
    assert "unknown setting 'levl' in [fakeconf]" in done.stderr and "Did you mean 'level'?" in done.stderr
    assert "unknown table [fakecnf]" in done.stderr and "2 problem(s)" in done.stderr
    path.write_text("", encoding="utf-8")
    done = run("config", "validate", env={"PLEXOR_FAKECONF_MODE": "medium"})
    assert done.returncode == 2
    assert "plugin fakeconf failed" in done.stderr and "PLEXOR_FAKECONF_MODE" in done.stderr
    path.write_text("[fakeconf\n", encoding="utf-8")
    broken = run("config", "validate")
    assert broken.returncode == 2 and "is not valid TOML" in broken.stderr and "Traceback" not in broken.stderr


def test_validate_without_a_file_checks_the_defaults(run, plexor_home):
    done = run("config", "validate")
    assert done.returncode == 0, done.stderr
    assert "(not created yet: defaults): ok" in done.stdout
    assert not (plexor_home / "config" / "plexor.toml").exists()


def test_edit_opens_the_starter_in_the_editor_then_validates(run, plexor_home, tmp_path):
    editor = tmp_path / "editor.sh"  # an editor that changes a setting, as a person would
    editor.write_text('#!/bin/sh\nprintf "[fakeconf]\\nlevel = 9\\n" >> "$1"\n', encoding="utf-8")
    editor.chmod(0o755)
    done = run("config", "edit", env={"EDITOR": str(editor), "VISUAL": ""})
    assert done.returncode == 0, done.stderr
    path = plexor_home / "config" / "plexor.toml"
    assert "created" in done.stderr and path.read_text(encoding="utf-8").startswith("# Plexor's configuration")
    assert tomllib.loads(path.read_text(encoding="utf-8")) == {"fakeconf": {"level": 9}}
    assert done.stdout.endswith(": ok\n")
    bad = tmp_path / "bad.sh"
    bad.write_text('#!/bin/sh\nprintf "level = 9\\n[fakeconf]\\nlevel = \\"x\\"\\n" > "$1"\n', encoding="utf-8")
    bad.chmod(0o755)
    done = run("config", "edit", env={"EDITOR": str(bad), "VISUAL": ""})
    assert done.returncode == 2 and "level" in done.stderr


def test_shell_completion_is_click_s(run):
    """`eval "$(_PLEXOR_COMPLETE=bash_source plexor)"` (README): the console script's completion."""
    from pathlib import Path

    script_path = Path(sys.executable).parent / "plexor"

    def complete(**env):
        return run(env=env, executable=str(script_path))

    script = complete(_PLEXOR_COMPLETE="bash_source")
    assert script.returncode == 0 and "complete -o nosort -F _plexor_completion plexor" in script.stdout
    words = complete(_PLEXOR_COMPLETE="bash_complete", COMP_WORDS="plexor con", COMP_CWORD="1")
    assert words.returncode == 0
    assert set(words.stdout.split()) == {"plain,config", "plain,connect"}
    sub = complete(_PLEXOR_COMPLETE="bash_complete", COMP_WORDS="plexor config v", COMP_CWORD="2")
    assert sub.stdout.split() == ["plain,validate"]
