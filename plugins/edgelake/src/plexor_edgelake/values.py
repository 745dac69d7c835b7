"""Renderers for the parameter types added with the upstream tools: policy type lists, destinations, help words."""

from __future__ import annotations

import re
from typing import Any

from plexor import InvalidArgument

__all__ = ["destination", "policy_types", "words"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_ADDRESS = re.compile(r"^[A-Za-z0-9.-]+:\d{1,5}$")
_WORDS = re.compile(r"^[A-Za-z0-9_.*-]+(?: [A-Za-z0-9_.*-]+)*$")


def _reject(name: str, value: Any, why: str, guidance: str) -> InvalidArgument:
    return InvalidArgument(f"argument {name!r} = {value!r} was refused: {why}", guidance, data={"argument": name})


def policy_types(name: str, value: Any) -> str:
    """One policy type (``table``), ``*``, or several: ``["master", "operator"]`` or ``"master, operator"``
    rendered as the node's list form ``(master, operator)``."""
    items = [v.strip() for v in value.strip("() ").split(",")] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise _reject(name, value, "it must be a policy type or a list of them",
                      "For example 'table', '*' or ['master', 'query', 'operator'].")
    if items == ["*"]:
        return "*"
    for v in items:
        if not _IDENT.match(v):
            raise _reject(name, value, f"{v!r} is not a plain policy type name",
                          "Use names such as table, operator, master, query, cluster ('*' alone for every type).")
    unique = list(dict.fromkeys(items))
    return unique[0] if len(unique) == 1 else "(" + ", ".join(unique) + ")"


def destination(name: str, value: Any) -> str:
    """``network``, ``local`` or nodes as ``IP:Port`` (a list, or comma-separated); duplicates dropped,
    since the node refuses a list naming one node twice (error 20)."""
    if isinstance(value, str) and value.strip().lower() in ("network", "local"):
        return value.strip().lower()
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and _ADDRESS.match(v.strip()) for v in items):
        raise _reject(name, value, "it must be 'network', 'local' or nodes as IP:Port",
                      "Give the nodes' TCP addresses (edgelake_get_nodes lists them), e.g. "
                      "'10.0.0.2:32048,10.0.0.3:32048'; or 'network' for every node that holds the data.")
    return ",".join(dict.fromkeys(v.strip() for v in items))


def words(name: str, value: Any) -> str:
    """Plain words (a help topic or a command name): letters, digits, ``_ . * -`` and single spaces."""
    text = " ".join(value.split()) if isinstance(value, str) else value
    if isinstance(text, str) and re.search(r"(?i)\bwhere\b", text):
        raise _reject(name, value, "'where' would open a clause of its own", "Give only the command's words.")
    if not isinstance(text, str) or not _WORDS.match(text):
        raise _reject(name, value, "it must be plain words (letters, digits, _ . * - and spaces)",
                      "For example 'blockchain', 'get status' or 'sql'.")
    return text
