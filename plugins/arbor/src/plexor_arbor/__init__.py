"""Arbor: conversations stored as trees, for Plexor.

Every message is a node, a branch is a second child, and the context for a
model is the path from the root to a node. The entry-point module is
:mod:`plexor_arbor.plugin`; it imports nothing heavy.
"""

__version__ = "0.1.0"
__distribution__ = "plexor-arbor"
