"""The daemon's change notifications, passed on by ``plexor connect`` to a 2025-11-25 end client.

* **List changes.** The daemon serves 2026-07-28, where change notifications come only on a
  ``subscriptions/listen`` stream. The relay holds one (tools, prompts and resources ``list_changed``) for
  its lifetime and sends each event to the end client as that era's notification
  (``notifications/tools/list_changed``, ...). When the stream ends (the daemon stopped or died), it is
  opened again as soon as the upstream connection is re-made (docs/clients.md, "When the daemon dies"), or
  the registry names another live daemon, and the end client is told that every list may have changed.
* **Resource updates.** ``resources/subscribe`` and ``resources/unsubscribe`` go up on the relay's
  2025-11-25 connection to the daemon, which decides them as it decides a read (``--profile``) and
  answers exactly as it answers its own client; its ``notifications/resources/updated`` on that
  connection are passed on for the URIs the end client holds. A restarted daemon holds nothing: the
  relay subscribes again to them first.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

from plexor.context import connection_of
from plexor.core.eras import stateless_era
from plexor.features.daemon.tasks import LEGACY

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.connection import Connection
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

    from plexor.features.daemon.upstream import Upstream

__all__ = ["Downstream", "pass_on_changes"]

EVERY_LIST: tuple[ServerEvent, ...] = (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged())
RETRY_FIRST, RETRY_MOST = 0.5, 30.0  # seconds between attempts to open the listen stream again
LISTEN_WAIT = 10.0  # seconds the end client's initialize waits for the first listen stream


class Downstream:
    """The end client's 2025-11-25 connection (the one a relay serves), and the URIs it subscribed to."""

    def __init__(self, up: Upstream) -> None:
        self.up = up
        self.connection: Connection | None = None
        self.ready = anyio.Event()  # a 2025-11-25 end client began its handshake
        self.tried = anyio.Event()  # the first listen stream upstream was opened (or could not be)
        self.uris: set[str] = set()
        self.generation = 0  # the upstream generation the daemon holds ``uris`` in
        up.end.on_notification = self.notified

    def middleware(self) -> ServerMiddleware[object]:
        """SDK middleware keeping the end client's connection, for notifications sent outside any request."""

        async def capture(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
            if self.connection is None and not stateless_era(ctx):
                # the SDK gives a handler a per-request ServerSession; its connection (SDK private, read only
                # through plexor.context.connection_of) is what outlives the request and can notify
                connection = connection_of(ctx.session)
                if connection is not None:
                    self.connection = connection
                    self.ready.set()
                    with anyio.move_on_after(LISTEN_WAIT):  # listChanged is promised with the stream open
                        await self.tried.wait()
            return await call_next(ctx)

        return capture

    async def send(self, event: ServerEvent) -> None:
        """``event`` as the 2025-11-25 notification, to the end client (nothing if it is gone)."""
        connection = self.connection
        if connection is None or not connection.initialized.is_set():  # it lists everything once initialized
            return
        with contextlib.suppress(Exception):  # a gone client: the relay ends with its stdin
            if isinstance(event, ToolsListChanged):
                await connection.send_tool_list_changed()
            elif isinstance(event, PromptsListChanged):
                await connection.send_prompt_list_changed()
            elif isinstance(event, ResourcesListChanged):
                await connection.send_resource_list_changed()
            else:
                await connection.send_resource_updated(event.uri)

    async def notified(self, message: types.ServerNotification | Exception) -> None:
        """A notification of the daemon's on a 2025-11-25 connection: a subscribed resource's update goes on
        (list changes come on the listen stream, once)."""
        if isinstance(message, types.ResourceUpdatedNotification) and str(message.params.uri) in self.uris:
            await self.send(ResourceUpdated(uri=str(message.params.uri)))

    async def subscribe(self, uri: str) -> None:
        """``resources/subscribe``, decided and held by the daemon; its refusal is raised as it answered it."""
        await self.resubscribe()
        fresh, before = uri not in self.uris, self.up.generation
        self.uris.add(uri)  # before the request: an update sent right after the daemon's answer is passed on
        try:
            await self._send(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)))
        except BaseException:
            if fresh:
                self.uris.discard(uri)
            raise
        if self.up.generation != before:  # the daemon was restarted on the way: it holds only this one
            await self.resubscribe()

    async def unsubscribe(self, uri: str) -> None:
        await self.resubscribe()
        await self._send(types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)))
        self.uris.discard(uri)
        await self.resubscribe()

    async def resubscribe(self) -> None:
        """After the daemon was restarted (a new upstream generation): subscribe again to what the end client holds."""
        from mcp.shared.exceptions import MCPError

        from plexor.features.daemon.upstream import lost

        for _ in range(3):  # once more if the daemon was restarted again meanwhile
            if self.generation == self.up.generation:
                return
            self.generation = self.up.generation
            for uri in sorted(self.uris):
                try:
                    await self._send(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)))
                except MCPError as exc:
                    if lost(exc):
                        self.generation = 0  # not known to be held: tried again on the next occasion
                        return
                    # the daemon's answer (e.g. the profile no longer admits it): no more updates of it
                    self.up.log.warning("connect_resubscribe_refused", uri=uri, error=exc.error.message)
                    self.uris.discard(uri)
                except Exception as exc:  # noqa: BLE001 - no daemon to hold it: tried again on the next occasion
                    self.up.log.debug("connect_resubscribe_failed", uri=uri, error=f"{type(exc).__name__}: {exc}")
                    self.generation = 0
                    return

    async def _send(self, request: types.SubscribeRequest | types.UnsubscribeRequest) -> None:
        """On the relay's 2025-11-25 connection: the daemon holds the subscriptions per connection."""
        await self.up.request(lambda c: c.session.send_request(request, types.EmptyResult), LEGACY)


