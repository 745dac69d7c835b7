"""The request path of the SDK server, declared in one place: named layers in a fixed order.

Every MCP request, of every kind and in both eras, crosses ``Server.middleware`` outermost
first. Which layer comes first used to be the side effect of ``append``/``insert`` calls in
five modules; now each module adds its layer by name and :data:`ORDER` alone decides where it
sits, whatever the order of the calls:

1. ``trace``: the HTTP ``traceparent`` made the current context (telemetry, HTTP only);
2. ``sdk``: the SDK's own first middleware (its OpenTelemetry span, from ``params._meta``);
3. ``session``: session and era checks, the readiness gate, every failure made guidance
   (``plexor.server``);
4. ``limits``: a request id or progress token too long to send back is refused before it
   runs (``plexor.serving.bounds``, ``docs/security.md#limits``);
5. ``request-state``: the SDK's ``RequestStateBoundary`` (SEP-2322 ``requestState``);
6. ``authorization``: one decision, scopes and profile, for every request that names a tool,
   prompt, resource or URI, and the filtering of every list (``plexor.auth.guard``); the
   caller's principal was established before the SDK, by the ASGI guard;
7. ``tasks``: a ``tools/call`` may become a task (``plexor.tasks``), decided only after
   authorization, so a call the connection may not make never becomes a task;
8. ``timeout``: the per-request time limit (``plexor.serving.http``);

then the handler (the kernel's pipeline).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ORDER", "RequestPath"]

ORDER = ("trace", "sdk", "session", "limits", "request-state", "authorization", "tasks", "timeout")


class RequestPath:
    """The named layers of one server; keeps ``server.middleware`` (the SDK's list, changed in place) in :data:`ORDER`."""

    def __init__(self, middleware: list[Any]) -> None:
        self._middleware = middleware
        self._layers: dict[str, list[Any]] = {"sdk": list(middleware)}

    def add(self, name: str, layer: Any) -> None:
        """Put ``layer`` at its place; a name may hold one layer (adding it again replaces it)."""
        if name not in ORDER or name == "sdk":
            raise ValueError(f"unknown request layer {name!r}: use one of {', '.join(n for n in ORDER if n != 'sdk')}")
        self._layers[name] = [layer]
        self._middleware[:] = [m for n in ORDER for m in self._layers.get(n, ())]

    def names(self) -> list[str]:
        """The layers in place, outermost first (``sdk`` stands for the SDK's own)."""
        return [n for n in ORDER if self._layers.get(n)]
