"""The per-call context a tool, resource reader or prompt can ask for.

Declare a parameter annotated ``plexor.Context`` (any name) and the kernel
passes one in; it never appears in the input schema.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.connection import Connection
    from mcp.server.session import ServerSession
    from mcp_types import LoggingLevel, ProgressToken, RequestId

    from plexor.asking import Question
    from plexor.core.base import KernelBase
    from plexor.exchange import Exchange, Session
    from plexor.handle import PluginHandle
    from plexor.settings import Settings

T = TypeVar("T")

__all__ = ["DETACHER", "Context", "Detacher", "connection_of"]


class Detacher(Protocol):
    """How a call may become a task (:meth:`Context.detach`), as the feature that runs tasks provides it."""

    def __call__(self, ctx: Context, message: str | None, /) -> Awaitable[bool]: ...

    @property
    def became_task(self) -> bool:
        """Whether the call has become a task (its request answered with the task)."""


#: The current call's :class:`Detacher`, or ``None`` when it cannot become a task: set around a
#: ``detach="manual"`` call by the feature that runs tasks (``plexor.features.tasks``), so the kernel needs no
#: knowledge of tasks.
DETACHER: ContextVar[Detacher | None] = ContextVar("plexor_detacher", default=None)

LEVELS: tuple[LoggingLevel, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_OF: dict[str, LoggingLevel] = {level: level for level in LEVELS}


def connection_of(session: object) -> Connection | None:
    """The SDK connection behind a request's ``ServerSession`` (which the SDK makes per request), or ``None``.

    SDK private (``ServerSession._connection``): the SDK has no public accessor in 2.3, and the connection
    is where its protocol version and per-connection state live. Every such read goes through here."""
    connection: Connection | None = getattr(session, "_connection", None)
    return connection


def _below_session_level(session: object, level: str) -> bool:
    """Whether the session's ``logging/setLevel`` (kept on its SDK connection by the server) mutes ``level``."""
    state = getattr(connection_of(session), "state", None)
    floor = state.get("plexor/logLevel") if isinstance(state, dict) else None
    if floor not in LEVELS:
        return False
    return LEVELS.index(level) < LEVELS.index(floor) if level in LEVELS else False


_NOTHING_CHOSEN: Mapping[str, str] = MappingProxyType({})