async def pass_on_changes(up: Upstream, down: Downstream) -> None:
    """For the relay's lifetime: the daemon's list changes (one listen stream) passed on to a 2025-11-25 end client."""
    await down.ready.wait()
    opened, retry = 0, RETRY_FIRST
    while True:
        renewed = up.renewed
        if up.info is not None:  # else the daemon is being looked for: the next request starts one if need be
            if await _listen(up, down, again=opened > 0):
                opened, retry = opened + 1, RETRY_FIRST
        down.tried.set()
        with anyio.move_on_after(retry):
            await renewed.wait()
        retry = min(retry * 2, RETRY_MOST)
        await _follow_registry(up)


async def _listen(up: Upstream, down: Downstream, *, again: bool) -> bool:
    """One listen stream, its events passed on until it ends; whether it was opened."""
    opened = False
    try:
        client = await up.connect()
        async with client.listen(tools_list_changed=True, prompts_list_changed=True,
                                 resources_list_changed=True) as stream:
            opened = True
            down.tried.set()
            up.log.debug("connect_listening", generation=up.generation)
            if again:  # a stream was lost: what changed meanwhile (a restarted daemon) was not heard
                await down.resubscribe()
                for event in EVERY_LIST:
                    await down.send(event)
            async for event in stream:
                await down.send(event)
    except Exception as exc:  # noqa: BLE001 - the daemon stopped or died; opened again by the caller
        up.log.debug("connect_listen_lost", error=f"{type(exc).__name__}: {exc}")
    return opened


async def _follow_registry(up: Upstream) -> None:
    """If the registry names another live daemon than the relay's (another relay restarted it), connect to that one;
    the relay never starts a daemon for its listen stream alone (one stopped on purpose stays stopped)."""
    from plexor.features.daemon.process import daemon_health, read_registry, registry_path

    info, current = read_registry(registry_path(up.environ)), up.info
    if info is None or current is None or info["pid"] == current["pid"]:
        return
    if await anyio.to_thread.run_sync(lambda: daemon_health(info)) is not None:
        with contextlib.suppress(Exception):
            await up.connect(restart=True)
