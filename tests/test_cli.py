"""The `plexor` command, run as a user runs it (a subprocess), with real installed plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import install_fake_dist

TOOLS = """
from plexor import hookimpl, InvalidArgument

@hookimpl
def plexor_register_tools(register, settings):
    def echo(text: str, times: int = 1) -> dict:
        '''Echo a text.'''
        return {"text": text * times}

    def fail(reason: str) -> dict:
        '''Always fails.'''
        raise RuntimeError(reason)

    register(echo)
    register(fail)
"""


@pytest.fixture
def run(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakecli", "fakecli", "plexor_fakecli", TOOLS, version="3.1")
    install_fake_dist(site_dir, "plexor-fakebroken", "fakebroken", "plexor_fakebroken", "raise ImportError('no lib')")
    install_fake_dist(site_dir, "plexor-fakeoff", "fakeoff", "plexor_fakeoff", TOOLS)

    def go(*args, env=None):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
        environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir), **(env or {}))
        return subprocess.run([sys.executable, "-m", "plexor", *args], env=environ, capture_output=True, text=True,
                              timeout=120)

    return go


def test_paths_follow_plexor_home(run, plexor_home):
    out = run("paths", "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout) == {
        "config_dir": str(plexor_home / "config"), "config_file": str(plexor_home / "config" / "plexor.toml"),
        "data_dir": str(plexor_home / "data"), "log_dir": str(plexor_home / "logs")}


def test_plugins_json_lists_states_versions_and_errors(run):
    out = run("plugins", "--json", env={"PLEXOR_DISABLE": "fakeoff"})
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["fakecli"]["distribution"] == "plexor-fakecli" and rows["fakecli"]["version"] == "3.1"
    assert rows["fakecli"]["state"] == "ready" and rows["fakecli"]["tools"] == ["fakecli_echo", "fakecli_fail"]
    assert rows["fakebroken"]["state"] == "failed" and "ImportError: no lib" in rows["fakebroken"]["error"]
    assert rows["plexor"]["state"] == "ready"
    assert rows["fakeoff"]["state"] == "disabled" and rows["fakeoff"]["tools"] == []
    table = run("plugins")
    assert "fakecli" in table.stdout and "error: loading failed: ImportError: no lib" in table.stdout


def test_tools_json_has_descriptions_and_schemas(run):
    out = run("tools", "--json")
    tools = {t["name"]: t for t in json.loads(out.stdout)}
    assert tools["fakecli_echo"]["description"] == "Echo a text."
    assert tools["fakecli_echo"]["input_schema"]["required"] == ["text"]
    assert "plexor_health" in tools


def test_call_prints_the_result_and_exits_0(run):
    out = run("call", "fakecli_echo", "--arg", "text=ab", "--arg", "times=3")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"text": "ababab"}
    dotted = run("call", "fakecli.echo", "--json", '{"text": "x"}')
    assert json.loads(dotted.stdout) == {"text": "x"}


def test_string_arguments_stay_strings(run):
    out = run("call", "fakecli_echo", "--arg", "text=123")
    assert json.loads(out.stdout) == {"text": "123"}


def test_tool_error_exits_1_with_guidance(run):
    out = run("call", "fakecli_fail", "--arg", "reason=disk on fire")
    assert out.returncode == 1
    assert "fakecli_fail failed: RuntimeError: disk on fire" in out.stdout
    assert "Traceback" not in out.stdout


def test_usage_errors_exit_2(run):
    unknown = run("call", "fakecli_ecoh")
    assert unknown.returncode == 2 and "Did you mean 'fakecli_echo'" in unknown.stderr
    bad_arg = run("call", "fakecli_echo", "--arg", "times=many", "--arg", "text=a")
    assert bad_arg.returncode == 2 and "argument 'times'" in bad_arg.stdout
    malformed = run("call", "fakecli_echo", "--arg", "no-equals-sign")
    assert malformed.returncode == 2 and "must look like key=value" in malformed.stderr
    bad_json = run("call", "fakecli_echo", "--json", "{nope")
    assert bad_json.returncode == 2 and "--json is not valid JSON" in bad_json.stderr
    bad_option = run("serve", "--transport", "pigeon")
    assert bad_option.returncode == 2


def test_help_shows_the_environment_overrides(run):
    out = run("--help")
    assert "PLEXOR_HOME=DIR" in out.stdout and "PLEXOR_PLUGINS=a,b" in out.stdout


def test_a_broken_config_file_is_a_usage_error(run, plexor_home):
    cfg = plexor_home / "config" / "plexor.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[fakecli\n", encoding="utf-8")
    out = run("serve")
    assert out.returncode == 2 and "is not valid TOML" in out.stderr


def test_non_loopback_bind_needs_a_token(run):
    out = run("serve", "--transport", "http", "--host", "0.0.0.0")
    assert out.returncode == 2 and "--token" in out.stderr


def test_a_broken_config_is_a_usage_error_for_every_command(run, plexor_home):
    cfg = plexor_home / "config" / "plexor.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[fakecli\n", encoding="utf-8")
    for args in (("plugins",), ("tools",), ("call", "fakecli_echo", "--arg", "text=a")):
        out = run(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert "is not valid TOML" in out.stderr and "Traceback" not in out.stderr


def test_bad_environment_is_a_usage_error(run):
    out = run("tools", env={"PLEXOR_SEPARATOR": "."})
    assert out.returncode == 2 and "PLEXOR_SEPARATOR='.' cannot join tool names" in out.stderr


def test_optional_text_arguments_stay_text(plexor_home, site_dir, run):
    install_fake_dist(site_dir, "plexor-fakeopt", "fakeopt", "plexor_fakeopt", '''
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def find(query: str | None = None, limit: int | None = None) -> dict:
        """Find."""
        return {"query": query, "limit": limit}
    register(find)
''')
    out = run("call", "fakeopt_find", "--arg", "query=1", "--arg", "limit=5")
    assert json.loads(out.stdout) == {"query": "1", "limit": 5}
    bad = run("call", "fakeopt_find", "--arg", "limit=x")
    assert bad.returncode == 2
    assert "Accepted arguments: query (string or null); limit (integer or null)" in bad.stdout


COMMANDS_OF_A_FAILING_PLUGIN = """
from plexor import hookimpl

