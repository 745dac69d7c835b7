"""A test plugin of the HTTP server-extension hooks: each one it implements leaves a trace in
``$PLEXOR_HOME/probe.jsonl``, so tests/test_extending.py can see through a real ``plexor serve``
that the kernel called it and used its answer."""

from __future__ import annotations

import json
import os
from typing import Any

from plexor import hookimpl

PLEXOR_NAMESPACE = "probe"
HANDLE: list[Any] = []


def _note(what: str, **fields: Any) -> None:
    with open(os.path.join(os.environ["PLEXOR_HOME"], "probe.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"what": what, **fields}) + "\n")


def _stamping(app: Any, header: bytes, value: bytes) -> Any:
    """``app``, its responses carrying ``header: value``."""

    async def stamped(scope: Any, receive: Any, send: Any) -> None:
        async def send_stamped(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (header, value)]}
            await send(message)

        await app(scope, receive, send_stamped)

    return stamped


@hookimpl
def plexor_asgi_wrapper(app: Any, setup: Any) -> Any:
    return _stamping(app, b"x-probe", b"wrapped")


@hookimpl
def plexor_endpoint_wrapper(app: Any, setup: Any) -> Any:
    """Stamps what reaches the MCP endpoint itself, and notes the clock it was given."""
    _note("endpoint", clock=type(setup.clock).__name__)
    return _stamping(app, b"x-probe-endpoint", b"reached")


@hookimpl
def plexor_principal(scope: Any, kernel: Any) -> str | None:
    team = [v.decode() for k, v in scope.get("headers") or () if k == b"x-team"]
    return f"team:{team[0]}" if team else None


@hookimpl
def plexor_notifier_backend(setup: Any) -> Any:
    class Recorded:
        def attach(self, deliver: Any) -> None:
            self.deliver = deliver

        def publish(self, event: Any) -> None:
            _note("published", event=str(event))
            self.deliver(event)

        async def start(self) -> None:
            _note("backend_started")

        async def close(self) -> None:
            _note("backend_closed")

    return Recorded()


@hookimpl
def plexor_event_store(setup: Any) -> Any:
    from plexor.features.state.memory_events import MemoryEventStore

    class Recorded(MemoryEventStore):
        async def store_event(self, stream_id: Any, message: Any) -> Any:
            _note("event_stored")
            return await super().store_event(stream_id, message)

    return Recorded(100, 2**20, 2**22)


@hookimpl
def plexor_startup(plugin: Any) -> None:
    HANDLE.append(plugin)


def touch(uri: str = "probe://thing") -> dict[str, str]:
    """Say that a resource changed (through the kernel's notifier)."""
    HANDLE[0].resource_updated(uri)
    return {"touched": uri}


@hookimpl
def plexor_register_tools(register: Any, settings: Any) -> None:
    register(touch)
