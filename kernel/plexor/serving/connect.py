"""``plexor connect``: MCP on stdin/stdout, relayed to the shared daemon (see :mod:`plexor.daemon`).

The relay keeps SDK clients to the daemon (reconnecting, and restarting the daemon when it died)
and passes questions of a call on: a 2026-07-28 end client gets the ``InputRequiredResult``
itself; for an older one the relay asks each question over stdio and retries upstream with the
answers.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any

from plexor.core.eras import stateless_era
from plexor.daemon import DaemonError, ensure_daemon
from plexor.version import __version__

__all__ = ["relay_asking", "run_connect"]

# Rounds of InputRequiredResult the relay resolves for a pre-2026 client before giving up.
MAX_ASK_ROUNDS = 10


class _Upstream:
    """SDK ``Client``s to the daemon, each owned by a background task; reconnects on demand.

    One client per set of client capabilities the relay has to declare upstream: the daemon must
    see what the *end* client can answer (``ctx.can_ask``), and the SDK client stamps its
    capabilities on every request it sends. A relay serves one end client, so in practice that is
    one client for asking requests and one (declaring nothing) for the rest. On 2026-07-28 a client
    costs no handshake, only a connection.
    """

    def __init__(self, environ: dict[str, str], log: Any, profile: str | None = None) -> None:
        self.environ = environ
        self.log = log
        self.profile = profile
        self.clients: dict[frozenset[str], tuple[Any, Any]] = {}
        self.info: dict[str, Any] | None = None
        self._lock: Any = None
        self._tg: Any = None
        self.generation = 0

    async def _own(self, info: dict[str, Any], caps: frozenset[str], ready: Any, outcome: dict[str, Any]) -> None:
        import anyio
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        close = anyio.Event()
        # 2026-07-28 upstream: a tool that asks answers with InputRequiredResult, which the relay
        # passes on or resolves (see relay_asking). The callbacks only declare the capabilities;
        # on this protocol the daemon never sends requests mid-call.
        callbacks: dict[str, Any] = {}
        if caps & {"elicitation", "elicitation.url"}:
            callbacks["elicitation_callback"] = _never
        if "sampling" in caps:
            callbacks["sampling_callback"] = _never
            if "sampling.tools" in caps:
                import mcp_types as types

                callbacks["sampling_capabilities"] = types.SamplingCapability(tools=types.SamplingToolsCapability())
        if "roots" in caps:
            callbacks["list_roots_callback"] = _never_roots
        try:
            headers = {"Authorization": f"Bearer {info['token']}"}
            if self.profile:  # the daemon shows this client only the profile's tools (plexor.features.auth.guard)
                headers["Plexor-Profile"] = self.profile
            http = create_mcp_http_client(headers=headers)
            async with http, _RelayClient(streamable_http_client(info["url"], http_client=http), mode="2026-07-28",
                                          cache=None, **callbacks).declaring(caps) as client:
                self.clients[caps] = (client, close)
                ready.set()
                await close.wait()
        except Exception as exc:  # noqa: BLE001 - reported to the waiting request, or (once closed) dropped
            if not ready.is_set():
                outcome["error"] = exc
                ready.set()
            else:
                self.log.debug("connect_upstream_closed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if self.clients.get(caps, (None, None))[1] is close:
                del self.clients[caps]

    async def connect(self, caps: frozenset[str] = frozenset(), *, restart: bool = False) -> Any:
        import anyio

        async with self._lock:
            if restart:
                self.close()
                self.clients.clear()
                self.info = None
            if caps in self.clients:
                return self.clients[caps][0]
            if self.info is None:
                self.info = await anyio.to_thread.run_sync(lambda: ensure_daemon(self.environ, log=self.log))
                self.generation += 1
                self.log.info("connect_upstream", url=self.info["url"], pid=self.info["pid"], generation=self.generation)
            info = self.info
            ready = anyio.Event()
            outcome: dict[str, Any] = {}
            self._tg.start_soon(self._own, info, caps, ready, outcome)
            await ready.wait()
            if "error" in outcome:
                self.info = None  # check (and if need be restart) the daemon next time
                raise DaemonError(f"cannot reach the Plexor daemon at {info['url']}: {outcome['error']}")
            return self.clients[caps][0]

    async def request(self, op: Any, caps: frozenset[str] = frozenset()) -> Any:
        """Run ``op(client)``; on a broken connection restart/reconnect and run it once more."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        client = await self.connect(caps)
        generation = self.generation
        try:
            return await op(client)
        except MCPError as exc:
            if exc.error.code not in (types.CONNECTION_CLOSED,) and "onnect" not in str(exc):
                raise  # a real answer from the daemon: pass it on
            failure: Exception = exc
        except Exception as exc:  # noqa: BLE001 - transport errors (httpx2, closed streams)
            failure = exc
        self.log.warning("connect_upstream_lost", error=f"{type(failure).__name__}: {failure}", action="reconnect and retry once")
        client = await self.connect(caps, restart=self.generation == generation)
        return await op(client)

    def close(self) -> None:
        for _client, close in list(self.clients.values()):
            close.set()


