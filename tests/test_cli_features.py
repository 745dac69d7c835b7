"""`plexor install`, `uninstall`, `bundle` (the ``install`` feature) and `plexor connect` (the ``daemon`` feature)
are built-in plugins: listed by `plexor plugins`, their commands added through ``plexor_cli_commands``, and
removed by ``PLEXOR_DISABLE`` (never by ``PLEXOR_PLUGINS``), with an error naming the variable when invoked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from plexor.plugin_commands import CORE_COMMANDS, feature_commands
from plexor.testing import plugin_cli

OWNERS = {"install": "install", "uninstall": "install", "bundle": "install", "connect": "daemon"}


@pytest.fixture
def run(tmp_path):
    home = tmp_path / "home"
    home.mkdir()

    def go(*args, env=None, script=False):
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("PLEXOR_", "XDG_"))}
        environ.update(PLEXOR_HOME=str(home / "plexor"), HOME=str(home), USERPROFILE=str(home), **(env or {}))
        command = [str(Path(sys.executable).parent / "plexor")] if script else [sys.executable, "-m", "plexor"]
        return subprocess.run([*command, *args], env=environ, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    go.home = home
    return go


def test_hook_plexor_cli_commands():
    found = feature_commands()
    assert {name: feature for name, (feature, _) in found.items()} == OWNERS
    for name, (_, target) in found.items():
        module, _, attr = target.partition(":")
        command = getattr(__import__(module, fromlist=[attr]), attr)
        assert isinstance(command, click.Command) and command.name == name
        assert name in CORE_COMMANDS  # no plugin may take a feature's command name
    # the commands run from the root group, as core commands did
    result = CliRunner().invoke(plugin_cli({**os.environ, "PLEXOR_PLUGINS": ""}), ["install", "nosuchclient"])
    assert result.exit_code == 2 and "nosuchclient" in result.output


def test_the_features_are_listed_by_plexor_plugins(run):
    out = run("plugins", "--json", env={"PLEXOR_PLUGINS": ""})
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    for name in ("install", "daemon"):
        assert rows[name]["distribution"] == "plexor" and rows[name]["state"] == "ready", rows[name]
    off = {r["name"]: r["state"] for r in json.loads(run("plugins", "--json", env={"PLEXOR_DISABLE": "install,daemon"}).stdout)}
    assert off["install"] == off["daemon"] == "disabled"


def test_disabling_install_removes_its_commands_and_says_which_variable(run):
    off = {"PLEXOR_DISABLE": "install"}
    for args in (("install", "cursor", "--print"), ("uninstall", "cursor"), ("bundle", "keyboard")):
        out = run(*args, env=off)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "PLEXOR_DISABLE" in out.stderr and "'install'" in out.stderr, out.stderr
        assert out.stdout == ""
    assert not (run.home / ".cursor").exists()
    for kind in ("rendered", "cached"):  # the launcher prints the second from its cache
        listed = run("--help", env=off, script=True)
        assert listed.returncode == 0, (kind, listed.stderr)
        commands = listed.stdout.split("Commands:", 1)[1].split()
        assert "connect" in commands and not {"install", "uninstall", "bundle"} & set(commands), (kind, listed.stdout)
    # PLEXOR_PLUGINS chooses content plugins: it never removes a feature
    kept = run("install", "cursor", "--print", env={"PLEXOR_PLUGINS": ""})
    assert kept.returncode == 0 and "plexor" in kept.stdout, kept.stderr


def test_disabling_the_daemon_removes_connect_and_serve_daemon(run):
    off = {"PLEXOR_DISABLE": "daemon"}
    connect = run("connect", env=off)
    assert connect.returncode == 2 and "PLEXOR_DISABLE" in connect.stderr and "'daemon'" in connect.stderr
    daemon = run("serve", "--transport", "http", "--daemon", env=off)
    assert daemon.returncode == 2 and "PLEXOR_DISABLE" in daemon.stderr and "'daemon'" in daemon.stderr, daemon.stderr
    assert not list((run.home / "plexor").rglob("daemon*.json"))
    listed = run("--help", env=off)
    commands = listed.stdout.split("Commands:", 1)[1].split()
    assert "connect" not in commands and "install" in commands
