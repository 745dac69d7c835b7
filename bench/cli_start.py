"""CLI start-up: ``plexor --help``, ``paths``, ``plugins``, ``tools`` and ``call`` beside bare Python.

Run: ``python bench/cli_start.py`` (the ``plexor`` console script of this interpreter's environment,
every plugin installed). Uses ``hyperfine -N`` when it is on PATH (Debian: ``apt-get install
hyperfine``), else its own interleaved timing of the same commands.

Anchors, measured in the same run:

* ``python -c pass`` for ``plexor --help``, ``paths``, ``plugins`` and ``tools``
  (target, issue 16: ``plexor --help`` within 3x);
* ``python -c "import mcp.types"`` for ``plexor call keyboard_lookup_keycode --arg key_name=a``
  (target: within 1.5x).

A fresh ``PLEXOR_HOME`` is used, after one warm-up ``plexor --help`` and ``plexor call`` (the
warm-up writes the help cache and the keyboard plugin's data, as any first run does).
Wall times are the figure (mean ± standard deviation); user+system CPU is shown beside them
because a loaded machine inflates wall times more than CPU.

Options: ``--runs N`` (default 30), ``--quick`` (only ``--help`` and ``call`` with their anchors),
``--own`` (skip hyperfine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _script() -> str:
    """This environment's ``plexor`` console script."""
    bindir = Path(sys.executable).parent
    for name in ("plexor", "plexor.exe"):
        if (bindir / name).exists():
            return str(bindir / name)
    sys.exit(f"no plexor console script beside {sys.executable}: install the kernel in this environment")


def _commands(quick: bool) -> list[tuple[str, list[str], str]]:
    """(label, argv, anchor label) rows; an anchor's own anchor is empty."""
    py, plexor = sys.executable, _script()
    rows = [
        ("python -c pass", [py, "-c", "pass"], ""),
        ("plexor --help", [plexor, "--help"], "python -c pass"),
        # What any click-based rendering pays first (why --help is printed from its last rendering).
        ('python -c "import click"', [py, "-c", "import click"], "python -c pass"),
    ]
    if not quick:
        rows += [
            ("plexor paths", [plexor, "paths"], "python -c pass"),
            ("plexor plugins", [plexor, "plugins"], "python -c pass"),
            ("plexor tools", [plexor, "tools"], "python -c pass"),
        ]
    rows += [
        ('python -c "import mcp.types"', [py, "-c", "import mcp.types"], ""),
        ("plexor call keyboard_lookup_keycode --arg key_name=a",
         [plexor, "call", "keyboard_lookup_keycode", "--arg", "key_name=a"], 'python -c "import mcp.types"'),
    ]
    return rows


def _quote(arg: str) -> str:
    return arg if arg and all(c.isalnum() or c in "/._-=:" for c in arg) else json.dumps(arg)


def _hyperfine(rows: list[tuple[str, list[str], str]], runs: int, env: dict[str, str]) -> dict[str, dict[str, float]]:
    out = Path(tempfile.mkdtemp()) / "hyperfine.json"
    cmd = ["hyperfine", "-N", "--warmup", "3", "--runs", str(runs), "--export-json", str(out), "--style", "basic"]
    for label, argv, _ in rows:
        cmd += ["-n", label, " ".join(_quote(a) for a in argv)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    found = {}
    for result in json.loads(out.read_text())["results"]:
        found[result["command"]] = {"mean": result["mean"], "sd": result["stddev"] or 0.0,
                                    "cpu": result["user"] + result["system"]}
    return found


def _own(rows: list[tuple[str, list[str], str]], runs: int, env: dict[str, str]) -> dict[str, dict[str, float]]:
    """Interleaved runs (each round runs every command once), so load drifts hit all rows alike."""
    walls: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in rows}

    def children_cpu() -> float:
        try:
            import resource
        except ImportError:  # Windows: no CPU figure
            return 0.0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    for round_ in range(runs + 3):
        for label, argv, _ in rows:
            before = children_cpu()
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            wall = time.perf_counter() - t0
            if round_ >= 3:  # three warm-up rounds
                walls[label].append(wall)
                cpus[label].append(children_cpu() - before)
    return {label: {"mean": statistics.fmean(walls[label]), "sd": statistics.stdev(walls[label]),
                    "cpu": statistics.fmean(cpus[label])} for label, _, _ in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="only --help and call, with their anchors")
    parser.add_argument("--own", action="store_true", help="time the commands here instead of with hyperfine")
    opts = parser.parse_args()

    home = tempfile.mkdtemp(prefix="plexor-bench-cli-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PLEXOR_HOME"] = home
    rows = _commands(opts.quick)
    for _, argv, _ in rows:  # the first run of each writes caches and data, as a user's first run does
        if argv[0] == _script():
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    use_hyperfine = not opts.own and shutil.which("hyperfine") is not None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    found = _hyperfine(rows, opts.runs, env) if use_hyperfine else _own(rows, opts.runs, env)
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {'hyperfine -N' if use_hyperfine else 'own timing'}, {opts.runs} runs each, "
          f"load average {load:.2f} before / {load_after:.2f} after; Python {sys.version.split()[0]}")
    print(f"{'command':<56} {'wall (ms)':>16} {'cpu (ms)':>9} {'ratio':>14} {'cpu ratio':>9}")
    for label, _, anchor in rows:
        r = found[label]
        line = f"{label:<56} {r['mean'] * 1e3:8.1f} ± {r['sd'] * 1e3:5.1f} {r['cpu'] * 1e3:9.1f}"
        if anchor:
            a = found[anchor]
            ratio = r["mean"] / a["mean"]
            err = ratio * math.hypot(r["sd"] / r["mean"], a["sd"] / a["mean"])
            cpu_ratio = r["cpu"] / a["cpu"] if a["cpu"] else float("nan")
            line += f" {ratio:6.2f} ± {err:4.2f}x {cpu_ratio:8.2f}x"
        print(line)
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
