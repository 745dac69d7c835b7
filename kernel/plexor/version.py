"""The kernel's version, defined once: the kernel's modules import it from here, and the plugin API
re-exports it as ``plexor.__version__``."""

__version__ = "0.2.0"
