"""The per-call context a tool, resource reader or prompt can ask for.

Declare a parameter annotated ``plexor.Context`` (any name) and the kernel
passes one in; it never appears in the input schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from plexor.config import Settings
    from plexor.kernel import Kernel, PluginRecord

__all__ = ["Context"]


class Context:
    """What a running call may use: its plugin's settings, state and database, and the client channel."""

    def __init__(
        self,
        kernel: Kernel,
        plugin: PluginRecord,
        *,
        request_id: Any = None,
        session: Any = None,
        progress_token: Any = None,
        name: str = "",
        close_sse_stream: Any = None,
    ) -> None:
        self.kernel = kernel
        self.plugin = plugin
        self.request_id = request_id
        self.name = name
        self._session = session
        self._progress_token = progress_token
        self._close_sse_stream = close_sse_stream

    @property
    def settings(self) -> Settings:
        """The plugin's validated settings."""
        assert self.plugin.settings is not None
        return self.plugin.settings

    @property
    def services(self) -> dict[str, Any]:
        """A dict the plugin owns for this kernel: what ``plexor_startup`` opened lives here."""
        return self.plugin.services

    @property
    def database(self) -> Any:
        """The plugin's peewee database (``None`` when it registered no models)."""
        return self.plugin.database

    async def progress(self, current: float, total: float | None = None, message: str | None = None) -> None:
        """Send an MCP progress notification (a no-op when the client asked for none)."""
        if self._session is None:
            return
        report = getattr(self._session, "report_progress", None)
        if report is not None:
            # Scoped to this request by the SDK: a no-op when the client sent no progress token.
            await report(current, total, message)
        elif self._progress_token is not None:
            await self._session.send_progress_notification(
                self._progress_token, current, total, message, related_request_id=self.request_id
            )

    async def close_stream(self) -> bool:
        """Close this call's SSE stream now, on Streamable HTTP with resumability; the client
        reconnects (``Last-Event-ID``) and receives the rest. Useful to free the connection during
        a long call. Returns False (and does nothing) on transports without that ability."""
        if self._close_sse_stream is None:
            return False
        await self._close_sse_stream()
        return True

    async def log(self, level: str, message: str) -> None:
        """Send an MCP logging notification to the client, and log it locally too."""
        self.kernel.log.info("plugin_log", plugin=self.plugin.name, level=level, message=message)
        if self._session is None:
            return
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                await self._session.send_log_message(
                    level, message, logger=f"plexor.{self.plugin.name}", related_request_id=self.request_id
                )
            except Exception:  # noqa: BLE001 - a client that cannot take logs must not fail the call
                self.kernel.log.debug("log_notification_failed", plugin=self.plugin.name)
