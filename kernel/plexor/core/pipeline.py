"""One pipeline for every request: tool calls, resource reads, prompts, completions, listings.

Each request goes through the same steps, in this order, written once::

    look up -> readiness gate -> count in flight -> context -> dispatch -> explain errors -> shape

The kinds differ only in how they look up their target and shape the value;
gating, in-flight counting (what ``drain``/``stop`` wait for), the context,
the sync/async rule (:mod:`plexor.core.dispatch`) and error guidance are shared, so
they cannot drift apart.
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar, cast

from plexor.context import Context
from plexor.core.base import KernelBase, Request
from plexor.core.dispatch import Target, dispatch
from plexor.core.guidance import default_guidance, suggest, unknown_tool
from plexor.core.records import PluginRecord, State
from plexor.core.results import Outcome, prompt_messages, resource_contents, tool_outcome
from plexor.core.specs import PromptSpec, ResourceSpec, TemplateSpec, ToolSpec
from plexor.errors import InvalidArgument, NotFound, NotReady, PlexorError
from plexor.hints import Cache, most_cautious

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.session import ServerSession
    from mcp.shared.message import CloseSSEStreamCallback
    from mcp.types import ProgressToken, RequestId

    from plexor.exchange import Exchange, Session

__all__ = ["Pipeline"]
S = TypeVar("S")  # a tool or prompt spec; or, in plexor connect, what the daemon lists of a tool


class Pipeline(KernelBase):
    """Serving requests: the part of :class:`plexor.core.kernel.Kernel` every request goes through."""

    # -- the shared steps ---------------------------------------------------------
    async def run(self, req: Request, plugin: str, t: Target, args: tuple[object, ...] = (),
                  kwargs: dict[str, object] | None = None, *, ready_required: bool = True,
                  arguments: object = None) -> object:
        """Gate, count, build the context, dispatch and explain: the steps every request shares."""
        if self.telemetry is not None:  # off by default; on, plexor.features.telemetry spans and times the request
            return await self.telemetry.observe(self._run, req, plugin, t, args, kwargs, ready_required, arguments)
        return await self._run(req, plugin, t, args, kwargs, ready_required, arguments)

    async def _run(self, req: Request, plugin: str, t: Target, args: tuple[object, ...],
                   kwargs: dict[str, object] | None, ready_required: bool, arguments: object) -> object:
        rec = self.records[plugin]
        await self._gate(rec, ready_required)
        values = {} if kwargs is None else kwargs
        self._inflight += 1
        import anyio  # drain() cancels the scope when the call outlives the grace period: it is answered, not cut off
        self._calls.add(scope := anyio.CancelScope())
        try:
            ctx = Context(self, rec.handle, request_id=req.request_id, session=req.session,
                          progress_token=req.progress_token, name=req.name,
                          close_sse_stream=req.close_sse_stream, exchange=req.exchange)
            if req.chosen:
                ctx.chosen = req.chosen
            for p in t.context_params:
                values[p] = ctx
            with scope:
                return await dispatch(t, args, values, ctx)
            raise NotReady("the server shut down while this call ran: it outlived the grace period and was stopped",
                           "Call it again; a new server process will answer. What it did before it stopped stays done.")
        except PlexorError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes guidance
            if isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], PlexorError):
                raise exc.exceptions[0] from exc  # raised inside the plugin's own task group
            raise self.explain(exc, {"plugin": plugin, req.kind: req.name, "arguments": arguments,
                                     "request_id": req.request_id}) from exc
        finally:
            self._calls.discard(scope)
            self._inflight -= 1
            if self._inflight == 0 and self._idle is not None:
                self._idle.set()  # only drain() creates the event it waits on

    async def _gate(self, rec: PluginRecord, ready_required: bool) -> None:
        if self.state in (State.DRAINING, State.STOPPED):
            raise NotReady("the server is shutting down", "Reconnect in a moment; a new server process will answer.")
        if not _can_serve(rec, ready_required):
            await self.admit(rec, ready_required)

    async def admit(self, rec: PluginRecord, ready_required: bool = True) -> None:
        """Wait while ``rec``'s plugin starts (``start_wait`` at most); its guidance when it cannot serve."""
        if not _can_serve(rec, ready_required) and rec.state == State.STARTING and rec.startup_done is not None:
            import anyio  # only a plugin still starting is waited for

            with anyio.move_on_after(self.start_wait):
                await rec.startup_done.wait()
        if not _can_serve(rec, ready_required):
            raise rec.handle.not_ready()

    def explain(self, exc: BaseException, context: dict[str, object]) -> PlexorError:
        """Turn any exception into guidance: the plugin's own hook first, the kernel default last."""
        if isinstance(exc, PlexorError):
            return exc
        plugin = context.get("plugin")
        request_id = context.get("request_id")
        if request_id is None:
            request_id = context["request_id"] = uuid.uuid4().hex[:12]
        self.log.error("call_failed", request_id=str(request_id), plugin=plugin,
                       where=context.get("tool") or context.get("uri") or context.get("prompt"),
                       traceback="".join(traceback.format_exception(exc)))
        rec = self.records.get(plugin) if isinstance(plugin, str) and plugin else None
        advice = self.plugin_guidance(rec, exc, context) if rec is not None else None
        if isinstance(advice, PlexorError):
            return advice
        if advice:
            message = str(exc).strip() or type(exc).__name__
            return PlexorError(f"{plugin}: {message}", f"{advice.strip()} (request id {request_id})")
        return default_guidance(exc, context)

    # -- tools ----------------------------------------------------------------------
    def find_tool(self, name: str) -> ToolSpec | None:
        """The tool ``name`` names, in any form a client may send (:func:`find_named`), or None."""
        return find_named(self.registry.tools, name, self.separator, lambda s: s.namespace)

    def find_prompt(self, name: str) -> PromptSpec | None:
        """The prompt (``PromptSpec``) ``name`` names, in the same forms as a tool, or None."""
        records = self.records
        return find_named(self.registry.prompts, name, self.separator,
                          lambda s: records[s.plugin].namespace if s.plugin in records else "")

    def resource_plugin(self, uri: str) -> str | None:
        """The plugin that serves ``uri`` (its resource or template, else its scheme's owner), or None."""
        try:
            spec, _ = self._find_resource(uri)
        except PlexorError:
            scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
            return self.registry.schemes.get(scheme)
        return spec.plugin

    def resolve_tool(self, name: str) -> ToolSpec:
        spec = self.find_tool(name)
        if spec is None:
            unavailable: dict[str, tuple[str, str]] = {}
            for r in self.records.values():
                if r.state in (State.FAILED, State.DISABLED):
                    # A disabled plugin was never imported, so only its name hints at its namespace.
                    ns = r.namespace or getattr(r.module, "PLEXOR_NAMESPACE", None) or r.name.replace("-", "_")
                    unavailable[ns] = (r.name, r.state.value)
            raise unknown_tool(name, self.registry.tools, self.registry.namespaces, unavailable, self.separator)
        if spec.withdrawn:
            raise NotReady(f"the tool {spec.name!r} is not offered right now ({spec.plugin} withdrew it)",
                           "List the tools again (tools/list) and call one that is listed; it may come back later.")
        return spec

    async def call_tool(self, name: str, arguments: Mapping[str, object] | None = None, *,
                        session: ServerSession | Session | None = None, request_id: RequestId | None = None,
                        progress_token: ProgressToken | None = None, close_sse_stream: CloseSSEStreamCallback | None = None,
                        exchange: Exchange | None = None) -> Outcome:
        """Run a tool and return its :class:`Outcome`; failures become error outcomes, never exceptions.

        Two exceptions escape on purpose, for the server to answer: :class:`plexor.asking.InputRequired`
        (the tool asked the client something; 2026-07-28 clients get an ``InputRequiredResult``) and,
        on 2026-07-28 exchanges, :class:`plexor.asking.AskError` (a JSON-RPC error by the spec).
        """
        spec: ToolSpec | None = None
        req: Request | None = None  # set once the call is past lookup, gate and validation
        try:
            spec = self.resolve_tool(name)
            await self._gate(self.records[spec.plugin], spec.ready_required)  # not-ready wins over bad arguments
            if arguments is not None and not isinstance(arguments, dict):
                raise InvalidArgument("arguments must be a JSON object", "Pass named arguments, e.g. {\"key\": \"value\"}.")
            values = spec.signature.validate(arguments)
            req = Request("tool", spec.name, session, request_id, progress_token, close_sse_stream, exchange)
            value = await self.run(req, spec.plugin, spec.target, (), values, ready_required=spec.ready_required,
                                   arguments=arguments)
            return tool_outcome(spec, value)
        except PlexorError as exc:
            if _escapes(exc, exchange):
                raise
            if req is None and self.telemetry is not None:  # refused before the pipeline: counted all the same
                self.telemetry.refused(Request("tool", spec.name if spec else name, session, request_id),
                                       spec.plugin if spec else None, exc)
            return self._error_outcome(exc, spec, name, arguments, request_id)
        except Exception as exc:  # noqa: BLE001 - a failure while shaping the result
            return self._error_outcome(exc, spec, name, arguments, request_id)
        except BaseExceptionGroup as group:  # asked inside a plugin's task group
            if _escapes(group, exchange):
                raise
            return self._error_outcome(group, spec, name, arguments, request_id)

    def _error_outcome(self, exc: BaseException, spec: ToolSpec | None, name: str, arguments: object,
                       request_id: RequestId | None) -> Outcome:
        err = self.explain(exc, {"plugin": spec.plugin if spec else None, "tool": spec.name if spec else name,
                                 "arguments": arguments,
                                 "request_id": uuid.uuid4().hex[:12] if request_id is None else request_id})
        meta: dict[str, object] = {"plexor/provenance": spec.provenance if spec else "plexor/kernel"}
        if spec:
            meta["plexor/schemaHash"] = spec.schema_hash
        return Outcome({"error": err.payload()}, err.render(), True, meta, err)

    # -- resources --------------------------------------------------------------------
    def _find_resource(self, uri: str) -> tuple[ResourceSpec | TemplateSpec, dict[str, object]]:
        spec = self.registry.resources.get(uri)
        if spec is not None:
            return spec, {}
        for tmpl in self.registry.templates.values():
            match = tmpl.matcher.match(uri)
            if match is not None:
                return tmpl, dict(match)
        scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
        owner = self.registry.schemes.get(scheme)
        if owner:
            forms = sorted([t for t, s in self.registry.templates.items() if s.plugin == owner]
                           + [u for u, s in self.registry.resources.items() if s.plugin == owner])
            raise NotFound(f"no resource matches {uri!r}", f"{owner} serves: {', '.join(forms)}.")
        schemes = ", ".join(f"{s}://" for s in sorted(self.registry.schemes)) or "none"
        raise NotFound(f"no resource matches {uri!r} (unknown scheme {scheme!r})",
                       f"Known schemes: {schemes}. Call resources/list or resources/templates/list.")

    async def read_resource(self, uri: str, *, session: ServerSession | None = None, request_id: RequestId | None = None,
                            exchange: Exchange | None = None) -> list[dict[str, str]]:
        """Read ``uri``; returns ``[{"uri", "mime_type", "text"|"blob"}]``. Raises :class:`PlexorError` subclasses."""
        spec, variables = self._find_resource(uri)
        req = Request("uri", uri, session, request_id, exchange=exchange)
        value = await self.run(req, spec.plugin, spec.target, (), variables, ready_required=spec.ready_required)
        return resource_contents(uri, spec.mime_type, value)

    def resource_cache(self, uri: str) -> Cache | None:
        """The :class:`plexor.Cache` declared for ``uri``'s resource or template, or None."""
        try:
            spec, _ = self._find_resource(uri)
        except PlexorError:
            return None
        return spec.cache

    async def list_resources(self) -> list[dict[str, object]]:
        """Fixed resources plus what each ready plugin's lister says exists now (a failing lister is logged).

        Each item also names its ``plugin`` and its ``cache`` hint (:class:`plexor.Cache` or None).
        """
        out: list[dict[str, object]] = [
            {"uri": s.uri, "name": s.name, "description": s.description, "mime_type": s.mime_type, "plugin": s.plugin,
             "icons": s.icons, "cache": s.cache, "meta": s.meta}
            for s in self.registry.resources.values() if self.records[s.plugin].state in (State.READY, State.STARTING)]
        for plugin, lister in list(self.registry.listers):
            if self.records[plugin].state != State.READY:
                continue
            try:
                listed = await _materialise(await self.run(Request("listing", "resources/list"), plugin, lister))
                items = cast("list[Mapping[str, object]]", listed)  # a lister returns dicts
                cache = _lister_cache(self.registry.lister_cache.get(plugin, [None]))
                out.extend({"mime_type": "application/json", **item, "plugin": plugin, "cache": cache} for item in items)
            except PlexorError as exc:
                self.log.error("resource_lister_failed", plugin=plugin, error=exc.message)
        return out

    # -- prompts and completion -----------------------------------------------------------
    async def get_prompt(self, name: str, arguments: dict[str, object] | None = None, *,
                         session: ServerSession | None = None, request_id: RequestId | None = None,
                         exchange: Exchange | None = None) -> tuple[str, list[dict[str, object]]]:
        """Render a prompt: ``(description, [{"role", "text"}])``."""
        spec = self.find_prompt(name)
        if spec is None:
            near = suggest(name, self.registry.prompts)
            raise NotFound(f"unknown prompt {name!r}", ("Did you mean " + " or ".join(map(repr, near)) + "? " if near else "")
                           + f"Prompts: {', '.join(sorted(self.registry.prompts)) or 'none'}.")
        if spec.withdrawn:
            raise NotFound(f"the prompt {spec.name!r} is not offered right now ({spec.plugin} withdrew it)",
                           "List the prompts again (prompts/list) and use one that is listed.")
        await self._gate(self.records[spec.plugin], True)
        values = spec.signature.validate(arguments)
        req = Request("prompt", spec.name, session, request_id, exchange=exchange)
        value = await self.run(req, spec.plugin, spec.target, (), values, arguments=arguments)
        return spec.description, prompt_messages(value)

    async def complete(self, ref_uri: str, argument: str, value: str,
                       chosen: dict[str, str] | None = None) -> tuple[list[str], bool]:
        """Completions for a template variable (``completion/complete``): ``(values, has_more)``.

        At most 100 values are returned; ``has_more`` says the function offered more. ``chosen``
        (the request's ``context.arguments``) reaches the function as ``ctx.chosen``.
        """
        tmpl = self.registry.templates.get(ref_uri)
        if tmpl is None or argument not in tmpl.complete:
            return [], False
        req = Request("completion", f"{ref_uri}#{argument}", chosen=dict(chosen) if chosen else None)
        result = await self.run(req, tmpl.plugin, tmpl.complete[argument], (value,),
                                ready_required=tmpl.ready_required)
        values = [str(v) for v in (await _materialise(result))[:101]]
        return values[:100], len(values) > 100


