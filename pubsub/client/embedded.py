"""A node inside the application's own process: the subscriber of the skip ring, embedded.

In the skip ring the subscribers themselves carry the publications (paper 000, §1).  A node
daemon (``pubsub node``) and an application reading its stream over TCP (`Client`) make two
processes per subscriber, and every publication crosses a socket, wakes a second process and
is encoded and decoded once more on its way to the application.  `EmbeddedNode` runs the
same node -- the same core, store, runtime, peer listener and supervisor protocol, built by
`pubsub.node.app.serve_node` -- on the application's event loop, and hands out `Client`
objects whose requests, acknowledgements and deliveries pass in memory
(`pubsub.runtime.local.QueuedSession`), as message objects::

    async with EmbeddedNode("127.0.0.1:7101", "127.0.0.1:7000", data_dir="node-a") as node:
        client = node.client()
        async with client.subscribe("news", new_only=True) as sub:   # joins the topic's ring
            await sub.consume(print)

Everything `Client` promises holds unchanged, because the node serves an in-process client
through the entry points a TCP client's requests reach (`Runtime.serve_request`, the
streams of `pubsub.node.delivery`): acknowledgements after the commit, de-duplication by
message id, exactly-once gap-free streams with cursors, backpressure (a reader that falls
behind holds the node's stream, never loses deliveries).  An in-process client is the
node's own application: the publish quotas and the TLS permissions that guard the port from
other processes do not apply to it.

The node also serves its port like a daemon: its peers, and other clients over TCP
(``Client("127.0.0.1:7101")``, ``pubsub status --node 127.0.0.1:7101``).  Settings come from
the same ``PUBSUB_*`` environment variables as the daemon's unless given (`NodeSettings`,
`RuntimeSettings`, `TelemetrySettings`: the metrics endpoint and the event stream too), and
are checked as the daemon's command checks them (`pubsub.runtime.tls.check_daemon`: in a TLS
cluster the node presents its own node certificate, which must name its address).

What it leaves to the application: the process's signals (stop the node with `stop` or by
leaving the ``async with``), and its garbage collector unless ``tune_gc=True`` (what the
daemons do, `pubsub.runtime.host.tune_gc`: fewer collections, and everything the process
holds at start frozen).  `stop` lets every stream's reader take what was already handed
to it, then ends it (`ConnectionLost`; resume from the subscription's cursor); publications
still unacknowledged when it stops fail as with a daemon that stops (``unknown``: safe to
publish again with the same message id).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from pubsub.client.connection import Channel, ClientError
from pubsub.client.library import Client
from pubsub.kernel import wire
from pubsub.kernel.message import Message, Ref
from pubsub.node.app import NodeApp, serve_node
from pubsub.node.settings import NodeSettings
from pubsub.runtime.connection import split_ref
from pubsub.runtime.local import QueuedSession
from pubsub.runtime.net import Runtime
from pubsub.runtime.settings import RuntimeSettings, SettingsError, TelemetrySettings, load
from pubsub.runtime.tls import TlsError, check_daemon

log = logging.getLogger(__name__)

#: Seconds `EmbeddedNode.start` waits for the node to serve.
START_TIMEOUT = 30.0
#: The address an in-process client has in the node's logs.
LOCAL_ADDRESS = "in-process"


class EmbeddedError(ClientError):
    """The embedded node could not start (``start_failed``, ``bad_address``,
    ``bad_settings``, ``timeout``) or is not running (``not_running``)."""


class _LocalChannel:
    """A `pubsub.client.connection.Channel` to a node in this process: a `QueuedSession`
    the node writes to, requests handed to the runtime on the next loop pass."""

    def __init__(self, runtime: Runtime, sessions: set[QueuedSession]) -> None:
        self._runtime = runtime
        self._loop = asyncio.get_running_loop()
        session = self._session = QueuedSession(LOCAL_ADDRESS)
        sessions.add(session)
        session.on_close(lambda: sessions.discard(session))

    @property
    def closing(self) -> bool:
        return self._session.closed

    def send(self, msg: Message) -> None:
        self._loop.call_soon(self._serve, msg)

    def _serve(self, msg: Message) -> None:
        session = self._session
        if not session.closed:
            runtime = self._runtime
            runtime.serve_request(msg, session, session.send, runtime.now())

    def take_message(self) -> Message | None:
        msg = self._session.take()
        if msg is None and self._session.ended:
            raise asyncio.IncompleteReadError(b"", None)
        return msg

    def on_ready(self, callback: Callable[[], None] | None) -> None:
        self._session.on_ready(callback)

    async def read(self) -> Message:
        msg = await self._session.next()
        if msg is None:
            raise asyncio.IncompleteReadError(b"", None)
        return msg

    def buffered(self) -> int:
        return 0

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        self._session.close()


class _InProcess:
    """The `pubsub.client.connection.Connector` of an embedded node's clients."""

    def __init__(self, node: EmbeddedNode, timeout: float) -> None:
        self._node = node
        self._timeout = timeout

    async def open(self) -> Channel:
        return _LocalChannel(self._node.runtime, self._node.sessions)

    async def request(self, msg: Message) -> Message:
        try:
            channel = await self.open()
        except EmbeddedError as exc:
            raise ClientError("connection", str(exc)) from None
        try:
            channel.send(msg)
            async with asyncio.timeout(self._timeout):
                return await channel.read()
        except TimeoutError:
            raise ClientError("connection", f"{self._node.ref} did not answer within {self._timeout:g} s") from None
        except asyncio.IncompleteReadError:
            raise ClientError("connection", f"{self._node.ref} stopped before it answered") from None
        finally:
            await channel.close()


