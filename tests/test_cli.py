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


TYPED = """
from typing import Literal
from plexor import hookimpl

@hookimpl
def plexor_add_config(config):
    config.add("level", int, 1)

@hookimpl
def plexor_register_tools(register, settings):
    def pick(select: list[str] | str, mode: Literal["a", "b"] = "a", limit: int | None = None) -> dict:
        '''Pick some columns from the table, in the order given. This sentence is long enough to make
        the first paragraph wrap over more than one line of a terminal, and it must be shown whole.

        A second paragraph that the listing leaves out.'''
        return {"select": select, "mode": mode}

    register(pick)
"""


CRASHES_WHILE_REGISTERING = """
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    register(lambda: {}, name="pick")
    raise RuntimeError("a bug in the plugin")
"""


def test_tools_render_unions_and_whole_first_paragraphs(run, site_dir):
    install_fake_dist(site_dir, "plexor-faketyped", "faketyped", "plexor_faketyped", TYPED)
    out = run("tools", env={"PLEXOR_PLUGINS": "faketyped"})
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "- select: list of string or string (required)" in text
    assert '- mode: "a" | "b"' in text and "- limit: integer or null" in text
    assert "more than one line of a terminal, and it must be shown whole." in text
    assert "second paragraph" not in text and out.stderr == ""


def test_call_parses_json_for_list_arguments(run, site_dir):
    install_fake_dist(site_dir, "plexor-faketyped", "faketyped", "plexor_faketyped", TYPED)
    listed = run("call", "faketyped_pick", "--arg", 'select=["a", "b"]', env={"PLEXOR_PLUGINS": "faketyped"})
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["select"] == ["a", "b"]
    text = run("call", "faketyped_pick", "--arg", "select=a,b", env={"PLEXOR_PLUGINS": "faketyped"})
    assert json.loads(text.stdout)["select"] == "a,b"


def test_misspelt_tables_and_variables_are_warned_about_in_plain_lines(run, site_dir, plexor_home):
    install_fake_dist(site_dir, "plexor-faketyped", "faketyped", "plexor_faketyped", TYPED)
    cfg = plexor_home / "config" / "plexor.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[faketyepd]\nlevel = 2\n", encoding="utf-8")
    out = run("tools", env={"PLEXOR_FAKETYPED_LEVLE": "3", "PLEXOR_START_WAT": "3", "PLEXOR_FAKETYPED_LEVEL": "2"})
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert f"warning: unknown table [faketyepd] in {cfg}; it is ignored. Did you mean [faketyped]?" in lines
    assert ("warning: unknown environment variable PLEXOR_FAKETYPED_LEVLE; it is ignored. "
            "Did you mean PLEXOR_FAKETYPED_LEVEL?") in lines
    assert any("PLEXOR_START_WAT" in line and "PLEXOR_START_WAIT" in line for line in lines)
    assert not any(line.startswith("{") for line in lines)  # no JSON log lines for people
    cfg.write_text("[faketyped]\nlevle = 2\n", encoding="utf-8")
    plain = run("tools")
    assert "warning: unknown setting 'levle' in [faketyped]" in plain.stderr and "{" not in plain.stderr
    logged = run("--log-json", "tools")
    assert any(line.startswith("{") and "config_warning" in line for line in logged.stderr.splitlines())


def test_a_bad_log_level_is_a_usage_error_naming_the_levels(run):
    for args in (("plugins",), ("tools",), ("call", "fakecli_echo", "--arg", "text=a"), ("serve",)):
        out = run(*args, env={"PLEXOR_LOG_LEVEL": "loud"})
        assert out.returncode == 2, (args, out.stderr)
        assert "PLEXOR_LOG_LEVEL='loud' is not a log level" in out.stderr
        assert "debug, info, warning, error, critical" in out.stderr


def test_unknown_plugin_names_exit_2_with_a_suggestion(run):
    for var in ("PLEXOR_PLUGINS", "PLEXOR_DISABLE"):
        for args in (("plugins",), ("tools",), ("call", "plexor_health")):
            out = run(*args, env={var: "fakecil"})
            assert out.returncode == 2, (var, args, out.stderr)
            assert f"{var} names 'fakecil', which is not installed; did you mean 'fakecli'?" in out.stderr


def test_a_tool_of_a_failed_plugin_is_a_tool_error(run, site_dir):
    install_fake_dist(site_dir, "plexor-fakecrash", "fakecrash", "plexor_fakecrash", CRASHES_WHILE_REGISTERING)
    out = run("call", "fakecrash_pick")
    assert out.returncode == 1, out.stderr
    assert "belongs to the plugin 'fakecrash', which is not available (it failed)" in out.stdout


def test_a_tool_of_a_plugin_its_configuration_failed_is_a_usage_error(run, site_dir):
    """The exit-code rule: 2 when the input or the configuration must change (here a bad setting)."""
    install_fake_dist(site_dir, "plexor-faketyped", "faketyped", "plexor_faketyped", TYPED)
    out = run("call", "faketyped_pick", "--arg", "select=a", env={"PLEXOR_FAKETYPED_LEVEL": "high"})
    assert out.returncode == 2, out.stderr
    assert "belongs to the plugin 'faketyped', which is not available (it failed)" in out.stderr


