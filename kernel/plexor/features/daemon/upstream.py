"""The relay's side towards the daemon: SDK ``Client``s to it, reconnecting, and restarting it when it died.

One client per set of capabilities the relay declares upstream (:data:`Caps`): the daemon must see what the
*end* client can answer (``ctx.can_ask``), whether it takes tasks (the ``io.modelcontextprotocol/tasks``
extension), and, for a 2025-11-25 end client's tasks and tool list, that era itself. A relay serves one end
client, so in practice that is a handful of clients; on 2026-07-28 a client costs no handshake, only a
connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext, ClientSession

from plexor.features.daemon.process import DaemonError, Log, Registry, ensure_daemon

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx2
    from anyio.abc import TaskGroup
    from mcp.server.session import ServerSession

__all__ = ["Caps", "Upstream", "lost"]

#: What the relay declares upstream for a request: ``elicitation``, ``elicitation.url``, ``sampling``,
#: ``sampling.tools``, ``roots`` (the end client's asking capabilities), ``tasks`` (the tasks extension) and
#: ``legacy`` (a 2025-11-25 connection, for that era's tasks and tool list).
Caps = frozenset[str]
T = TypeVar("T")
A = TypeVar("A", bound=types.Result)


class Upstream:
    """SDK ``Client``s to the daemon, each owned by a background task of ``tg``; reconnects on demand."""

    def __init__(self, environ: dict[str, str], log: Log, tg: TaskGroup, profile: str | None = None) -> None:
        self.environ = environ
        self.log = log
        self.profile = profile
        self.clients: dict[Caps, tuple[Client, anyio.Event]] = {}
        self.info: Registry | None = None
        self._lock = anyio.Lock()
        self._tg = tg
        self.generation = 0
        self.renewed = anyio.Event()  # set (and replaced) when the connection is re-made: a new generation
        self.end = EndClient()

    async def _own(self, url: str, token: str, caps: Caps, ready: anyio.Event, failure: list[Exception]) -> None:
        from plexor.features.daemon.repeat import tracked_client

        close = anyio.Event()
        try:
            headers = {"Authorization": f"Bearer {token}"}
            if self.profile:  # the daemon shows this client only the profile's tools (plexor.features.auth.guard)
                headers["Plexor-Profile"] = self.profile
            http = tracked_client(headers)
            async with http, _client(url, http, caps, self.end) as client:
                self.clients[caps] = (client, close)
                ready.set()
                await close.wait()
        except Exception as exc:  # noqa: BLE001 - reported to the waiting request, or (once closed) dropped
            if not ready.is_set():
                failure.append(exc)
                ready.set()
            else:
                self.log.debug("connect_upstream_closed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if caps in self.clients and self.clients[caps][1] is close:
                del self.clients[caps]

    async def connect(self, caps: Caps = frozenset(), *, restart: bool = False) -> Client:
        """The client declaring ``caps`` (made on first use); ``restart``: drop every client and look for (or
        start) the daemon again. A new client that cannot reach the daemon the others were made for (it died
        since) drops them all and looks for the daemon once more: they point at the dead one too."""
        async with self._lock:
            for attempt in (1, 2):
                if restart:
                    self.close()
                    self.clients.clear()
                    self.info = None
                if caps in self.clients:
                    return self.clients[caps][0]
                found_now = self.info is None
                url, failure = await self._open(caps)
                if not failure:
                    return self.clients[caps][0]
                self.info = None  # check (and if need be restart) the daemon next time
                if found_now or attempt == 2:
                    raise DaemonError(f"cannot reach the Plexor daemon at {url}: {failure[0]}")
                restart = True
            raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _open(self, caps: Caps) -> tuple[str, list[Exception]]:
        """A client declaring ``caps`` to the daemon (found, or started, first if none is known): its URL, and
        why it failed (empty: it is in :attr:`clients`)."""
        info = self.info
        if info is None:
            environ = self.environ
            found = await anyio.to_thread.run_sync(lambda: ensure_daemon(environ, log=self.log))
            self.info = info = found
            self.generation += 1
            self.renewed.set()
            self.renewed = anyio.Event()
            self.log.info("connect_upstream", url=info["url"], pid=info["pid"], generation=self.generation)
        ready = anyio.Event()
        failure: list[Exception] = []
        self._tg.start_soon(self._own, info["url"], info["token"], caps, ready, failure)
        await ready.wait()
        return info["url"], failure

    async def request(self, op: Callable[[Client], Awaitable[T]], caps: Caps = frozenset(), *,
                      tool: str | None = None) -> T:
        """Run ``op(client)``; on a broken connection restart/reconnect and run it once more when that is safe
        (:mod:`plexor.features.daemon.repeat`): it never reached the daemon, or it is no ``tools/call`` (``tool``
        None), or ``tool`` is declared read-only or idempotent. A call of another tool that may have run raises
        :class:`~plexor.features.daemon.repeat.Interrupted` (a tool error); the daemon is restarted all the same."""
        from plexor.features.daemon.repeat import Delivery, interrupted

        client = await self.connect(caps)
        for attempt in (1, 2):
            generation, delivery = self.generation, Delivery()
            try:
                with delivery.watching():
                    return await op(client)
            except Exception as exc:  # noqa: BLE001 - transport errors (httpx2, closed streams); a real answer is raised
                if not lost(exc):
                    raise
                failure: Exception = exc
            may_have_run = tool is not None and delivery.reached
            self.log.warning("connect_upstream_lost", error=f"{type(failure).__name__}: {failure}", tool=tool,
                             reached=delivery.reached, action="give up" if attempt == 2 else "reconnect")
            if attempt == 2:
                break
            try:
                client = await self.connect(caps, restart=self.generation == generation)
            except DaemonError:
                if may_have_run:
                    break
                raise
            if may_have_run and not await self.repeatable(tool or ""):
                break
        if may_have_run:
            raise interrupted(tool or "") from failure
        raise failure

    async def repeatable(self, tool: str) -> bool:
        """Whether the daemon lists ``tool`` (any accepted form of its name) as safe to run twice; not when that
        cannot be told."""
        from plexor.features.daemon.repeat import repeatable

        async def page(cursor: str | None) -> types.ListToolsResult:
            return await self.request(lambda c: c.list_tools(cursor=cursor))

        listed: list[types.Tool] = []
        cursor: str | None = None
        try:
            for _ in range(100):
                found = await page(cursor)
                listed.extend(found.tools)
                cursor = found.next_cursor
                if not cursor:
                    break
        except Exception as exc:  # noqa: BLE001 - unknown, so not safe
            self.log.warning("connect_tools_unknown", error=f"{type(exc).__name__}: {exc}")
            return False
        return repeatable(listed, tool)

    def close(self) -> None:
        for _client, close in list(self.clients.values()):
            close.set()


def lost(exc: Exception) -> bool:
    """Whether ``op`` failed because the connection to the daemon broke (not with the daemon's own answer)."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):  # the SDK's own "Connection closed" carries no data; the daemon's -32000 (a server
        # not ready, plexor.serving.errors) carries its guidance, and no text of an answer is taken for a lost line
        return exc.error.code == types.CONNECTION_CLOSED and exc.error.data is None
    return True


def _client(url: str, http: httpx2.AsyncClient, caps: Caps, end: EndClient) -> RelayClient:
    """A client declaring ``caps`` upstream. On 2026-07-28 a tool that asks answers with ``InputRequiredResult``,
    which the relay passes on or resolves (:mod:`plexor.features.daemon.asking`): the callbacks only declare the
    capabilities, the daemon never sends requests mid-call on that protocol. A 2025-11-25 connection (``legacy``)
    serves the end client's tasks: the daemon asks a task's questions on it during ``tasks/result``, and ``end``
    passes them on to the end client."""
    from mcp.client.streamable_http import streamable_http_client

    from plexor.features.tasks.client import TasksClient

    asks_forms, legacy = bool(caps & {"elicitation", "elicitation.url"}), "legacy" in caps
    return RelayClient(
        streamable_http_client(url, http_client=http), mode="legacy" if legacy else "2026-07-28", cache=None,
        elicitation_callback=(end.elicit if legacy else _never_elicit) if asks_forms else None,
        sampling_callback=(end.sample if legacy else _never_sample) if "sampling" in caps else None,
        sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability())
        if "sampling.tools" in caps else None,
        list_roots_callback=(end.roots if legacy else _never_roots) if "roots" in caps else None,
        message_handler=end.notified if legacy else None,  # resources/updated of the end client's subscriptions
        extensions=[TasksClient()] if "tasks" in caps else None,
    ).declaring(caps)


