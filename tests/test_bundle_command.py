"""`plexor bundle`'s fast paths: a misspelt plugin is a usage error with a did-you-mean before anything is
built, and the manifest ties the bundle to this platform and Python. The bundle itself is built, checked
by the official MCPB CLI and started in tests/bundle (tox -e all)."""

from __future__ import annotations

import subprocess
import sys

from plexor import __version__
from plexor.features.install.bundle import manifest


def test_a_misspelt_plugin_is_a_usage_error_and_nothing_is_written(tmp_path):
    out = subprocess.run([sys.executable, "-m", "plexor", "bundle", "exmaple", "--output", str(tmp_path / "x.mcpb")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "'exmaple' is not an installed plugin; did you mean 'example'?" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_manifest_names_the_plugins_platform_and_python():
    data = manifest(["example"], {"example": "0.1.0"}, [{"name": "example_greet", "description": "Greet."}])
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert data["manifest_version"] == "0.3" and data["version"] == __version__
    assert data["compatibility"]["platforms"] == [sys.platform]
    assert data["compatibility"]["runtimes"]["python"] == f">={minor},<{sys.version_info.major}.{sys.version_info.minor + 1}"
    config = data["server"]["mcp_config"]
    assert config["args"] == ["${__dirname}/server/main.py"]
    assert config["env"]["PYTHONPATH"] == "${__dirname}/server/lib" and config["env"]["PLEXOR_PLUGINS"] == "example"
    assert "example 0.1.0" in data["long_description"]
