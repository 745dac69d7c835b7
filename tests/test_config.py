"""Paths, plexor.toml, environment overrides and settings validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_plugin

from plexor import Context
from plexor.core.config import paths
from plexor.core.kernel import Kernel, State

pytestmark = pytest.mark.anyio


def settings_plugin():
    def add_config(config):
        config.add("limit", int, 10, help="how many")
        config.add("ratio", float, 0.5)
        config.add("verbose", bool, False)
        config.add("folders", list, [])
        config.add("mode", str, "fast", choices=["fast", "slow"])

    def tools(register, settings):
        def show(ctx: Context) -> dict:
            return dict(ctx.settings)

        register(show)

    return make_plugin("cfg", plexor_add_config=add_config, plexor_register_tools=tools)


def test_plexor_home_puts_everything_under_one_folder(tmp_path):
    p = paths({"PLEXOR_HOME": str(tmp_path)})
    assert (p.config_dir, p.data_dir, p.log_dir) == (tmp_path / "config", tmp_path / "data", tmp_path / "logs")
    assert p.config_file == tmp_path / "config" / "plexor.toml"
    assert p.plugin_data_dir("arbor") == tmp_path / "data" / "arbor"


def test_platformdirs_without_plexor_home():
    p = paths({})
    assert "plexor" in str(p.config_dir) and "plexor" in str(p.data_dir)
    assert p.config_dir != p.data_dir


async def test_defaults_then_file_then_environment(plexor, plexor_config):
    async with plexor.client([("cfg", settings_plugin())]) as client:
        assert (await client.call_tool("cfg_show", {})).structured_content == {
            "limit": 10, "ratio": 0.5, "verbose": False, "folders": [], "mode": "fast"}
    plexor_config({"cfg": {"limit": 3, "folders": ["/a", "/b"], "verbose": True}})
    env = {"PLEXOR_CFG_LIMIT": "7", "PLEXOR_CFG_RATIO": "2", "PLEXOR_CFG_FOLDERS": "/x,/y"}
    async with plexor.client([("cfg", settings_plugin())], env=env) as client:
        got = (await client.call_tool("cfg_show", {})).structured_content
        assert got == {"limit": 7, "ratio": 2.0, "verbose": True, "folders": ["/x", "/y"], "mode": "fast"}
        settings = client.kernel.plugin("cfg").settings
        assert settings.sources["limit"] == "PLEXOR_CFG_LIMIT"
        assert settings.sources["verbose"].endswith("plexor.toml")
        assert settings.sources["mode"] == "default"


async def test_a_bad_value_names_the_key_and_the_file(plexor, plexor_config):
    path = plexor_config({"cfg": {"limit": "lots"}})
    async with plexor.kernel([("cfg", settings_plugin())]) as kernel:
        rec = kernel.plugin("cfg")
        assert rec.state == State.FAILED
        assert f"limit = 'lots' in [cfg] of {path} is not an integer" in rec.error
        assert "Set limit to a whole number" in rec.error


async def test_a_bad_environment_value_names_the_variable(plexor):
    async with plexor.kernel([("cfg", settings_plugin())], env={"PLEXOR_CFG_VERBOSE": "maybe"}) as kernel:
        assert "in environment variable PLEXOR_CFG_VERBOSE is not a boolean" in kernel.plugin("cfg").error


async def test_choices_are_enforced(plexor, plexor_config):
    plexor_config({"cfg": {"mode": "warp"}})
    async with plexor.kernel([("cfg", settings_plugin())]) as kernel:
        assert "Use one of: fast, slow" in kernel.plugin("cfg").error


async def test_unknown_keys_warn_with_did_you_mean(plexor, plexor_config):
    plexor_config({"cfg": {"limitt": 4}})
    async with plexor.client([("cfg", settings_plugin())]) as client:
        health = (await client.call_tool("plexor_health", {})).structured_content
        entry = next(p for p in health["plugins"] if p["name"] == "cfg")
        assert entry["state"] == "ready"
        assert any("unknown setting 'limitt'" in w and "Did you mean 'limit'?" in w for w in entry["warnings"])


async def test_a_plugin_table_that_is_not_a_table_fails_that_plugin(plexor):
    cfg = Path(plexor.home) / "config" / "plexor.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('cfg = "oops"\n', encoding="utf-8")
    async with plexor.kernel([("cfg", settings_plugin())]) as kernel:
        assert "must be a table" in kernel.plugin("cfg").error


async def test_hook_plexor_add_config(plexor):
    k = Kernel([("cfg", settings_plugin())], load_entry_points=False, environ=plexor.environ()).load()
    s = k.plugin("cfg").settings
    assert s.limit == 10 and s["ratio"] == 0.5
    assert s.data_dir == plexor.home / "data" / "cfg"


async def test_reserved_and_duplicate_setting_names_fail_the_plugin(plexor):
    reserved = make_plugin("res", plexor_add_config=lambda config: config.add("warnings", bool, False))

    def twice(config):
        config.add("level", int, 1)
        config.add("level", int, 2)

    async with plexor.kernel([("res", reserved), ("dup", make_plugin("dup", plexor_add_config=twice))]) as kernel:
        assert "'warnings', which is reserved" in kernel.plugin("res").error
        assert "declared twice" in kernel.plugin("dup").error


def test_write_config_writes_valid_toml_for_any_text(plexor_home):
    import tomllib

    from plexor.testing import write_config

    path = write_config(plexor_home, {"cfg": {"name": "Straße 🚲", "quote": 'say "hi"\n', "n": 3}})
    assert tomllib.loads(path.read_text(encoding="utf-8")) == {"cfg": {"name": "Straße 🚲", "quote": 'say "hi"\n', "n": 3}}
    with pytest.raises(ValueError, match="TOML has no null"):
        write_config(plexor_home, {"cfg": {"nothing": None}})