def _asking_caps(ctx: Any) -> frozenset[str]:
    """What the end client can be asked, to declare upstream for this request.

    ``elicitation`` is form-mode elicitation, ``elicitation.url`` URL mode, ``sampling.tools``
    sampling with tools (the sub-capabilities ``plexor.asking.covers`` checks).
    """
    from plexor.exchange import client_capabilities, declares

    caps = client_capabilities(ctx.session)
    names = {name for name in ("elicitation", "sampling", "roots") if declares(caps, name)}
    elicitation, sampling = caps.get("elicitation"), caps.get("sampling")
    if isinstance(elicitation, dict) and elicitation.get("url") is not None:
        names.add("elicitation.url")
    if "sampling" in names and isinstance(sampling, dict) and sampling.get("tools") is not None:
        names.add("sampling.tools")
    return frozenset(names)


@functools.cache
def _relay_client_class() -> Any:
    from mcp import Client

    class RelayClient(Client):
        """The SDK ``Client``, declaring elicitation upstream exactly as the end client did.

        The SDK declares both form and URL mode whenever there is an elicitation callback; the daemon
        must see which of the two the end client answers (``ctx.can_ask("elicitation.url")``).
        """

        _relayed: frozenset[str] = frozenset()

        def declaring(self, caps: frozenset[str]) -> RelayClient:
            self._relayed = caps
            return self

        async def _build_session(self, exit_stack: Any) -> Any:
            import mcp_types as types

            session = await super()._build_session(exit_stack)
            build, caps = session._build_capabilities, self._relayed
            if not caps & {"elicitation", "elicitation.url"}:
                return session
            elicitation = types.ElicitationCapability(
                form=types.FormElicitationCapability() if "elicitation" in caps else None,
                url=types.UrlElicitationCapability() if "elicitation.url" in caps else None)

            def exact(version: str) -> Any:
                return build(version).model_copy(update={"elicitation": elicitation})

            setattr(session, "_build_capabilities", exact)  # noqa: B010 - replaces the SDK's method on this session
            return session

    return RelayClient


def _RelayClient(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - stands for the class, built on first use
    return _relay_client_class()(*args, **kwargs)


async def _never(context: Any, params: Any) -> Any:
    import mcp_types as types

    return types.ErrorData(code=types.INTERNAL_ERROR, message="plexor connect answers questions through InputRequiredResult")


async def _never_roots(context: Any) -> Any:
    return await _never(context, None)


async def relay_asking(ctx: Any, params: Any, send: Any, *, tool: bool) -> Any:
    """Send ``send(client, input_responses, request_state)`` upstream, resolving questions for old clients.

    A 2026-07-28 client receives the upstream ``InputRequiredResult`` unchanged (after a check that
    it declared what is asked). For an older client the relay asks each question over its own
    stdio session, like the kernel does, and retries upstream with the answers.
    """
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.asking import AskError
    from plexor.errors import PlexorError

    modern = stateless_era(ctx)
    rounds = 0
    try:
        result = await _first_answer(send, params.input_responses, params.request_state)
        while isinstance(result, types.InputRequiredResult):
            wire = {k: r.model_dump(by_alias=True, mode="json", exclude_none=True) for k, r in (result.input_requests or {}).items()}
            if modern:
                _check_answerable(ctx, wire)
                return result
            rounds += 1
            if rounds > MAX_ASK_ROUNDS:
                raise PlexorError(f"the call asked more than {MAX_ASK_ROUNDS} rounds of questions",
                                  "Answer fewer follow-ups, or use a 2026-07-28 client, which drives the rounds itself.")
            result = await send(await _ask_end_client(ctx, wire), result.request_state)
    except AskError as err:
        if modern or not tool:
            raise MCPError(err.rpc_code, err.render(), {**err.data, "guidance": err.guidance}) from None
        return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())], is_error=True)
    except PlexorError as err:
        if not tool:
            raise MCPError(types.INTERNAL_ERROR, err.render()) from None
        return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())], is_error=True)
    return result


