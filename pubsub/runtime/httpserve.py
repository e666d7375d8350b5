"""An HTTP listener beside a daemon's own port (aiohttp), for the node's HTTP API and the
web view.

A daemon lists the `HttpService`s it wants in `pubsub.runtime.host.Daemon.services`; the
host starts them once the runtime serves and stops them when it stops.  Each service owns
one aiohttp `web.Application`, built by the daemon (its routes read and act on the daemon's
app on the same event loop: no threads, no locks).
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # aiohttp itself is imported by the daemon that serves HTTP (start-up cost)
    from aiohttp import web

log = logging.getLogger(__name__)


class HttpError(Exception):
    """The listener could not be opened (one line for an operator)."""


class HttpService:
    """One aiohttp application served on host:port (see the module docstring)."""

    def __init__(
        self, name: str, app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.name = name
        self.app = app
        self.host = host
        self.port = port
        #: HTTPS with this context (the daemon's: client certificates required), else HTTP.
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        """``http(s)://host:port`` (the port actually bound once started; useful with port 0)."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve; HttpError if the address cannot be bound."""
        from aiohttp import web

        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl_context)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise HttpError(f"{self.name}: cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from None
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("%s listening on %s", self.name, self.address)

    async def stop(self) -> None:
        """Close the listener and every open request (streams included)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
