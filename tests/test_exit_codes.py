"""One exit-code rule for every command, core and plugin (README "Exit codes", `plexor --help`).

0: done. 1: the command was right, but the work failed or found nothing. 2: what was typed or
configured must change. The click tree is walked, so a new command without failure cases here fails
`test_every_command_has_failure_cases`; each case runs the real command, with the real plugins that
are installed (a plugin's commands are checked where it is installed: tox's `all` env has them all).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import install_fake_dist

from plexor.testing import plugin_cli

TOOLS = """
from plexor import hookimpl, InvalidArgument

@hookimpl
def plexor_register_tools(register, settings):
    def fail() -> dict:
        '''Always fails.'''
        raise RuntimeError("broken")

    def picky(n: int) -> dict:
        '''Takes 1 to 3.'''
        if not 1 <= n <= 3:
            raise InvalidArgument(f"n = {n} is out of range", "Pass 1 to 3.")
        return {"n": n}

    register(fail)
    register(picky)
"""

FAILING_EDITOR = "#!/bin/sh\nexit 3\n"
BAD_TOML_EDITOR = '#!/bin/sh\nprintf "[keyboard\\n" >> "$1"\n'

# command path -> [(exit code, arguments after `plexor`, extra environment)]; "{tmp}" is a scratch folder.
CASES: dict[tuple[str, ...], list[tuple[int, list[str], dict[str, str]]]] = {
    ("serve",): [(2, ["serve", "--transport", "pigeon"], {}),
                 (2, ["serve", "--transport", "http", "--token-file", "{tmp}/missing"], {}),
                 (2, ["serve", "--workers", "2"], {})],
    ("connect",): [(2, ["connect", "--log-level", "loud"], {})],
    ("plugins",): [(2, ["plugins", "--bogus"], {}), (2, ["plugins"], {"PLEXOR_PLUGINS": "fakexit,nosuch"})],
    ("tools",): [(2, ["tools", "--json", "extra"], {})],
    ("call",): [(1, ["call", "fakexit_fail"], {}), (2, ["call", "fakexit_picky", "--arg", "n=9"], {}),
                (2, ["call", "fakexit_nope"], {}), (2, ["call", "fakexit_picky", "--arg", "n"], {})],
    ("paths",): [(2, ["paths", "--bogus"], {})],
    ("config", "path"): [(1, ["config", "path"], {"PLEXOR_HOME": "{tmp}/a-file/home"}),
                         (2, ["config", "path", "extra"], {})],
    ("config", "edit"): [(1, ["config", "edit"], {"EDITOR": "{tmp}/failing-editor", "VISUAL": ""}),
                         (2, ["config", "edit"], {"EDITOR": "{tmp}/bad-toml-editor", "VISUAL": ""})],
    ("config", "validate"): [(2, ["config", "validate"], {"PLEXOR_LOG_LEVEL": "loud"})],
    ("install",): [(2, ["install", "nosuchclient"], {})],
    ("uninstall",): [(2, ["uninstall"], {})],
    ("bundle",): [(2, ["bundle", "nosuchplugin"], {}), (2, ["bundle", "--bogus"], {}),
                  (2, ["bundle", "--output", "{tmp}/a-file/plexor.mcpb"], {})],
    ("arbor", "sweep"): [(2, ["arbor", "sweep", "--bogus"], {}),
                         (2, ["arbor", "sweep"], {"PLEXOR_ARBOR_SCHEDULED_WINDOW": "soon"})],
    ("arbor", "export"): [(1, ["arbor", "export", "22222222-2222-4222-8222-222222222222"], {}),
                          (2, ["arbor", "export"], {})],
    ("arbor", "import"): [(2, ["arbor", "import", "{tmp}/not-json.txt"], {}),
                          (2, ["arbor", "import", "{tmp}/missing.json"], {})],
    ("arbor", "purge"): [(1, ["arbor", "purge", "22222222-2222-4222-8222-222222222222", "--yes"], {})],
    ("folder-search", "add"): [(2, ["folder-search", "add", "{tmp}/not-json.txt"], {})],
    ("folder-search", "set"): [(1, ["folder-search", "set", "nosuch", "--watch"], {}),
                               (2, ["folder-search", "set", "nosuch"], {"PLEXOR_FOLDER_SEARCH_RESCAN_INTERVAL": "-1"})],
    ("folder-search", "remove"): [(1, ["folder-search", "remove", "nosuch"], {})],
    ("folder-search", "list"): [(2, ["folder-search", "list"], {"PLEXOR_FOLDER_SEARCH_RESCAN_INTERVAL": "-1"})],
    ("folder-search", "index"): [(1, ["folder-search", "index"], {})],
    ("folder-search", "status"): [(2, ["folder-search", "status", "--bogus"], {})],
    ("folder-search", "search"): [(2, ["folder-search", "search"], {})],
    ("keyboard", "lookup"): [(1, ["keyboard", "lookup", "escpae"], {}), (1, ["keyboard", "lookup", "retrun", "--fuzzy"], {}),
                             (2, ["keyboard", "lookup", "esc", "--layout", "typewriter"], {})],
    ("keyboard", "combo"): [(2, ["keyboard", "combo", "cmd+shift"], {})],
    ("keyboard", "categories"): [(2, ["keyboard", "categories", "extra"], {})],
}


def _leaves(command: click.Command, ctx: click.Context, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if not isinstance(command, click.Group):
        return [path]
    out = []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            out += _leaves(sub, click.Context(sub, parent=ctx, info_name=name), (*path, name))
    return out


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """The commands run in this process configure logging (a plugin command quiets it to "critical"); put it
    back, or the tests after these would log nothing (test_tools' "the traceback went to the log" saw '')."""
    import plexor.log

    saved = dict(plexor.log._wanted)
    yield
    plexor.log._wanted.clear()
    if saved:
        plexor.log.configure(logging.getLevelName(saved["level"]).lower(), force=True)
    else:
        import structlog

        structlog.reset_defaults()


@pytest.fixture
def scratch(tmp_path: Path, plexor_home: Path, site_dir: Path) -> dict[str, Any]:
    install_fake_dist(site_dir, "plexor-fakexit", "fakexit", "plexor_fakexit", TOOLS)
    (tmp_path / "a-file").write_text("a file, not a folder", encoding="utf-8")
    (tmp_path / "not-json.txt").write_text("{not json", encoding="utf-8")
    for name, text in (("failing-editor", FAILING_EDITOR), ("bad-toml-editor", BAD_TOML_EDITOR)):
        (tmp_path / name).write_text(text, encoding="utf-8")
        (tmp_path / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(plexor_home), PLEXOR_LOG_LEVEL="critical", PLEXOR_ARBOR_SWEEP_INTERVAL="0",
               PLEXOR_FOLDER_SEARCH_WATCH="false")
    return {"tmp": tmp_path, "env": env}


def _installed(env: dict[str, str]) -> set[tuple[str, ...]]:
    root = plugin_cli(env)
    return set(_leaves(root, click.Context(root, info_name="plexor")))


def test_every_command_has_failure_cases(scratch):
    commands = _installed(scratch["env"])
    assert ("call",) in commands and ("config", "validate") in commands
    missing = sorted(commands - set(CASES))
    assert not missing, f"give these commands failure-path cases in CASES (exit 1 and/or 2): {missing}"
    for cases in CASES.values():
        assert cases and all(code in (1, 2) for code, _, _ in cases)


def test_every_command_fails_with_the_rule_s_exit_code(scratch, monkeypatch):
    installed = _installed(scratch["env"])
    tmp = str(scratch["tmp"])
    wrong, ran = [], 0
    for path, cases in CASES.items():
        if path not in installed:
            continue  # a plugin not installed in this env: its own env runs it
        for code, args, extra in cases:
            home = {"PLEXOR_HOME": f"{tmp}/home-{ran}"}  # a case's files (a broken plexor.toml) stay its own
            env = {**scratch["env"], **home, **{k: v.replace("{tmp}", tmp) for k, v in extra.items()}}
            plugins = path[0] if path[0] in {"arbor", "folder-search", "keyboard"} else "fakexit"
            env.setdefault("PLEXOR_PLUGINS", plugins)
            for key in [k for k in os.environ if k.startswith("PLEXOR_")]:
                monkeypatch.delenv(key)
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            result = CliRunner().invoke(plugin_cli(env), [a.replace("{tmp}", tmp) for a in args], env=env)
            ran += 1
            crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
            if result.exit_code != code or crashed:
                wrong.append((args, extra, f"exit {result.exit_code}, wanted {code}", result.output[-400:],
                              repr(result.exception)))
    assert not wrong, "\n".join(map(str, wrong))
    assert ran >= 20


def test_the_rule_is_in_plexor_help_rendered_and_cached(plexor_home):
    """`plexor --help` states the rule, also when the launcher prints it from its cache (a second run)."""
    import subprocess
    import sys

    script = Path(sys.executable).parent / "plexor"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(plexor_home), PLEXOR_PLUGINS="")
    rule = "Exit codes: 0 done; 1 the command was right but the work failed or found"
    for run in ("rendered", "cached"):
        done = subprocess.run([str(script), "--help"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and rule in done.stdout, (run, done.stdout, done.stderr)
        assert "_PLEXOR_COMPLETE=bash_source plexor" in done.stdout
    assert (plexor_home / "data" / "cli-help.txt").exists(), "the second run was not served from the cache"