def _lister_cache(hints: list[Cache | None]) -> Cache | None:
    return None if any(h is None for h in hints) else most_cautious(hints)


def _can_serve(rec: PluginRecord, ready_required: bool) -> bool:
    """Ready, or started (its startup hook finished) and warming up, for a target that answers while warming."""
    return rec.state == State.READY or (rec.state == State.STARTING and not ready_required and rec.started())


async def _materialise(items: object) -> list[object]:
    """A list from what a lister or completion function returned; a sync generator is drained in a thread."""
    if isinstance(items, list):
        return items
    import anyio

    return await anyio.to_thread.run_sync(list, cast("Iterable[object]", items))  # a lister returns an iterable


def _escapes(exc: BaseException, exchange: Exchange | None) -> bool:
    """Whether ``exc`` must leave call_tool for the server to answer (see its docstring)."""
    from plexor.asking import AskError

    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:  # asked inside a task group
        exc = exc.exceptions[0]
    if type(exc).__name__ == "InputRequired":
        return True
    return isinstance(exc, AskError) and exchange is not None and exchange.modern


def find_named(table: Mapping[str, S], name: str, separator: str, namespace: Callable[[S], str]) -> S | None:
    """The one name resolution of tools and prompts, used by the kernel, by authorization and by plexor connect.

    ``table`` maps full names to entries. ``name`` is the full name (``tree_render``), the dotted form
    (``tree.render``), or the bare method (``render``) when exactly one plugin has it. Authorization decides on
    what this returns, so a form the kernel accepts can never escape a check made on another form.
    """
    spec = table.get(name)
    if spec is None and "." in name:
        spec = table.get(name.replace(".", separator, 1))
    if spec is None:  # the method alone, when exactly one plugin has it
        found = [s for full, s in table.items() if full == f"{namespace(s)}{separator}{name}"]
        spec = found[0] if len(found) == 1 else None
    return spec
