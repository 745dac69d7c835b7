"""Plexor's EdgeLake plugin: tools declared in YAML over a robust EdgeLake REST client."""

__version__ = "0.1.0"