class Context:
    """What a running call may use: its plugin's handle (settings, database, services) and the client channel."""

    #: Marks the class (and subclasses) for :mod:`plexor.schema`, which leaves such parameters out of schemas.
    __plexor_context__ = True
    __slots__ = ("_kernel", "plugin", "request_id", "name", "_session", "_progress_token", "_close_sse_stream",
                 "_exchange", "chosen")

    def __init__(
        self,
        kernel: KernelBase,
        plugin: PluginHandle,
        *,
        request_id: RequestId | None = None,
        session: Session | None = None,
        progress_token: ProgressToken | None = None,
        name: str = "",
        close_sse_stream: Callable[[], Awaitable[object]] | None = None,
        exchange: Exchange | None = None,
    ) -> None:
        self._kernel = kernel
        self.plugin = plugin  #: the plugin's :class:`plexor.PluginHandle`
        self.request_id = request_id
        self.name = name
        self._session = session
        self._progress_token = progress_token
        self._close_sse_stream = close_sse_stream
        self._exchange = exchange
        #: In a completion function: the template's other variables the client has already filled in
        #: (``completion/complete``'s ``context.arguments``), e.g. ``{"folder": "notes"}``; else empty.
        self.chosen: Mapping[str, str] = _NOTHING_CHOSEN

    @property
    def kernel(self) -> KernelBase:
        """The kernel serving this call, for the kernel's own built-in tools (``plexor_health``); a plugin uses
        :attr:`plugin` instead, since what is behind the handle may change between releases."""
        return self._kernel

    @property
    def settings(self) -> Settings:
        """The plugin's validated settings."""
        return self.plugin.settings

    def service(self, kind: type[T]) -> T:
        """The plugin's service of type ``kind`` (see :meth:`plexor.PluginHandle.provide`).

        Raises :class:`plexor.NotReady` with guidance while the plugin has not provided it.
        """
        return self.plugin.service(kind)

    @property
    def database(self) -> Any:  # peewee's Database, which is untyped; see PluginHandle.database
        """The plugin's peewee database (``None`` when it registered no models)."""
        return self.plugin.database

    def _sdk_session(self) -> ServerSession | None:
        """The session as the SDK's ``ServerSession`` (``None`` for none, or for a stand-in such as a task's)."""
        if self._session is None:
            return None
        from mcp.server.session import ServerSession

        return self._session if isinstance(self._session, ServerSession) else None

    # -- asking the client (see plexor.asking) ---------------------------------
    @property
    def exchange(self) -> Exchange:
        if self._exchange is None:
            from plexor.exchange import Exchange

            self._exchange = Exchange(session=self._sdk_session(), request_id=self.request_id)
        return self._exchange

    # The answers are JSON as the client sent it (checked against MCP's result types), typed loosely so that a
    # plugin reads ``answer["content"]["name"]`` as what it asked for, as it always could.
    async def ask(self, **questions: Question) -> dict[str, dict[str, Any]]:
        """Ask the client one or more questions and return the answers, keyed like the arguments.

        Each value is :class:`plexor.Elicit`, :class:`plexor.ElicitURL`,
        :class:`plexor.Sample` (with ``tools=`` for sampling with tools) or
        :class:`plexor.ListRoots`. On 2026-07-28 clients this may end the round
        (the function runs again, with the answers, when the client retries);
        on older clients each question is sent and awaited. Keep the keys
        stable between runs: they name the questions. Raises
        :class:`plexor.asking.AskError` when the client lacks the capability
        or answers something malformed.
        """
        return await self.exchange.ask(questions)

    async def elicit(self, message: str, schema: Mapping[str, object], *, key: str | None = None) -> dict[str, Any]:
        """Ask the user to fill in a form; returns ``{"action", "content"?}`` (see :class:`plexor.Elicit`)."""
        from plexor.asking import Elicit, default_key

        question = Elicit(message, schema)
        name = key or default_key(question)
        return (await self.exchange.ask({name: question}))[name]

    async def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None,
                         key: str | None = None) -> dict[str, Any]:
        """Send the user to a web page (URL-mode elicitation); returns ``{"action"}`` (see :class:`plexor.ElicitURL`)."""
        from plexor.asking import ElicitURL, default_key

        question = ElicitURL(message, url, elicitation_id=elicitation_id)
        name = key or default_key(question)
        return (await self.exchange.ask({name: question}))[name]

    async def elicitation_complete(self, elicitation_id: str) -> bool:
        """Tell the client that the page of a URL-mode elicitation is done
        (``notifications/elicitation/complete``), so it can stop waiting and retry.

        Returns False (and sends nothing) when there is no channel for it: no client, or a
        2026-07-28 request, whose client retries on its own.
        """
        session = self._sdk_session()
        if session is None or self.exchange.modern:
            return False
        try:
            await session.send_elicit_complete(elicitation_id, related_request_id=self.request_id)
        except Exception:  # noqa: BLE001 - a client gone meanwhile
            return False
        return True

    async def sample(self, prompt: str | Sequence[Mapping[str, object]], *, key: str | None = None,
                     max_tokens: int = 512, system: str | None = None, temperature: float | None = None,
                     stop: Sequence[str] | None = None, tools: Sequence[Mapping[str, object]] | None = None,
                     tool_choice: str | None = None) -> dict[str, Any]:
        """Ask the client's model; returns the ``CreateMessageResult`` dict (see :class:`plexor.Sample`, whose
        options these are)."""
        from plexor.asking import Sample, default_key

        question = Sample(prompt, max_tokens=max_tokens, system=system, temperature=temperature, stop=stop,
                          tools=tools, tool_choice=tool_choice)
        name = key or default_key(question)
        return (await self.exchange.ask({name: question}))[name]

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots, ``[{"uri", "name"?}, ...]``."""
        from plexor.asking import ListRoots

        roots = (await self.exchange.ask({key or "roots": ListRoots()}))[key or "roots"].get("roots", [])
        return [root for root in roots if isinstance(root, dict)] if isinstance(roots, list) else []

    def can_ask(self, what: str) -> bool:
        """Whether the client declared ``"elicitation"``, ``"elicitation.url"``, ``"sampling"``,
        ``"sampling.tools"`` or ``"roots"`` for this request."""
        return self.exchange.can_ask(what)

    @property
    def round(self) -> int:
        """1 on the first run of this call; 2, 3... when a 2026-07-28 client retries with answers."""
        return self.exchange.round

    @property
    def state(self) -> dict[str, Any]:
        """A JSON-able dict carried from one round of this call to the next (sealed in ``requestState``).

        Write what the next run needs (e.g. an id minted in round 1); it comes
        back unchanged and unforgeable. Empty on the first round and on clients
        older than 2026-07-28, which never re-run a call.
        """
        return self.exchange.state

    async def progress(self, current: float, total: float | None = None, message: str | None = None) -> None:
        """Send an MCP progress notification (a no-op when the client asked for none)."""
        if self._session is None:
            return
        report = getattr(self._session, "report_progress", None)
        if report is not None:
            # Scoped to this request by the SDK: a no-op when the client sent no progress token.
            await report(current, total, message)
        elif self._progress_token is not None and (sdk := self._sdk_session()) is not None:
            await sdk.send_progress_notification(
                self._progress_token, current, total, message,
                related_request_id=None if self.request_id is None else str(self.request_id),
            )

    async def detach(self, message: str | None = None) -> bool:
        """Become a task now: the client gets its task handle and this call goes on in the background.

        For tools registered with ``task=..., detach="manual"``, which gather what they need first
        (``ctx.ask`` in the ordinary request) and then commit to long work. From here on, questions
        wait in the task (``input_required``) and progress becomes its status ``message``. Returns
        False (and does nothing) when the call is not one that may become a task: the client did not
        ask for one, the tool is not registered so, or it already is one.
        """
        detacher = DETACHER.get()
        return False if detacher is None else await detacher(self, message)

    def continue_in(self, session: Session, exchange: Exchange) -> None:
        """Go on with this call on another channel: progress and logs go to ``session``, questions through
        ``exchange``, and the request's progress token is dropped. The tasks feature calls it when a
        call becomes a task (:meth:`detach`); a tool never needs it."""
        self._session = session
        self._exchange = exchange
        self._progress_token = None

    async def close_stream(self) -> bool:
        """Close this call's SSE stream now, on Streamable HTTP with resumability; the client
        reconnects (``Last-Event-ID``) and receives the rest. Useful to free the connection during
        a long call. Returns False (and does nothing) on transports without that ability."""
        if self._close_sse_stream is None:
            return False
        await self._close_sse_stream()
        return True

    async def log(self, level: str, message: str) -> None:
        """Send an MCP logging notification to the client, and log it locally too.

        ``level`` is one of MCP's (RFC 5424) levels: ``debug``, ``info``, ``notice``, ``warning``,
        ``error``, ``critical``, ``alert``, ``emergency``. The client decides what it receives: below
        the level it set with ``logging/setLevel`` (2025-11-25), or without the ``logLevel`` opt-in of
        its request (2026-07-28), nothing is sent.
        """
        self._kernel.log.info("plugin_log", plugin=self.plugin.name, level=level, message=message)
        wire = _LEVEL_OF.get(level)  # the SDK drops a level it does not know, unsent
        if self._session is None or wire is None or _below_session_level(self._session, level):
            return
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                await self._session.send_log_message(
                    wire, message, logger=f"plexor.{self.plugin.name}", related_request_id=self.request_id
                )
            except Exception:  # noqa: BLE001 - a client that cannot take logs must not fail the call
                self._kernel.log.debug("log_notification_failed", plugin=self.plugin.name)
