"""Test-only plugin of the authorization tests: every call it receives is appended to a file.

Loaded from ``tests/auth/site`` on ``PYTHONPATH`` (a path-based entry point), never installed.
``[ledger] record = PATH`` names the file; a refused call must leave no line there.
Scopes: ``ledger_balance`` is read-only (``ledger:read``), ``ledger_post`` writes
(``ledger:write``), ``ledger_purge`` declares ``ledger:admin`` explicitly; the resource and the
prompt need ``ledger:read``. ``ledger_post`` may run as a task (``task="optional"``) and tells
subscribers that ``ledger://entries`` changed (``resources/updated``). Two protocol methods of its own
(``plexor_protocol_methods``): ``ledger/export`` declares no scopes (so it needs ``ledger:write``) and
``ledger/peek`` declares ``ledger:read``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plexor import hookimpl

PLEXOR_NAMESPACE = "ledger"
_record: dict[str, Path] = {}
_handle: dict[str, Any] = {}


def _note(what: str, **args: Any) -> None:
    path = _record.get("path")
    if path is not None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"call": what, **args}) + "\n")


@hookimpl
def plexor_add_config(config: Any) -> None:
    config.add("record", str, None, help="file every call is appended to")


@hookimpl
def plexor_register_tools(register: Any, settings: Any) -> None:
    if settings.get("record"):
        _record["path"] = Path(settings.get("record"))
    register(balance, annotations={"readOnlyHint": True})
    register(post, task="optional")
    register(purge, scopes=["ledger:admin"])


@hookimpl
def plexor_startup(plugin: Any) -> None:
    _handle["plugin"] = plugin


@hookimpl
def plexor_register_resources(register: Any, settings: Any) -> None:
    register("ledger://entries", entries, name="entries", description="every entry")


@hookimpl
def plexor_register_prompts(register: Any, settings: Any) -> None:
    register(summary)


@hookimpl
def plexor_protocol_methods(setup: Any) -> list[Any]:
    from mcp_types import RequestParams

    from plexor.extending import ProtocolMethod

    class AccountParams(RequestParams):
        account: str = "main"

    async def export(ctx: Any, params: AccountParams) -> dict[str, Any]:
        _note("export", account=params.account)
        return {"account": params.account, "entries": []}

    async def peek(ctx: Any, params: AccountParams) -> dict[str, Any]:
        _note("peek", account=params.account)
        return {"account": params.account, "balance": 42}

    return [ProtocolMethod("ledger/export", AccountParams, export),
            ProtocolMethod("ledger/peek", AccountParams, peek, scopes=("ledger:read",))]


def balance(account: str = "main") -> dict[str, Any]:
    """Read the balance of an account."""
    _note("balance", account=account)
    return {"account": account, "balance": 42}


def post(amount: int) -> dict[str, Any]:
    """Post an entry."""
    _note("post", amount=amount)
    if "plugin" in _handle:
        _handle["plugin"].resource_updated("ledger://entries")
    return {"posted": amount}


def purge() -> dict[str, Any]:
    """Delete every entry."""
    _note("purge")
    return {"purged": True}


def entries() -> dict[str, Any]:
    _note("entries")
    return {"entries": []}


def summary(account: str = "main") -> str:
    """Summarise an account."""
    _note("summary", account=account)
    return f"Summarise {account}."
