"""The request path of the SDK server, declared in one place: named layers in a fixed order.

Every MCP request, of every kind and in both eras, crosses ``Server.middleware`` outermost
first. Which layer comes first used to be the side effect of ``append``/``insert`` calls in
five modules; now each module adds its layer by name and :data:`ORDER` alone decides where it
sits, whatever the order of the calls:

1. ``trace``: the HTTP ``traceparent`` made the current context (telemetry, HTTP only);
2. ``sdk``: the SDK's own first middleware (its OpenTelemetry span, from ``params._meta``);
3. ``session``: session and era checks, the readiness gate, every failure made guidance
   (``plexor.serving.server``);
4. ``limits``: a request id or progress token too long to send back is refused before it
   runs (``plexor.serving.bounds``, ``docs/security.md#limits``);
5. ``request-state``: the SDK's ``RequestStateBoundary`` (SEP-2322 ``requestState``);
6. ``authorization``: one decision, scopes and profile, for every request that names a tool,
   prompt, resource or URI, and the filtering of every list (``plexor.features.auth.layer``); the
   caller's principal was established before the SDK, by the ASGI guard;
7. ``tasks``: a ``tools/call`` may become a task (the ``tasks`` built-in plugin), decided only
   after authorization, so a call the connection may not make never becomes a task;
8. ``observe``: request observers of plugins (nothing of the kernel's own: telemetry's span is
   the SDK's, outermost, so that it times refusals too);
9. ``timeout``: the per-request time limit (``plexor.serving.http``);

then the handler (the kernel's pipeline). Plugins add layers at these positions with the
``plexor_request_layers`` hook (:mod:`plexor.extending`); several layers at one position keep the
order they were added in, outermost first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import ServerMiddleware

__all__ = ["ORDER", "POSITIONS", "RequestPath"]

ORDER = ("trace", "sdk", "session", "limits", "request-state", "authorization", "tasks", "observe", "timeout")
#: The positions a plugin's layer may take (``sdk`` is the SDK's own).
POSITIONS = tuple(n for n in ORDER if n != "sdk")


class RequestPath:
    """The named layers of one server; keeps ``server.middleware`` (the SDK's list, changed in place) in :data:`ORDER`."""

    def __init__(self, middleware: list[ServerMiddleware[object]]) -> None:
        self._middleware = middleware
        self._layers: dict[str, dict[str, tuple[ServerMiddleware[object], ...]]] = {"sdk": {"sdk": tuple(middleware)}}
        self._owners: dict[tuple[str, str], str] = {}  # (position, name) -> the plugin that added it

    def add(self, position: str, layer: ServerMiddleware[object], name: str | None = None, owner: str = "") -> None:
        """Put ``layer`` at ``position``, under ``name`` (default: the position's name), added by the plugin
        ``owner``; adding a name again replaces its layer, a new name goes after the others at that position."""
        if position not in POSITIONS:
            raise ValueError(f"unknown request layer {position!r}: the positions are {', '.join(POSITIONS)}")
        self._layers.setdefault(position, {})[name or position] = (layer,)
        self._owners[(position, name or position)] = owner
        self._build()

    def drop(self, owner: str) -> None:
        """Take out every layer the plugin ``owner`` added (it failed: nothing of it stays on the path)."""
        for position, name in [key for key, who in self._owners.items() if owner and who == owner]:
            del self._layers[position][name], self._owners[(position, name)]
        self._build()

    def _build(self) -> None:
        self._middleware[:] = [m for n in ORDER for group in self._layers.get(n, {}).values() for m in group]

    def between(self, first: str, last: str) -> list[ServerMiddleware[object]]:
        """The layers after position ``first`` and before ``last``, outermost first: what a task's run
        crosses after the ``tasks`` layer made it a task (the run-time limit is the task runner's own)."""
        order = list(ORDER)
        inside = order[order.index(first) + 1:order.index(last)]
        return [m for n in inside for group in self._layers.get(n, {}).values() for m in group]

    def names(self) -> list[str]:
        """The layers in place, outermost first: each position, or ``position:name`` for a plugin's own
        (``sdk`` stands for the SDK's own)."""
        return [n if name == n else f"{n}:{name}" for n in ORDER for name, group in self._layers.get(n, {}).items() if group]