@hookimpl
def plexor_add_config(config):
    config.add("level", int, 1)

@hookimpl
def plexor_register_commands(cli):
    import click

    @cli.group("fakefail")
    def group():
        '''Commands of a plugin whose settings are wrong.'''

    @group.command()
    def hello():
        click.echo("never")
"""


def test_commands_of_a_failed_plugin_say_why(run, site_dir, plexor_home):
    install_fake_dist(site_dir, "plexor-fakefail", "fakefail", "plexor_fakefail", COMMANDS_OF_A_FAILING_PLUGIN)
    out = run("fakefail", "hello", env={"PLEXOR_FAKEFAIL_LEVEL": "high"})
    assert out.returncode == 2
    assert "the plugin 'fakefail' is installed but failed" in out.stderr
    assert "PLEXOR_FAKEFAIL_LEVEL is not an integer" in out.stderr


NO_SDK_CHECK = """
import sys
from plexor.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))
print("MODULES", ",".join(loaded), file=sys.stderr)
"""


def test_listing_commands_do_not_import_the_mcp_sdk(run, plexor_home, site_dir):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir))
    for args in (["--help"], ["paths"], ["plugins"], ["tools"], ["install", "cursor", "--print"]):
        out = subprocess.run([sys.executable, "-c", NO_SDK_CHECK, *args], env=environ, capture_output=True, text=True,
                             timeout=120)
        assert "MODULES" in out.stderr, out.stderr
        assert out.stderr.split("MODULES", 1)[1].strip() == "", (args, out.stderr[-500:])
