"""Which relayed requests ``plexor connect`` sends again when the daemon dies under them.

A request lost with the daemon is sent once more, to the restarted daemon, when running it twice cannot hurt:

* it never reached the daemon, so nothing ran: no POST of it got to the daemon whole (no connection, a failed
  write, or on Linux a reset connection; say, a daemon killed while idle). :class:`Delivery` tells, from the
  transport of :func:`tracked_client`;
* it is not a ``tools/call``: the lists, ``resources/read``, ``prompts/get``, ``completion/complete`` and
  ``ping`` read; ``tasks/get``, ``tasks/result`` and ``tasks/list`` read too, and ``tasks/cancel`` and
  ``tasks/update`` repeat harmlessly (a task cancelled twice stays cancelled; an answer to a question no longer
  outstanding is ignored);
* it is a ``tools/call`` (one that creates a task too) of a tool the daemon lists with ``readOnlyHint`` or
  ``idempotentHint`` (:func:`repeatable`, resolving the name as the kernel does).

Any other ``tools/call`` that may have reached the daemon is answered with :func:`interrupted`, a tool error:
whether it took effect only the caller can check.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

import httpx2
import mcp_types as types

from plexor.errors import PlexorError

__all__ = ["Delivery", "Interrupted", "interrupted", "repeatable", "tracked_client"]

_DELIVERY: ContextVar[Delivery | None] = ContextVar("plexor_connect_delivery", default=None)


class Delivery:
    """Whether a request may have reached the daemon: one of its POSTs got past connecting.

    The SDK's HTTP transport sends each message in a copy of its sender's context, so the transport of
    :func:`tracked_client` finds the ``Delivery`` of the request it carries in a context variable.
    """

    def __init__(self) -> None:
        self.reached = False

    @contextlib.contextmanager
    def watching(self) -> Iterator[Delivery]:
        """Within the block, the POSTs this task's requests cause are counted here."""
        token = _DELIVERY.set(self)
        try:
            yield self
        finally:
            _DELIVERY.reset(token)


class _Tracking(httpx2.AsyncBaseTransport):
    """A transport noting, on the ``Delivery`` of the request it carries, each POST that may have been sent."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def __aenter__(self) -> _Tracking:
        await self.inner.__aenter__()
        return self

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        delivery = _DELIVERY.get()
        unsent = False
        try:
            return await self.inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            unsent = _unsent(exc)
            raise
        finally:
            if delivery is not None and request.method == "POST" and not unsent:
                delivery.reached = True

    async def aclose(self) -> None:
        await self.inner.aclose()


def _unsent(exc: httpx2.TransportError) -> bool:
    """Whether a POST that failed before the daemon answered surely gave the daemon no whole request to act on.

    So it is when no connection was made, or writing the request failed. On Linux it is so too when the
    connection was reset before any answer: Linux resets the connections of a process that ends (however it
    ends) only when data the process never read is left on them, and with one request per connection
    (:func:`tracked_client`) none is left once the daemon has read the request; the connection of a request it
    did read is closed instead, which counts as maybe run. Other systems are not relied on for this: there a
    reset counts as maybe run.
    """
    if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.WriteError)):
        return True
    if not sys.platform.startswith("linux") or not isinstance(exc, httpx2.ReadError):
        return False
    cause: BaseException | None = exc
    for _ in range(8):  # httpx2's error, httpcore2's, anyio's, then the system's
        if cause is None or isinstance(cause, ConnectionResetError):
            break
        cause = cause.__cause__ or cause.__context__
    return isinstance(cause, ConnectionResetError)


def tracked_client(headers: dict[str, str]) -> httpx2.AsyncClient:
    """An HTTP client to the daemon, with the timeouts of the SDK's ``create_mcp_http_client``, whose POSTs a
    :class:`Delivery` can watch.

    It opens a connection per request (none is kept alive): a request written onto a kept-alive connection
    whose daemon has just died fails as one the daemon received would, while a new connection to a dead daemon
    is refused before anything is sent. No proxy from the environment: the daemon is on the loopback interface.
    """
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    transport = httpx2.AsyncHTTPTransport(trust_env=False, limits=httpx2.Limits(max_keepalive_connections=0))
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                              transport=_Tracking(transport), trust_env=False)


class Interrupted(PlexorError):
    """The daemon stopped while a call not declared safe to repeat was running; it was not sent again."""

    code = "interrupted"


def interrupted(tool: str) -> Interrupted:
    """The answer to a ``tools/call`` of ``tool`` lost with the daemon, and not sent again."""
    return Interrupted(
        f"the Plexor daemon stopped while the call of {tool!r} was running: it may or may not have taken effect",
        f"plexor connect did not run it again, because {tool!r} is not declared read-only or idempotent "
        "(readOnlyHint or idempotentHint). Check whether the call took effect (look at what it changes), then "
        "call it again if it did not. The daemon is restarted for the next call.",
        data={"tool": tool})


@dataclasses.dataclass
class _Listed:
    namespace: str
    annotations: types.ToolAnnotations | None


def repeatable(tools: Iterable[types.Tool], name: str) -> bool:
    """Whether the tool ``name`` names is listed in ``tools`` (the daemon's ``tools/list``) as safe to run twice.

    ``name`` is resolved as the kernel resolves it (:func:`plexor.core.pipeline.find_named`): the full name, the
    dotted form, or the bare method. Each tool's namespace and the separator come from its name and its
    provenance (``plexor/<plugin>/<method>``). A name that resolves to no listed tool is not safe.
    """
    from plexor.core.pipeline import find_named

    table: dict[str, _Listed] = {}
    separator = "_"
    for tool in tools:
        provenance = (tool.meta or {}).get("plexor/provenance")
        method = provenance.rsplit("/", 1)[-1] if isinstance(provenance, str) else ""
        namespace = ""
        if method and len(tool.name) > len(method) + 1 and tool.name.endswith(method):
            namespace, separator = tool.name[:-len(method) - 1], tool.name[-len(method) - 1]
        table[tool.name] = _Listed(namespace, tool.annotations)
    found = find_named(table, name, separator, lambda listed: listed.namespace)
    hints = found.annotations if found is not None else None
    return hints is not None and (hints.read_only_hint is True or hints.idempotent_hint is True)
