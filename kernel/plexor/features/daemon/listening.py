"""A 2026-07-28 end client's ``subscriptions/listen`` through ``plexor connect``: one stream upstream per stream.

The relay opens the same listen stream on the daemon (the same filter), so the daemon decides it as for its own
client (every URI of ``resourceSubscriptions``, ``--profile`` and the limits included) and its refusal comes back
unchanged. Its acknowledgement (what it honored) and each change event are sent on, stamped with the end client's
subscription id; when the daemon ends the stream gracefully (it drains), the relay's ends so too. A stream lost
with the daemon is answered with an error, which the end client's SDK reports as lost: it listens again, and the
relay, on its next request, finds (or restarts) the daemon. ``taskIds`` (the tasks extension's status
notifications) are not passed on: the acknowledgement leaves them out, as a server does for what it does not honor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, event_to_notification

from plexor.features.daemon.process import DaemonError
from plexor.features.daemon.upstream import lost

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.client.subscriptions import Subscription

    from plexor.features.daemon.upstream import Upstream

__all__ = ["relay_listen"]

Ctx = ServerRequestContext

LOST = "the Plexor daemon stopped, and this stream with it: listen again (plexor connect starts it again)"


async def relay_listen(up: Upstream, ctx: Ctx,
                       params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
    """Serve one ``subscriptions/listen`` of a 2026-07-28 end client from the same stream on the daemon."""
    from mcp.client.subscriptions import SubscriptionLost

    subscription_id = ctx.request_id
    if subscription_id is None:
        raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
    meta: dict[str, object] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
    wanted = params.notifications
    for attempt in (1, 2):
        generation, acknowledged = up.generation, False
        try:
            client = await up.connect()
            async with client.listen(
                    tools_list_changed=bool(wanted.tools_list_changed),
                    prompts_list_changed=bool(wanted.prompts_list_changed),
                    resources_list_changed=bool(wanted.resources_list_changed),
                    resource_subscriptions=list(wanted.resource_subscriptions or ())) as stream:
                acknowledged = True
                await _pass_on(ctx, stream, meta)
            return types.SubscriptionsListenResult(_meta=meta)
        except MCPError as exc:
            if not lost(exc) or acknowledged or attempt == 2:
                raise  # the daemon's own answer (a refusal), as it gave it
        except (SubscriptionLost, DaemonError, OSError, TimeoutError) as exc:
            up.log.debug("connect_listen_lost", error=f"{type(exc).__name__}: {exc}", acknowledged=acknowledged)
            if acknowledged or attempt == 2:
                raise MCPError(types.INTERNAL_ERROR, LOST if acknowledged else f"{LOST}: {exc}") from None
        # not opened because the daemon is gone: find (or restart) it, once, as for any request
        await up.connect(restart=up.generation == generation)
    raise MCPError(types.INTERNAL_ERROR, LOST)  # pragma: no cover - the loop returns or raises


async def _pass_on(ctx: Ctx, stream: Subscription, meta: dict[str, object]) -> None:
    """The daemon's acknowledgement, then each of its events, to the end client, stamped with its subscription id."""
    await ctx.session.send_notification(types.SubscriptionsAcknowledgedNotification(
        params=types.SubscriptionsAcknowledgedNotificationParams(notifications=stream.honored, _meta=meta)),
        related_request_id=ctx.request_id)
    async for event in stream:
        await ctx.session.send_notification(event_to_notification(event, meta), related_request_id=ctx.request_id)