class RelayClient(Client):
    """The SDK ``Client``, declaring elicitation upstream exactly as the end client did.

    The SDK declares both form and URL mode whenever there is an elicitation callback; the daemon
    must see which of the two the end client answers (``ctx.can_ask("elicitation.url")``).
    """

    _relayed: Caps = frozenset()

    def declaring(self, caps: Caps) -> RelayClient:
        self._relayed = caps
        return self

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        session = await super()._build_session(exit_stack)
        build, caps = session._build_capabilities, self._relayed
        if not caps & {"elicitation", "elicitation.url"}:
            return session
        elicitation = types.ElicitationCapability(
            form=types.FormElicitationCapability() if "elicitation" in caps else None,
            url=types.UrlElicitationCapability() if "elicitation.url" in caps else None)

        def exact(version: str) -> types.ClientCapabilities:
            return build(version).model_copy(update={"elicitation": elicitation})

        setattr(session, "_build_capabilities", exact)  # noqa: B010 - SDK private: no public way to narrow the ad
        return session


class EndClient:
    """The end client, as the daemon's 2025-11-25 task questions reach it: each passed on over the relay's own
    session (the one end client a relay serves), its answer or refusal passed back."""

    def __init__(self) -> None:
        self.session: ServerSession | None = None
        #: where the daemon's notifications on a 2025-11-25 connection go (plexor.features.daemon.changes)
        self.on_notification: Callable[[types.ServerNotification | Exception], Awaitable[None]] | None = None

    async def notified(self, message: types.ServerNotification | Exception) -> None:
        if self.on_notification is not None:
            await self.on_notification(message)

    async def _ask(self, request: types.ServerRequest, result: type[A]) -> A | types.ErrorData:
        from mcp.shared.exceptions import MCPError

        if self.session is None:
            return types.ErrorData(code=types.INTERNAL_ERROR, message="plexor connect has no client to ask yet")
        try:
            return await self.session.send_request(request, result)
        except MCPError as exc:
            return exc.error

    async def elicit(self, context: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return await self._ask(types.ElicitRequest(params=params), types.ElicitResult)

    async def sample(self, context: ClientRequestContext, params: types.CreateMessageRequestParams
                     ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        if params.tools:
            return await self._ask(types.CreateMessageRequest(params=params), types.CreateMessageResultWithTools)
        return await self._ask(types.CreateMessageRequest(params=params), types.CreateMessageResult)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        return await self._ask(types.ListRootsRequest(), types.ListRootsResult)


def _refusal() -> types.ErrorData:
    return types.ErrorData(code=types.INTERNAL_ERROR, message="plexor connect answers questions through InputRequiredResult")


async def _never_elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ErrorData:
    return _refusal()


async def _never_sample(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.ErrorData:
    return _refusal()


async def _never_roots(context: ClientRequestContext) -> types.ErrorData:
    return _refusal()