def test_exit_codes_of_every_core_command(run, plexor_home):
    cases = [
        (0, ("--help",)), (2, ("--bogus",)), (2, ("nosuchcommand",)),
        (0, ("paths",)), (2, ("paths", "--bogus")),
        (0, ("plugins",)), (2, ("plugins", "--bogus")),
        (0, ("tools",)), (2, ("tools", "--bogus")),
        (0, ("call", "fakecli_echo", "--arg", "text=a")), (1, ("call", "fakecli_fail", "--arg", "reason=x")),
        (2, ("call", "fakecli_nope")), (2, ("call", "fakecli_echo")),
        (0, ("install", "cursor", "--print")), (2, ("install", "nosuchclient")),
        (0, ("uninstall", "cursor", "--file", str(plexor_home / "none.json"))), (2, ("uninstall",)),
        (2, ("serve", "--transport", "pigeon")), (2, ("connect", "--log-level", "loud")),
    ]
    for code, args in cases:
        out = run(*args)
        assert out.returncode == code, (args, out.returncode, out.stdout[-300:], out.stderr[-300:])


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_serve_on_a_terminal_says_what_it_waits_for_and_never_on_a_pipe(plexor_home):
    import select
    import signal
    import time

    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(plexor_home), PLEXOR_PLUGINS="")
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=environ)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"Ctrl+C" not in seen and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 1)[0]:
                seen += os.read(proc.stderr.fileno(), 4096)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        os.close(master)
    text = seen.decode()
    assert "waiting for a client to send JSON-RPC on stdin" in text and "Ctrl+C" in text
    assert f"npx @modelcontextprotocol/inspector {sys.executable} -m plexor serve" in text
    piped = subprocess.run([sys.executable, "-m", "plexor", "serve"], input="", capture_output=True, text=True,
                           env=environ, timeout=60)
    assert "waiting for a client" not in piped.stderr and piped.stdout == ""


HELP_CHECK = """
import sys
from plexor.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print("IMPORTED", ",".join(sorted(m for m in sys.modules if m.startswith("plexor_fake"))), file=sys.stderr)
"""

A_COMMAND = """
import click
from plexor import hookimpl

@hookimpl
def plexor_register_commands(cli):
    @cli.command("fakecmd")
    def fakecmd():
        '''Do the fake thing.'''
        click.echo("done")
"""


def test_help_is_served_from_a_cache_until_something_changes(run, plexor_home, site_dir):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir))
    install_fake_dist(site_dir, "plexor-fakecmd", "fakecmd", "plexor_fakecmd", A_COMMAND)

    def helped(**extra):
        out = subprocess.run([sys.executable, "-c", HELP_CHECK], env={**environ, **extra}, capture_output=True,
                             text=True, timeout=120)
        return out.stdout, out.stderr.split("IMPORTED", 1)[1].strip()

    first, imported = helped()
    assert "fakecmd" in first and "Do the fake thing." in first and "plexor_fakecmd" in imported
    second, imported = helped()
    assert second == first and imported == ""  # no plugin was imported
    _, imported = helped(PLEXOR_DISABLE="fakeoff")  # another selection of plugins: loaded again
    assert "plexor_fakecmd" in imported
    install_fake_dist(site_dir, "plexor-fakecmd2", "fakecmd2", "plexor_fakecmd2", A_COMMAND.replace("fakecmd", "othercmd"))
    third, imported = helped()
    assert "othercmd" in third and "plexor_fakecmd2" in imported
    assert run("fakecmd").stdout.strip() == "done"


def test_plugins_table_shows_a_failure_once_without_json_log_lines(run):
    out = run("plugins")
    assert out.returncode == 0
    assert "error: loading failed: ImportError: no lib" in out.stdout
    assert "no lib" not in out.stderr and not any(line.startswith("{") for line in out.stderr.splitlines())
    logged = run("--log-json", "plugins")
    assert any(line.startswith("{") and "plugin_failed" in line for line in logged.stderr.splitlines())
    levels = run("connect", "--log-level", "LOUD")
    assert levels.returncode == 2 and "critical" in levels.stderr


def _console_script():
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="plexor")
    return script


def test_the_console_script_is_the_launcher():
    assert _console_script().value == "plexor.launcher:main"


LAUNCH = """
import sys
sys.argv[0] = "plexor"  # as the console script runs it
from plexor.launcher import main
try:
    main()
except SystemExit:
    pass
print("IMPORTED", ",".join(sorted(m for m in sys.modules if m.split(".")[0] in ("click", "plexor_fakecli")
                                  or m == "plexor.cli")), file=sys.stderr)
"""


