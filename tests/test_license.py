"""The MIT licence ships in the repository and inside every distribution's wheel and sdist (PEP 639)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]
LICENSE = (ROOT / "LICENSE").read_text(encoding="utf-8")


def test_the_repository_has_the_mit_licence():
    assert LICENSE.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in LICENSE


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name if p != ROOT else "plexor")
def test_every_distribution_declares_it_and_ships_it(package: Path, tmp_path: Path):
    project = tomllib.loads((package / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "MIT"
    assert project["project"]["license-files"] == ["LICENSE"]
    assert (package / "LICENSE").read_text(encoding="utf-8") == LICENSE, f"{package}/LICENSE differs from ./LICENSE"
    # hatchling reads PEP 639's license-files from 1.27 on; an older one would drop the file silently
    assert any(r.replace(" ", "").startswith("hatchling>=1.27") for r in project["build-system"]["requires"])
    built = subprocess.run([sys.executable, "-c", "import sys, hatchling.build as b; "
                            "print(b.build_wheel(sys.argv[1])); print(b.build_sdist(sys.argv[1]))", str(tmp_path)],
                           cwd=package, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    wheel_name, sdist_name = built.stdout.split()[-2:]
    with zipfile.ZipFile(tmp_path / wheel_name) as wheel:
        names = wheel.namelist()
        licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert licence, names
        assert wheel.read(licence[0]).decode() == LICENSE
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    with tarfile.open(tmp_path / sdist_name) as sdist:
        top = sdist_name.removesuffix(".tar.gz")
        member = sdist.extractfile(f"{top}/LICENSE")
        assert member is not None and member.read().decode() == LICENSE
        info = sdist.extractfile(f"{top}/PKG-INFO")
        assert info is not None and "License-Expression: MIT" in info.read().decode()
