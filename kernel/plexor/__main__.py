"""``python -m plexor`` is the ``plexor`` command."""

from plexor.cli import main

if __name__ == "__main__":
    main()
