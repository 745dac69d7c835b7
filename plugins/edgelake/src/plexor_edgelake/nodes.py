"""The configured nodes and the errors a request to one can end in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from plexor import PlexorError

__all__ = ["EdgeLakeError", "Node", "NodeTimeout", "NodeUnreachable", "ReplyTooLarge", "parse_nodes"]


class EdgeLakeError(PlexorError):
    """The node answered with an error, or with a reply that cannot be read."""

    code = "edgelake_error"


class NodeUnreachable(EdgeLakeError):
    """No connection could be made to the node."""

    code = "edgelake_unreachable"


class NodeTimeout(EdgeLakeError):
    """The node did not answer in time."""

    code = "edgelake_timeout"


class ReplyTooLarge(EdgeLakeError):
    """The reply grew past ``[edgelake] max_reply_bytes``; it was abandoned."""

    code = "edgelake_reply_too_large"


@dataclass(frozen=True)
class Node:
    """A configured node: its name (as given in ``nodes``) and address."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def label(self) -> str:
        return self.address if self.name == self.address else f"{self.name} ({self.address})"


_NODE = re.compile(r"^(?:(?P<name>[A-Za-z_][\w.-]*)\s*=\s*)?(?:https?://)?(?P<host>[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})/?$")


def parse_nodes(values: Any, source: str = "[edgelake] nodes") -> list[Node]:
    """``["127.0.0.1:32049", "edge2=10.0.0.2:32049"]`` as :class:`Node` objects; the first is the default."""
    from plexor import ConfigError

    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{source} must list at least one node", 'Set nodes = ["127.0.0.1:32049"] (host:port, or name=host:port).')
    nodes: list[Node] = []
    for raw in values:
        m = _NODE.match(str(raw).strip())
        if not m or not 0 < int(m.group("port")) < 65536:
            raise ConfigError(
                f"{source}: {raw!r} is not host:port or name=host:port",
                'Write each node as "127.0.0.1:32049" or "edge2=10.0.0.2:32049" (the node\'s REST port).',
            )
        host, port = m.group("host").strip("[]"), int(m.group("port"))
        address = f"{host}:{port}"
        node = Node(m.group("name") or address, host, port)
        if any(n.name == node.name for n in nodes):
            raise ConfigError(f"{source}: the node {node.name!r} is listed twice", "Give each node once (or a distinct name=).")
        nodes.append(node)
    return nodes
