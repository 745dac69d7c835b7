"""The ``plexor`` console script: ``plexor --help`` from the text it printed last time, everything else by click.

Importing click costs more than starting Python does (about 3x ``python -c pass`` on its own), so
``plexor --help`` prints the help it rendered last time when nothing it depends on has changed: the
Plexor version and its command modules, the installed distributions (their site directories), every
``PLEXOR_*`` variable and the variables that move Plexor's directories, ``plexor.toml``, the program
name and the terminal width. The text is written only by a full rendering whose plugin commands loaded
without a warning (:class:`plexor.plugin_commands.PluginGroup`), and read only when its recorded data
directory is the one this process would use (:mod:`plexor.help_cache`). This module imports nothing beyond
``os`` and ``sys``.
"""

from __future__ import annotations

import sys

from plexor.help_cache import cached_help

__all__ = ["main"]


def main() -> None:
    """Run ``plexor``: the cached help for exactly ``plexor --help``, else the click command."""
    if sys.argv[1:] == ["--help"]:
        text = cached_help()
        if text is not None:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except BrokenPipeError:  # `plexor --help | head`
                pass
            return
    from plexor.cli import main as cli

    cli()
