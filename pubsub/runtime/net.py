"""The network runtime: drives a protocol core over real TCP, on asyncio (uvloop in the daemons).

The core (`Application`) never sees a socket.  `Runtime` holds the runtime's life cycle --
the listener, the connections, the links, the timers, sending -- and hands each
connection's input to `pubsub.runtime.inbound` and the checks a connection or message must
pass to `pubsub.runtime.admission`.  The runtime

* listens on the application's reference ``host:port`` (and binds nothing else);
* keeps **one persistent TCP connection per peer pair**, used in both directions.  The side
  that connects first sends ``Hello(ref=<its listen ref>, role="peer")``; the accepting side
  adopts that connection as its link to that ref for sending too.  The outgoing side --
  per-peer queues, writers, connects with backoff, retiring the extra connection of a
  simultaneous connect, rate limits -- is `pubsub.runtime.links`; a peer that cannot be
  reached is reported once with ``app.peer_unreachable(ref)``;
* delivers messages the core sends to its own ref locally, without TCP;
* serves clients (``Hello(ref=None, role="client")``): each control request on such a
  connection is answered by ``app.control`` on the same connection.  An application that
  also has ``session_request`` sees each request first, with a `ClientSession` for the
  connection: it may take the request (return a list of sends, possibly empty) and answer
  later, once or many times (acknowledgements after a disk write, a stream of deliveries),
  or leave it to ``control`` (return None).  A session that carries a stream
  (``session.streaming``) accepts no further requests.  A client in the node's own process
  (`pubsub.client.embedded`) is served the same way, without a socket (`serve_request`,
  with a `pubsub.runtime.local.QueuedSession`);
* with TLS (`RuntimeSettings.tls_ca` ...; `pubsub.runtime.tls`), accepts only connections
  presenting a certificate of the cluster CA, refuses (``identity_mismatch``, counted,
  closed) a Hello whose claim the certificate does not back (`pubsub.runtime.identity`),
  and hands each peer message to the application's optional ``admits(msg, identity)``
  first (``forbidden_sender`` when it objects); without TLS it refuses to listen on an
  address that is not loopback unless ``insecure`` is set.  These checks, the connection
  caps, the clients' permissions and publish quotas are the admission gate
  (`pubsub.runtime.admission`);
* calls ``app.timeout`` every ``timeout_interval`` seconds (+- ``timer_jitter``), and closes
  the connections past a deadline (`pubsub.runtime.limits.overdue`);
* takes each connection's chunks as they arrive, without a reader task
  (`pubsub.runtime.receiving`), and cuts them into frames with the sans-I/O
  `pubsub.kernel.framing.FrameDecoder` (`pubsub.runtime.inbound`);
* survives bad input: an over-long length prefix is refused before the body is read
  (counted, answered with ErrorReply, connection closed), a frame cut short by EOF is
  counted and the connection closed, an undecodable frame is counted by its `WireError`
  code, answered with ErrorReply and the connection kept (`pubsub.runtime.inbound`); an
  exception raised by the core is caught and counted as ``handler_error``.  Log lines about
  bad input are rate-limited per (peer, code), never one per frame;
* counts everything in `Stats`, which daemons put in their status replies;
* never acts on an operator request (a message class with ``admin_only``, `pubsub.runtime.admin`)
  arriving here: it is counted and answered as ``forbidden`` (those are served only on the
  daemon's separate admin listener), and applies the network faults an operator injected
  there (`NetworkFaults`: dropped fractions, partitions).

The client side (one control request, one reply) is `pubsub.runtime.client.request`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply
from pubsub.kernel.message import Message, Ref, Send
from pubsub.runtime.admission import Admission
from pubsub.runtime.application import Application
from pubsub.runtime.bundling import bundle
from pubsub.runtime.connection import ClientSession, Connection, split_ref
from pubsub.runtime.faults import NetworkFaults
from pubsub.runtime.identity import DAEMON_ROLES
from pubsub.runtime.inbound import Inbound
from pubsub.runtime.limits import HELLO_DEADLINE, enable_keepalive, overdue, sweep_period
from pubsub.runtime.links import Links
from pubsub.runtime.receiving import serve
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.stats import LogLimiter, Stats
from pubsub.runtime.tls import check_listen, check_own, server_context
from pubsub.runtime.tlscount import count_handshakes

log = logging.getLogger(__name__)

__all__ = ["Application", "ClientSession", "Runtime", "Stats"]


class Runtime:
    """Runs one `Application` on TCP.  Use as ``async with Runtime(app) as rt: ...``.

    `sock`, when given, is an already bound listening socket for the app's ref (tests use it
    to take a free port without a race); otherwise the runtime binds exactly app.ref.
    `role`, when given, is the daemon role its certificate must name (with TLS): "node",
    "supervisor" or "broker"; without it any daemon role at app.ref will do.
    """

    def __init__(
        self,
        app: Application,
        settings: RuntimeSettings | None = None,
        *,
        stats: Stats | None = None,
        sock: socket.socket | None = None,
        rng: random.Random | None = None,
        role: str | None = None,
    ) -> None:
        if role is not None and role not in DAEMON_ROLES:
            raise ValueError(f"a runtime's role is one of {', '.join(DAEMON_ROLES)}, not {role!r}")
        self.app = app
        self.ref: Ref = app.ref
        self.role = role
        self.settings = settings or RuntimeSettings()
        self.stats = stats or Stats()
        self._sock = sock
        self._rng = rng or random.Random()
        self._limiter = LogLimiter(log)
        self._links = Links(
            self.ref,
            self.settings,
            self.stats,
            self._rng,
            self._limiter,
            register=self._register,
            on_unreachable=self._peer_unreachable,
            spawn=self._spawn,
        )
        self._conns: set[Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self._timer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self.faults = NetworkFaults()
        #: TLS on the listening side (None: plain TCP), `pubsub.runtime.tls`.
        self._ssl = server_context(self.settings)
        if self._ssl is not None:
            count_handshakes(self._ssl, self.stats.tls_failures)
        #: The admission gate (`pubsub.runtime.admission`): the connection caps
        #: (`pubsub.runtime.limits`), and with TLS what clients may ask for (the `authority`
        #: of `pubsub.runtime.permissions`; None without).
        self._admission = Admission(
            app, self.ref, self.settings, self.stats, self._limiter, tls=self._ssl is not None
        )
        self.caps = self._admission.caps
        self.authority = self._admission.authority
        #: Every connection's input (`pubsub.runtime.inbound`), and its client sessions.
        self._inbound = Inbound(
            app,
            self.ref,
            self.settings,
            self.stats,
            self._limiter,
            self._admission,
            self._links,
            self.faults,
            now=self.now,
            call=self._call,
            dispatch=self.dispatch,
            serve_request=self.serve_request,
            forget=self._forget,
        )

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen and start the timer."""
        self._loop = asyncio.get_running_loop()
        attach = getattr(self.app, "attach", None)
        if callable(attach):
            attach(self)  # an application that answers later needs the runtime
        host, port = split_ref(self.ref)
        check_listen(self.settings, self.ref)
        check_own(self.settings, self.ref, self.role)
        tls: dict[str, Any] = {}
        if self._ssl is not None:
            tls = {"ssl": self._ssl, "ssl_handshake_timeout": self.settings.hello_timeout}
        if self._sock is not None:
            self._server = await serve(self._accept, sock=self._sock, **tls)
        else:
            self._server = await serve(self._accept, host=host, port=port, **tls)
        self._timer = self._spawn(self._timer_loop(), "timer")
        self._spawn(self._sweep_loop(), "deadlines")
        log.info(
            "%s: listening (at most %d connections, %d per source address)",
            self.ref, self.caps.total, self.caps.per_source,
        )

    async def stop(self) -> None:
        """Stop accepting, stop the timer, flush queued frames (bounded), close everything."""
        if self._stopping or self._loop is None:
            return
        self._stopping = True
        if self._server is not None:
            self._server.close()
        if self._timer is not None:
            self._timer.cancel()
        await self._links.flush(self.settings.flush_timeout)
        # Half-close first and give peers a moment to close their side: closing a socket with
        # unread input would reset the connection and could discard frames just flushed.
        open_conns = [c.finished for c in self._conns if not c.finished.done()]
        for conn in list(self._conns):
            conn.close_write()
        if open_conns:
            await asyncio.wait(open_conns, timeout=min(self.settings.flush_timeout, 1.0))
        for conn in list(self._conns):
            self._forget(conn)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            log.info("%s: stopped", self.ref)

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_until_signal(self, on_start: Callable[[], object] | None = None) -> None:
        """Start, call `on_start`, run until SIGTERM or SIGINT, then stop gracefully."""
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        signals = (signal.SIGTERM, signal.SIGINT)
        for sig in signals:
            loop.add_signal_handler(sig, done.set)
        if self.authority is not None:
            loop.add_signal_handler(signal.SIGHUP, self.reload_permissions)
        try:
            await self.serve_until(done, on_start)
        finally:
            for sig in (*signals, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    async def serve_until(self, done: asyncio.Event, on_start: Callable[[], object] | None = None) -> None:
        """Start, call `on_start`, run until `done` is set, then stop gracefully (a node
        inside an application's process, `pubsub.client.embedded`, stops this way)."""
        try:
            await self.start()
            if on_start is not None:
                on_start()
            await done.wait()
            log.info("%s: shutting down", self.ref)
        finally:
            await self.stop()

    def reload_permissions(self) -> None:
        """Load the permissions file again (SIGHUP); a file that does not load keeps the rules
        in force and is counted as ``permissions_reload_error``."""
        if self.authority is not None and self.authority.reload() is not None:
            self.stats.error("permissions_reload_error")

    # --- introspection -----------------------------------------------------------------------
    def now(self) -> float:
        """The clock handed to the core (monotonic seconds)."""
        assert self._loop is not None
        return self._loop.time()

    def peer_connections(self, ref: Ref) -> int:
        """How many open TCP connections to `ref` this runtime holds."""
        link = self._links.get(ref)
        return 0 if link is None else link.open_connections()

    def queued(self, ref: Ref) -> int:
        """Frames waiting to be written to `ref`."""
        link = self._links.get(ref)
        return 0 if link is None else len(link.queue)

    def link_counters(self, ref: Ref) -> tuple[int, int, int, int]:
        """(queued, enqueued, written, dropped) frames of the link to `ref`, all 0 before
        anything was sent there (`pubsub.runtime.links.Link`)."""
        link = self._links.get(ref)
        if link is None:
            return 0, 0, 0, 0
        return len(link.queue), link.enqueued, link.written, link.dropped

    def enqueued_by_kind(self, ref: Ref) -> dict[str, int]:
        """Frames sent towards `ref` so far (queued for it; some may have been dropped
        since), by message kind."""
        link = self._links.get(ref)
        return {} if link is None else dict(link.enqueued_by_kind)

    def set_rate(self, ref: Ref, rate: float | None) -> None:
        """Let at most `rate` frames per second leave for `ref` (None: no limit); ValueError
        for a rate that is not a positive finite number or a malformed `ref`."""
        try:
            split_ref(ref)
        except wire.WireError as exc:
            raise ValueError(exc.detail) from None
        self._links.set_rate(ref, rate)

    def rate(self, ref: Ref) -> float | None:
        """The rate limit of the link to `ref` (None: none)."""
        link = self._links.get(ref)
        return None if link is None else link.rate

    # --- sending -----------------------------------------------------------------------------
    def dispatch(self, sends: Iterable[Send], *, bundled: bool = False) -> None:
        """Deliver every Send a core returned; with `bundled`, what goes to one peer travels
        in one frame (`pubsub.runtime.bundling`: a Timeout's maintenance round)."""
        try:
            items = list(sends)
        except TypeError:
            self._bad_send(sends)
            return
        if bundled and len(items) > 1:
            valid = [item for item in items if self._valid_send(item)]
            items, inside = bundle(valid, self.ref, self.settings.max_frame_bytes)
            for _, msg in inside:
                self.stats.bundled_out[msg.kind] += 1
        for item in items:
            try:
                dest, msg = item
            except (TypeError, ValueError):
                self._bad_send(item)
                continue
            if not isinstance(msg, Message) or not isinstance(dest, str):
                self._bad_send(item)
                continue
            self.send(dest, msg)

    def _valid_send(self, item: object) -> bool:
        if isinstance(item, Send) and isinstance(item.msg, Message) and isinstance(item.dest, str):
            return True
        self._bad_send(item)
        return False

    def _bad_send(self, item: object) -> None:
        self.stats.error("bad_send")
        self._limiter.log(
            ("bad_send",), logging.ERROR, "%s: core returned a bad Send %r", self.ref, item
        )

    def send(self, dest: Ref, msg: Message) -> None:
        """Queue `msg` for `dest` (delivered locally when dest is our own ref)."""
        if self._stopping:
            self.stats.dropped_sends += 1
            return
        if dest == self.ref:
            self.stats.local_deliveries += 1
            assert self._loop is not None
            self._loop.call_soon(self._deliver_local, msg)
            return
        if self.faults.armed:
            fault = self.faults.outgoing(dest, self.now(), self._rng)
            if fault is not None:
                self.stats.fault_drops[fault] += 1
                return
        link = self._links.get(dest)
        if link is None:
            try:
                split_ref(dest)
            except wire.WireError:
                self.stats.error("bad_destination")
                self.stats.dropped_sends += 1
                self._limiter.log(
                    ("bad_destination",), logging.ERROR, "%s: cannot send to %r", self.ref, dest
                )
                return
            link = self._links.link(dest)
        try:
            frame = wire.encode(msg, self.settings.max_frame_bytes)
        except wire.WireError as exc:
            self.stats.error(exc.code)
            self.stats.dropped_sends += 1
            self._limiter.log(
                ("encode", exc.code),
                logging.ERROR,
                "%s: cannot send %s: %s",
                self.ref,
                msg.kind,
                exc,
            )
            return
        self._links.enqueue(link, msg.kind, frame)

    def _deliver_local(self, msg: Message) -> None:
        if self._stopping:
            return
        self.dispatch(self._call("handle", self.app.handle, msg, self.now()))

    def _peer_unreachable(self, ref: Ref) -> None:
        self.dispatch(self._call("peer_unreachable", self.app.peer_unreachable, ref, self.now()))

    # --- connections -------------------------------------------------------------------------
    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.close()
            return
        conn = Connection(writer, outgoing=False, identity=self._admission.identity(writer))
        self.stats.connections_accepted += 1
        if not self._admission.admit(conn):
            return
        enable_keepalive(writer.get_extra_info("socket"))
        self._register(conn)
        assert self._loop is not None
        self._loop.call_later(self.settings.hello_timeout, self._hello_expired, conn)

    def _register(self, conn: Connection) -> None:
        self._conns.add(conn)
        self.stats.connections_open = len(self._conns)
        self._inbound.attach(conn)

    def _hello_expired(self, conn: Connection) -> None:
        if conn.role is None and not conn.closed and not conn.fatal:
            self.stats.closed[HELLO_DEADLINE] += 1
            self._inbound.bad_input(conn, "no_hello", "no hello within the hello timeout", close=True)

    def _forget(self, conn: Connection) -> None:
        if conn.finished.done():
            return
        conn.finished.set_result(None)
        conn.close()
        self._admission.release(conn)
        self._inbound.release(conn)
        self._conns.discard(conn)
        self.stats.connections_open = len(self._conns)
        self._links.forget(conn)

    # --- client requests ---------------------------------------------------------------------
    def serve_request(
        self, msg: Message, session: ClientSession | None, reply: Callable[[Message], object], now: float
    ) -> None:
        """One client request: the application's ``session_request`` first (with `session`),
        else ``control``, whose reply goes to `reply`; an exception of either is counted and
        answered as ``handler_error``.  A TCP client's requests come here after the
        connection's own checks; an in-process client's (`pubsub.client.embedded`) directly."""
        handler = getattr(self.app, "session_request", None)
        if handler is not None and session is not None:
            try:
                taken = handler(msg, session, now)
            except Exception as exc:  # noqa: BLE001 - the daemon must survive its core
                self._handler_failed("session_request", exc)
                session.send(
                    ErrorReply(code="handler_error", detail=f"{type(exc).__name__}: {exc}"[:200])
                )
                return
            if taken is not None:
                self.dispatch(taken)
                return
        try:
            answer, sends = self.app.control(msg, now)
            if not isinstance(answer, Message):
                raise TypeError(f"control returned {type(answer).__name__} as the reply")
            sends = list(sends)
        except Exception as exc:  # noqa: BLE001 - the daemon must survive its core
            self._handler_failed("control", exc)
            answer = ErrorReply(code="handler_error", detail=f"{type(exc).__name__}: {exc}"[:200])
            sends = []
        reply(answer)
        self.dispatch(sends)

    # --- calling the core --------------------------------------------------------------------
    def _call(self, name: str, fn: Callable[..., list[Send]], *args: Any) -> list[Send]:
        try:
            return fn(*args) or []
        except Exception as exc:  # noqa: BLE001 - the daemon must survive its core
            self._handler_failed(name, exc)
            return []

    def _handler_failed(self, name: str, exc: Exception) -> None:
        self.stats.error("handler_error")
        self._limiter.log(
            ("handler_error", name, type(exc).__name__),
            logging.ERROR,
            "%s: %s raised %s: %s",
            self.ref,
            name,
            type(exc).__name__,
            exc,
            exc_info=True,
        )

    async def _sweep_loop(self) -> None:
        """Close the connections past a deadline (`pubsub.runtime.limits.overdue`).  A sweep
        that ran late (the event loop was busy) closes nothing: the readers get one
        period to take in what arrived meanwhile."""
        period = sweep_period(self.settings, self.settings.hello_timeout)
        last = time.monotonic()
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            late = now - last > 2 * period + 0.25
            last = now
            if late:
                continue
            for conn in list(self._conns):
                if conn.closed or conn.fatal:
                    continue
                session = self._inbound.sessions.get(conn)
                reason = overdue(conn, now, self.settings, session is not None and session.streaming)
                if reason is not None:
                    self._inbound.bad_input(
                        conn, reason, f"closed: {reason.replace('_', ' ')} passed", close=True,
                        tally=self.stats.closed,
                    )

    async def _timer_loop(self) -> None:
        s = self.settings
        while True:
            jitter = self._rng.uniform(-s.timer_jitter, s.timer_jitter)
            await asyncio.sleep(s.timeout_interval * (1 + jitter))
            self.dispatch(self._call("timeout", self.app.timeout, self.now()), bundled=True)

    # --- tasks -------------------------------------------------------------------------------
    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        """Run `coro` as a task of this runtime: failures are counted and logged, and `stop`
        cancels it."""
        return self._spawn(coro, name)

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.ref} {name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.stats.error("runtime_error")
            log.error("%s: task %s failed", self.ref, task.get_name(), exc_info=task.exception())
