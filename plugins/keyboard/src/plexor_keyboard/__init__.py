"""Plexor keyboard plugin: macOS virtual key codes, aliases, typo-tolerant lookup, F-key functions, shortcuts.

The entry-point module is :mod:`plexor_keyboard.plugin`; it imports only
``plexor`` and the standard library, and loads the key catalog on first use.
"""

__version__ = "0.1.0"
