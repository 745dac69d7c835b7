"""The ``bus`` built-in plugin: change notifications and resumable event streams shared between processes,
through the kernel's database (:mod:`plexor.features.state.bus`, :mod:`plexor.features.state.events`), on the
server-extension hooks (:mod:`plexor.extending`).

It answers only when other processes may serve the same data (``--workers``, a kernel database on
PostgreSQL, ``PLEXOR_EVENT_STORE=shared``); otherwise the kernel keeps both in this process.
``PLEXOR_DISABLE=bus`` keeps them in this process always (one worker, one host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.extending import ServerSetup
    from plexor.features.state.events import SharedEventStore
    from plexor.notify import Backend


def _database_url(setup: ServerSetup) -> str | None:
    from plexor.features.state.db import database_url

    return database_url(setup.kernel.environ, setup.kernel.config_tables())


@hookimpl
def plexor_notifier_backend(setup: ServerSetup) -> Backend | None:
    """The kernel database's bus when other processes may serve this kernel's data."""
    opts, environ = setup.options, setup.kernel.environ
    shares = (opts is not None and opts.workers > 1 or _database_url(setup) is not None
              or environ.get("PLEXOR_EVENT_STORE", "").strip().lower() == "shared")
    if not shares:
        return None
    from plexor.features.state.bus import shared_backend

    return shared_backend(setup.kernel)


@hookimpl
def plexor_event_store(setup: ServerSetup) -> SharedEventStore | None:
    """Stateful Streamable HTTP's events in the kernel's database, so a stream resumes through any process."""
    from plexor.features.state.events import wants_shared_store

    if not wants_shared_store(setup.kernel.environ, _database_url(setup)):
        return None
    from plexor.features.state.db import kernel_state
    from plexor.features.state.events import SharedEventStore
    from plexor.limits import value

    environ = setup.kernel.environ
    return SharedEventStore(kernel_state(setup.kernel), session_bytes=int(value("event_store_session_bytes", environ)),
                            total_bytes=int(value("event_store_bytes", environ)))