def test_help_is_printed_without_click_once_rendered(run, plexor_home, site_dir):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir), COLUMNS="100")

    def helped(*args, **extra):
        out = subprocess.run([sys.executable, "-c", LAUNCH, *args], env={**environ, **extra}, capture_output=True,
                             text=True, timeout=120)
        return out.stdout, out.stderr.split("IMPORTED", 1)[1].strip()

    first, imported = helped("--help")
    assert first.startswith("Usage: plexor [OPTIONS] COMMAND") and "PLEXOR_HOME=DIR" in first
    assert "click" in imported and "plexor.cli" in imported
    second, imported = helped("--help")
    assert second == first and imported == ""  # neither click nor the CLI module nor any plugin
    assert helped("--version")[1] != ""  # only exactly `plexor --help` is answered from the text
    # Whatever the text depends on makes the next --help render it again (and save it anew):
    narrow, imported = helped("--help", COLUMNS="60")
    assert "click" in imported and max(len(line) for line in narrow.splitlines()) <= 58
    assert helped("--help", COLUMNS="60") == (narrow, "")
    assert "click" in helped("--help", PLEXOR_DISABLE="fakeoff")[1]
    cfg = plexor_home / "config" / "plexor.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("[fakecli]\n", encoding="utf-8")
    assert "click" in helped("--help")[1]
    install_fake_dist(site_dir, "plexor-fakecmd", "fakecmd", "plexor_fakecmd", A_COMMAND)
    fresh, imported = helped("--help")
    assert "click" in imported and "fakecmd" in fresh and "Do the fake thing." in fresh
    assert helped("--help") == (fresh, "")


def test_help_is_not_saved_while_loading_plugin_commands_warns(run, plexor_home, site_dir):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir), PLEXOR_FAKECLI_NOPE="1")
    for _ in range(2):  # the warning is shown every time: the text is never served from the file
        out = subprocess.run([sys.executable, "-c", LAUNCH, "--help"], env=environ, capture_output=True, text=True,
                             timeout=120)
        assert "PLEXOR_FAKECLI_NOPE" in out.stderr and "click" in out.stderr.split("IMPORTED", 1)[1]


def test_the_launcher_finds_the_data_directory_the_kernel_uses(tmp_path, monkeypatch):
    from plexor.core.config import paths
    from plexor.help_cache import guess_data_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    cases = [{"PLEXOR_HOME": str(tmp_path / "h")}, {"PLEXOR_HOME": "~/x/../y/"}, {}]
    if sys.platform.startswith("linux"):
        cases += [{"XDG_DATA_HOME": str(tmp_path / "xdg")}, {"XDG_DATA_HOME": "  "}]
    for env in cases:
        for name in ("PLEXOR_HOME", "XDG_DATA_HOME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        guess = guess_data_dir(dict(os.environ))
        assert guess is not None and os.path.normpath(guess) == os.path.normpath(paths().data_dir), env


WARMING = """
import threading, time
from plexor import hookimpl

@hookimpl
def plexor_startup(plugin):
    plugin.warming(0.25, "counting sheep")

    def warm():
        time.sleep(plugin.settings["seconds"])
        plugin.warmed()

    threading.Thread(target=warm, daemon=True).start()

@hookimpl
def plexor_add_config(config):
    config.add("seconds", float, 1.0)
"""


def test_plugins_waits_for_a_warm_up_and_shows_one_that_is_still_going(run, site_dir):
    install_fake_dist(site_dir, "plexor-fakewarm", "fakewarm", "plexor_fakewarm", WARMING)
    out = run("plugins", "--json", env={"PLEXOR_PLUGINS": "fakewarm"})
    assert out.returncode == 0, out.stderr
    assert {r["name"]: r["state"] for r in json.loads(out.stdout)}["fakewarm"] == "ready"
    slow = {"PLEXOR_PLUGINS": "fakewarm", "PLEXOR_FAKEWARM_SECONDS": "30", "PLEXOR_START_WAIT": "0.5"}
    table = run("plugins", env=slow)
    assert table.returncode == 0, table.stderr
    line = next(ln for ln in table.stdout.splitlines() if ln.startswith("fakewarm"))
    assert line.split()[3] == "starting"
    assert "still warming up (25%: counting sheep)" in table.stdout


PATHS_CHECK = """
import sys
from plexor.cli import main
try:
    main(["paths"])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "pydantic", "pluggy", "structlog", "anyio", "peewee")
               or m.startswith("plexor_") or m in ("plexor.serving.command", "plexor.features.install.clients", "plexor.core.kernel"))
print("HEAVY", ",".join(heavy), file=sys.stderr)
"""


def test_paths_imports_no_protocol_no_plugin_and_no_other_command(run, plexor_home, site_dir):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    environ.update(PLEXOR_HOME=str(plexor_home), PYTHONPATH=str(site_dir))
    out = subprocess.run([sys.executable, "-c", PATHS_CHECK], env=environ, capture_output=True, text=True, timeout=120)
    assert str(plexor_home / "data") in out.stdout
    assert out.stderr.split("HEAVY", 1)[1].strip() == "", out.stderr[-500:]