class EmbeddedNode:
    """A node on this process's event loop (see the module docstring): ``async with
    EmbeddedNode(listen, supervisor) as node``, or `start` and `stop`.

    `listen` is the node's own address (peers and TCP clients reach it there), `supervisor`
    its supervisor's; `data_dir` keeps its topics and publications across restarts (without
    it, everything is in memory).  `settings`, `runtime_settings` and `telemetry` default to
    what the ``PUBSUB_*`` environment says, as for the daemon.
    """

    def __init__(
        self,
        listen: str,
        supervisor: str,
        *,
        data_dir: str | Path | None = None,
        settings: NodeSettings | None = None,
        runtime_settings: RuntimeSettings | None = None,
        telemetry: TelemetrySettings | None = None,
        tune_gc: bool = False,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        for name, ref in (("listen", listen), ("supervisor", supervisor)):
            try:
                split_ref(ref)
            except wire.WireError:
                raise EmbeddedError("bad_address", f"bad {name} address {ref!r}: expected HOST:PORT") from None
        if settings is not None and data_dir is not None:
            raise EmbeddedError("bad_settings", "give data_dir or settings (with its data_dir), not both")
        try:
            self.settings = settings or load(NodeSettings, data_dir=data_dir)
            self.runtime_settings = runtime_settings or load(RuntimeSettings)
            self.telemetry = telemetry or load(TelemetrySettings)
        except SettingsError as exc:
            raise EmbeddedError("bad_settings", str(exc)) from None
        try:  # what the daemon's command checks: the address, the TLS files, the certificate
            check_daemon(self.runtime_settings, listen, "node")
        except TlsError as exc:
            raise EmbeddedError("bad_settings", str(exc)) from None
        self.ref = Ref(listen)
        self.supervisor = Ref(supervisor)
        self.tune_gc = tune_gc
        self.start_timeout = start_timeout
        #: The node's application once it serves (`pubsub.node.app.NodeApp`).
        self.app: NodeApp | None = None
        #: Every open in-process session (ended by `stop`).
        self.sessions: set[QueuedSession] = set()
        self._task: asyncio.Task[None] | None = None
        self._until = asyncio.Event()

    @property
    def running(self) -> bool:
        return self.app is not None and self._task is not None and not self._task.done()

    @property
    def runtime(self) -> Runtime:
        """The node's runtime; EmbeddedError ``not_running`` unless it serves."""
        if not self.running or self.app is None or self.app.runtime is None:
            raise EmbeddedError("not_running", f"the embedded node {self.ref} is not running")
        return self.app.runtime

    def client(self, **options: Any) -> Client:
        """A `Client` of this node that talks to it in memory (`Client`'s keyword options,
        but no connector, may be given)."""
        if "connector" in options:
            raise TypeError("an embedded node's client talks to it in memory: no connector may be given")
        client = Client(self.ref, **options)
        client.connector = _InProcess(self, client.timeout)
        return client

    async def start(self) -> EmbeddedNode:
        """Start the node and return once it serves; EmbeddedError ``start_failed`` (with
        the node's own one-line reason: the address is taken, the data directory is held by
        another process, ...) or ``timeout``.  A stopped node may be started again (on its
        data directory it resumes where it stopped)."""
        if self._task is not None and not self._task.done():
            raise EmbeddedError("start_failed", f"the embedded node {self.ref} is running already")
        self._until = asyncio.Event()
        serving: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_serving(app: NodeApp) -> None:
            self.app = app
            if not serving.done():
                serving.set_result(None)

        self._task = asyncio.create_task(
            serve_node(
                self.ref, self.supervisor, self.runtime_settings, self.settings, self.telemetry, None,
                until=self._until, on_serving=on_serving, tune_gc=self.tune_gc,
            ),
            name=f"embedded node {self.ref}",
        )
        self._task.add_done_callback(self._ended)
        done, _ = await asyncio.wait({serving, self._task}, timeout=self.start_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if serving in done:
            return self
        if self._task in done:
            exc = self._task.exception()
            raise EmbeddedError("start_failed", f"the embedded node {self.ref} did not start: {exc}") from exc
        await self.stop()
        raise EmbeddedError("timeout", f"the embedded node {self.ref} did not start within {self.start_timeout:g} s")

    async def stop(self) -> None:
        """Stop the node gracefully (the last commit, acknowledgements, its peers told by
        its connections' end), then end its in-process sessions; idempotent."""
        task = self._task
        if task is None:
            return
        self._until.set()
        with contextlib.suppress(Exception):
            await task

    def _ended(self, task: asyncio.Task[None]) -> None:
        """The node stopped (or failed): end every in-process session from the node's side."""
        served, self.app = self.app is not None, None
        if served and not task.cancelled() and task.exception() is not None:
            log.error("the embedded node %s failed: %s", self.ref, task.exception())
        for session in list(self.sessions):
            session.finish()

    async def __aenter__(self) -> EmbeddedNode:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


__all__ = ["EmbeddedError", "EmbeddedNode"]
