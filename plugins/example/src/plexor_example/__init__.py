"""A template Plexor plugin."""

__version__ = "0.1.0"