async def _first_answer(send: Any, responses: Any, state: Any) -> Any:
    """The daemon's answer to the request as the end client sent it; its refusal for a capability the end
    client lacks becomes the ``AskError`` that ``plexor serve`` would raise."""
    from mcp.shared.exceptions import MCPError

    from plexor.asking import MISSING_REQUIRED_CLIENT_CAPABILITY, AskError

    try:
        return await send(responses, state)
    except MCPError as exc:
        if exc.error.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
            raise
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        raise AskError(exc.error.message.split("\n", 1)[0], str(data.get("guidance") or ""), rpc_code=exc.error.code,
                       data={k: v for k, v in data.items() if k != "guidance"}) from None


def _check_answerable(ctx: Any, wire: dict[str, Any]) -> None:
    """Refuse (``AskError``) questions a 2026-07-28 end client did not declare it can answer."""
    from plexor.asking import question_from_wire
    from plexor.exchange import can_answer, client_capabilities, covers, missing_capability

    caps = client_capabilities(ctx.session)
    for key, request in wire.items():
        if not can_answer(caps, request["method"]):
            raise missing_capability(key, request["method"])
        question = question_from_wire(request)
        if not covers(caps, question):  # URL-mode elicitation, sampling with tools
            raise missing_capability(key, request["method"], question)


async def _ask_end_client(ctx: Any, wire: dict[str, Any]) -> dict[str, Any]:
    """One round of questions asked of an older end client over its own session; its answers, typed for upstream."""
    import mcp_types as types

    from plexor.asking import question_from_wire
    from plexor.exchange import Exchange, client_capabilities

    exchange = Exchange(capabilities=lambda: client_capabilities(ctx.session), session=ctx.session,
                        request_id=ctx.request_id)
    answers = await exchange.ask({k: question_from_wire(r) for k, r in wire.items()})
    return {k: _typed_answer(types, v) for k, v in answers.items()}


def _typed_answer(types: Any, answer: dict[str, Any]) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(types.InputResponse).validate_python(answer)


async def run_connect(environ: dict[str, str] | None = None, *, profile: str | None = None) -> None:
    """Serve MCP on stdin/stdout, relaying every request to the shared daemon (as tool ``profile``, if given)."""
    import anyio
    from mcp.server.lowlevel import NotificationOptions, Server

    from plexor.log import get_logger
    from plexor.serving.stdio import stdio_streams

    env = dict(os.environ if environ is None else environ)
    log = get_logger("plexor.connect")
    up = _Upstream(env, log, profile)
    up._lock = anyio.Lock()
    server: Server[Any] = Server(
        "plexor", version=__version__, title="Plexor (shared daemon)",
        instructions="Relays to the shared Plexor daemon. Call plexor_health to see which process answers.",
        **_relay_handlers(up),
    )
    async with anyio.create_task_group() as tg:
        up._tg = tg
        await up.connect()  # start (or find) the daemon before answering the handshake
        async with stdio_streams(log) as (read_stream, write_stream):
            await server.run(read_stream, write_stream,
                             server.create_initialization_options(NotificationOptions(tools_changed=True)))
        up.close()
        tg.cancel_scope.cancel()


def _relay_handlers(up: _Upstream) -> dict[str, Any]:
    """The relay's request handlers, as the SDK ``Server``'s ``on_*`` arguments: each passes its request upstream."""
    import mcp_types as types

    async def list_tools(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_tools(cursor=params.cursor if params else None))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            with contextlib.suppress(Exception):
                await ctx.session.report_progress(progress, total, message)

        async def send(responses: Any, state: Any) -> Any:
            return await up.request(lambda c: c.session.call_tool(
                params.name, params.arguments, progress_callback=relay_progress, input_responses=responses,
                request_state=state, allow_input_required=True), _asking_caps(ctx))

        return await relay_asking(ctx, params, send, tool=True)

    async def list_resources(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_resources(cursor=params.cursor if params else None))

    async def list_templates(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_resource_templates(cursor=params.cursor if params else None))

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        async def send(responses: Any, state: Any) -> Any:
            return await up.request(lambda c: c.session.read_resource(
                str(params.uri), input_responses=responses, request_state=state, allow_input_required=True),
                _asking_caps(ctx))

        return await relay_asking(ctx, params, send, tool=False)

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_prompts(cursor=params.cursor if params else None))

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        async def send(responses: Any, state: Any) -> Any:
            return await up.request(lambda c: c.session.get_prompt(
                params.name, dict(params.arguments or {}), input_responses=responses, request_state=state,
                allow_input_required=True), _asking_caps(ctx))

        return await relay_asking(ctx, params, send, tool=False)

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> Any:
        return await up.request(lambda c: c.complete(params.ref, {"name": params.argument.name, "value": params.argument.value}))

    return {"on_list_tools": list_tools, "on_call_tool": call_tool, "on_list_resources": list_resources,
            "on_list_resource_templates": list_templates, "on_read_resource": read_resource,
            "on_list_prompts": list_prompts, "on_get_prompt": get_prompt, "on_completion": complete}
