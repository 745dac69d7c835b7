"""The ``tasks`` built-in plugin: long-running calls as MCP tasks, in both eras, on the server-extension hooks.

Its request layer sits at ``tasks``, after ``authorization``, so a call the caller may not make never
becomes a task; its methods (``tasks/get``, ``tasks/result``, ``tasks/update``, ``tasks/cancel``,
``tasks/list``) cross the whole request path like any other request. ``PLEXOR_DISABLE=tasks`` serves
no task: the capability, the extension and the methods are gone, and a ``task`` parameter is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp_types import ServerCapabilities

    from plexor.core.base import KernelBase
    from plexor.extending import ProtocolMethod, RequestLayer, ServerSetup
    from plexor.features.tasks.protocol import TaskProtocol


def _protocol(setup: ServerSetup) -> TaskProtocol:
    """The one task protocol of this server, shared by its layer and its methods."""
    from plexor.features.tasks.protocol import TaskProtocol

    proto = setup.shared.get("tasks")
    if not isinstance(proto, TaskProtocol):
        from plexor.core.kernel import Kernel
        from plexor.features.tasks.methods import Served

        kernel, server = setup.kernel, setup.server
        if not isinstance(kernel, Kernel):  # a server serves a whole kernel: tasks run its pipeline
            raise TypeError(f"tasks need a plexor Kernel to run, not {type(kernel).__name__}")
        if not isinstance(server, Served):  # a task's run crosses its request path; results carry its serverInfo
            raise TypeError(f"tasks need a plexor server (its request path and serverInfo), not {type(server).__name__}")
        proto = setup.shared["tasks"] = TaskProtocol(server, kernel)
    return proto


@hookimpl
def plexor_request_layers(setup: ServerSetup) -> list[RequestLayer]:
    from plexor.extending import RequestLayer

    return [RequestLayer("tasks", _protocol(setup).middleware, name="tasks")]


@hookimpl
def plexor_protocol_methods(setup: ServerSetup) -> list[ProtocolMethod]:
    from plexor.extending import ProtocolMethod
    from plexor.features.tasks.wire import TaskParams

    proto = _protocol(setup)
    # no scope: each answers only the task's owner (the caller's principal), so no token reaches another's task
    return [ProtocolMethod(method, TaskParams, handler, scopes=()) for method, handler in (
        ("tasks/get", proto.get), ("tasks/cancel", proto.cancel), ("tasks/update", proto.update),
        ("tasks/result", proto.result), ("tasks/list", proto.list))]


@hookimpl
def plexor_capabilities(capabilities: ServerCapabilities, protocol_version: str | None, setup: ServerSetup) -> None:
    from plexor.features.tasks.wire import TASKS_EXTENSION, advertise

    advertise(capabilities, protocol_version)
    capabilities.extensions = {**(capabilities.extensions or {}), TASKS_EXTENSION: {}}


@hookimpl
async def plexor_drain(kernel: KernelBase) -> None:
    """Hand the tasks still running here over to the other workers (they are settled in the database)."""
    import sys

    runner = sys.modules.get("plexor.features.tasks.runner")
    if runner is None:  # no task ever ran in this process (a CLI command): nothing to settle, nothing to import
        return
    manager = runner.running_tasks(kernel)
    if manager is not None:
        await manager.close()
