"""The network runtime: drives a protocol core over real TCP, on asyncio (uvloop in the daemons).

The core (`Application`) never sees a socket.  The runtime

* listens on the application's reference ``host:port`` (and binds nothing else);
* keeps **one persistent TCP connection per peer pair**, used in both directions.  The side
  that connects first sends ``Hello(ref=<its listen ref>, role="peer")``; the accepting side
  adopts that connection as its link to that ref for sending too;
* resolves simultaneous connects deterministically: of two connections between refs a < b,
  both sides keep the one *initiated by a* (then the newer one).  The other is *retired*
  without losing frames: a side stops writing to it and half-closes it (TCP FIN after
  everything already written), while still reading it to the end; a side that reads the
  FIN retires it too, and the connection is closed once both directions are done.  Frames
  not yet written wait in the per-peer queue and go out on the surviving connection;
* per peer: a bounded queue (oldest frames dropped and counted when full), a writer task,
  connects with exponential backoff and jitter; after ``unreachable_after`` consecutive
  failed connects it calls ``app.peer_unreachable(ref)`` once, drops that queue (counted)
  and stays idle until the next send to that ref;
* delivers messages the core sends to its own ref locally, without TCP;
* serves clients (``Hello(ref=None, role="client")``): each control request on such a
  connection is answered by ``app.control`` on the same connection.  An application that
  also has ``session_request`` sees each request first, with a `ClientSession` for the
  connection: it may take the request (return a list of sends, possibly empty) and answer
  later, once or many times (acknowledgements after a disk write, a stream of deliveries),
  or leave it to ``control`` (return None).  A session that carries a stream
  (``session.streaming``) accepts no further requests;
* calls ``app.timeout`` every ``timeout_interval`` seconds (+- ``timer_jitter``);
* survives bad input: an over-long length prefix is refused before the body is read
  (counted, answered with ErrorReply, connection closed), a frame cut short by EOF is
  counted and the connection closed, an undecodable frame is counted by its `WireError`
  code, answered with ErrorReply and the connection kept; an exception raised by the core is
  caught and counted as ``handler_error``.  Log lines about bad input are rate-limited per
  (peer, code), never one per frame;
* counts everything in `Stats`, which daemons put in their status replies;
* never acts on an operator request (a message class with ``admin_only``, `pubsub.runtime.admin`)
  arriving here: it is counted and answered as ``forbidden`` (those are served only on the
  daemon's separate admin listener), and applies the network faults an operator injected
  there (`NetworkFaults`: dropped fractions, partitions).

`request` is the client side: one control request, one reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import socket
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello
from pubsub.kernel.message import Message, Ref, Send
from pubsub.runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)

#: Seconds a half-closed (retired) connection waits for the peer's FIN before it is closed.
RETIRE_LINGER = 30.0
#: Bytes written to one connection per writer wake-up at most.
WRITE_BATCH_BYTES = 256 * 1024
#: Seconds a connection closed for bad input lingers (half-closed) so the ErrorReply arrives.
ERROR_LINGER = 2.0
#: No ErrorReply is written to a connection whose transport buffer already holds this much.
ERROR_REPLY_BUFFER_LIMIT = 256 * 1024


class Application(Protocol):
    """What the runtime drives: a protocol core plus the daemon's control-plane answers.

    An application may also have ``attach(runtime)``, called when the runtime starts (to
    send or answer later), and ``session_request`` (`SessionApplication`).
    """

    ref: Ref

    def handle(self, msg: Message, now: float) -> list[Send]:
        """A protocol message arrived (from a peer, or from the application itself)."""
        ...

    def timeout(self, now: float) -> list[Send]:
        """The periodic timer fired."""
        ...

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """Connecting to `ref` failed `unreachable_after` times in a row."""
        ...

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        """A client request: the reply for the client, and sends for peers."""
        ...


class SessionApplication(Application, Protocol):
    """An application that may answer client requests later or with a stream."""

    def session_request(
        self, msg: Message, session: ClientSession, now: float
    ) -> list[Send] | None:
        """Take `msg` (return sends; answer through `session` now or later) or decline it
        (return None: `control` answers it)."""
        ...


class Stats:
    """Counters of one runtime; `snapshot` is JSON-able and goes into status replies."""

    def __init__(self) -> None:
        self.frames_in: Counter[str] = Counter()
        self.bytes_in: Counter[str] = Counter()
        self.frames_out: Counter[str] = Counter()
        self.bytes_out: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.dropped_sends = 0
        self.peers_unreachable = 0
        self.local_deliveries = 0
        self.connections_accepted = 0
        self.connections_opened = 0
        self.connections_retired = 0
        self.connections_open = 0
        self.connect_failures = 0
        #: Peer frames discarded by injected faults (`NetworkFaults`), by reason.
        self.fault_drops: Counter[str] = Counter()

    def error(self, code: str) -> None:
        """Count one error of kind `code`."""
        self.errors[code] += 1

    def snapshot(self) -> dict[str, Any]:
        """All counters as plain dicts and ints."""
        return {
            "frames_in": dict(self.frames_in),
            "bytes_in": dict(self.bytes_in),
            "frames_out": dict(self.frames_out),
            "bytes_out": dict(self.bytes_out),
            "errors": dict(self.errors),
            "dropped_sends": self.dropped_sends,
            "peers_unreachable": self.peers_unreachable,
            "local_deliveries": self.local_deliveries,
            "connections_accepted": self.connections_accepted,
            "connections_opened": self.connections_opened,
            "connections_retired": self.connections_retired,
            "connections_open": self.connections_open,
            "connect_failures": self.connect_failures,
            "fault_drops": dict(self.fault_drops),
        }


class NetworkFaults:
    """Network faults injected by an operator (`pubsub.runtime.admin`), each until a deadline on the
    runtime's clock: drop a fraction of the outgoing peer frames, or drop every peer frame
    to or from a reference outside `partition` (this side of a partition).  Frames are
    discarded where the core's sends enter the runtime and where received frames leave it;
    TCP connections stay up, local deliveries and client connections are never touched."""

    def __init__(self) -> None:
        self.drop_fraction = 0.0
        self.drop_until = 0.0
        self.partition: frozenset[Ref] = frozenset()
        self.partition_until = 0.0

    @property
    def armed(self) -> bool:
        """Whether any fault was ever set (the runtime skips every check otherwise)."""
        return bool(self.drop_until or self.partition_until)

    def outgoing(self, dest: Ref, now: float, rng: random.Random) -> str | None:
        """Why a frame to `dest` must be discarded now ("partition", "drop"), or None."""
        if self.partition_until > now and dest not in self.partition:
            return "partition"
        if self.drop_until > now and rng.random() < self.drop_fraction:
            return "drop"
        return None

    def incoming(self, src: Ref, now: float) -> str | None:
        """Why a frame from `src` must be discarded now ("partition"), or None."""
        if self.partition_until > now and src not in self.partition:
            return "partition"
        return None


class LogLimiter:
    """Logs a given key at most once per `period` seconds, reporting how many were held back."""

    MAX_KEYS = 10_000

    def __init__(self, logger: logging.Logger, period: float = 60.0) -> None:
        self._log = logger
        self._period = period
        self._seen: dict[tuple[object, ...], list[float]] = {}  # key -> [last time, held back]

    def log(
        self, key: tuple[object, ...], level: int, msg: str, *args: object, exc_info: bool = False
    ) -> None:
        now = asyncio.get_running_loop().time()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self._period:
            entry[1] += 1
            return
        if len(self._seen) >= self.MAX_KEYS:
            self._seen.clear()
        held = int(entry[1]) if entry else 0
        self._seen[key] = [now, 0]
        if held:
            msg += " (%d similar messages suppressed)"
            args = (*args, held)
        self._log.log(level, msg, *args, exc_info=exc_info)


def split_ref(ref: str) -> tuple[str, int]:
    """("host", port) of a reference "host:port"; WireError("bad_field") if malformed."""
    wire.validate_ref(ref)
    host, _, port = ref.rpartition(":")
    return host, int(port)


class Connection:
    """One TCP connection (peer or client), alive as long as its reader task runs."""

    _next_seq = 0

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, outgoing: bool
    ) -> None:
        Connection._next_seq += 1
        self.seq = Connection._next_seq
        self.reader = reader
        self.writer = writer
        self.outgoing = outgoing
        self.role: str | None = None  # "peer" / "client" once known
        self.peer: Ref | None = None  # the other side's ref (peers only)
        self.initiator: Ref | None = None  # the ref of the side that connected
        self.write_closed = False
        self.closed = False
        self.fatal = False  # bad input: ErrorReply sent, write side closed, discarding input
        self.task: asyncio.Task[None] | None = None
        addr = writer.get_extra_info("peername")
        self.address = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)

    @property
    def label(self) -> str:
        """How logs name the other side."""
        return self.peer or self.address

    @property
    def source(self) -> str:
        """Whom rate-limited logging groups by: the peer's ref, else its IP address (a
        misbehaving client opening many connections still gets one line per code)."""
        return self.peer or self.address.rpartition(":")[0] or self.address

    @property
    def writable(self) -> bool:
        return not self.write_closed and not self.closed and not self.writer.is_closing()

    def write(self, data: bytes) -> bool:
        if not self.writable:
            return False
        self.writer.write(data)
        return True

    def close_write(self) -> None:
        """Half-close: FIN after everything already written; keep reading."""
        if self.write_closed:
            return
        self.write_closed = True
        try:
            if self.writer.can_write_eof():
                self.writer.write_eof()
            else:
                self.writer.close()
        except (OSError, RuntimeError):
            self.writer.close()

    def close(self) -> None:
        self.write_closed = True
        self.closed = True
        self.writer.close()

    def __repr__(self) -> str:
        return f"<Connection #{self.seq} {self.role} {self.label} initiator={self.initiator}>"


class ClientSession:
    """A client's connection as the application sees it: send frames at any time, wait for
    the client to read (backpressure), learn when the connection is gone."""

    def __init__(self, runtime: Runtime, conn: Connection) -> None:
        self._runtime = runtime
        self._conn = conn
        self._callbacks: list[Callable[[], None]] = []
        self._gone = False
        #: Set by the application when the connection carries a stream (no more requests).
        self.streaming = False

    @property
    def address(self) -> str:
        """The client's address (for logs)."""
        return self._conn.address

    @property
    def closed(self) -> bool:
        """True once nothing more can be written to the client."""
        return self._gone or not self._conn.writable

    def send(self, msg: Message) -> bool:
        """Write one frame to the client; False if the connection is gone or `msg` does not
        fit in a frame (counted as an error by its code)."""
        if self.closed:
            return False
        stats = self._runtime.stats
        try:
            frame = wire.encode(msg, self._runtime.settings.max_frame_bytes)
        except wire.WireError as exc:
            stats.error(exc.code)
            return False
        if not self._conn.write(frame):
            return False
        stats.frames_out[msg.kind] += 1
        stats.bytes_out[msg.kind] += len(frame)
        return True

    def buffered(self) -> int:
        """Bytes written to the client and not yet accepted by its socket."""
        if self.closed:
            return 0
        return self._conn.writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        """Wait until the client has read enough of what was sent (returns at once when
        the connection is gone)."""
        if self.closed:
            return
        try:
            await self._conn.writer.drain()
        except (ConnectionError, OSError, RuntimeError):
            pass

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once when the connection is gone (at once if it already is)."""
        if self._gone:
            callback()
        else:
            self._callbacks.append(callback)

    def _closed(self) -> None:
        if self._gone:
            return
        self._gone = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - one bad callback must not stop the others
                log.exception("session close callback failed")


class Link:
    """Everything about one peer ref: queued frames, its connections, the writer task."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        self.queue: deque[tuple[str, bytes]] = deque()
        self.conns: list[Connection] = []
        self.wakeup = asyncio.Event()  # frames queued, or a connection appeared / vanished
        self.conn_added = asyncio.Event()  # ends a reconnect backoff early
        self.task: asyncio.Task[None] | None = None
        self.failures = 0


class Runtime:
    """Runs one `Application` on TCP.  Use as ``async with Runtime(app) as rt: ...``.

    `sock`, when given, is an already bound listening socket for the app's ref (tests use it
    to take a free port without a race); otherwise the runtime binds exactly app.ref.
    """

    def __init__(
        self,
        app: Application,
        settings: RuntimeSettings | None = None,
        *,
        stats: Stats | None = None,
        sock: socket.socket | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.app = app
        self.ref: Ref = app.ref
        self.settings = settings or RuntimeSettings()
        self.stats = stats or Stats()
        self._sock = sock
        self._rng = rng or random.Random()
        self._links: dict[Ref, Link] = {}
        self._conns: set[Connection] = set()
        self._sessions: dict[Connection, ClientSession] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self._timer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._limiter = LogLimiter(log)
        self.faults = NetworkFaults()

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen and start the timer."""
        self._loop = asyncio.get_running_loop()
        attach = getattr(self.app, "attach", None)
        if callable(attach):
            attach(self)  # an application that answers later needs the runtime
        host, port = split_ref(self.ref)
        if self._sock is not None:
            self._server = await asyncio.start_server(self._accept, sock=self._sock)
        else:
            self._server = await asyncio.start_server(self._accept, host=host, port=port)
        self._timer = self._spawn(self._timer_loop(), "timer")
        log.info("%s: listening", self.ref)

    async def stop(self) -> None:
        """Stop accepting, stop the timer, flush queued frames (bounded), close everything."""
        if self._stopping or self._loop is None:
            return
        self._stopping = True
        if self._server is not None:
            self._server.close()
        if self._timer is not None:
            self._timer.cancel()
        writers = [link.task for link in self._links.values() if link.task and not link.task.done()]
        for link in self._links.values():
            link.wakeup.set()
        if writers:
            await asyncio.wait(writers, timeout=self.settings.flush_timeout)
        for link in self._links.values():
            if link.queue:
                self.stats.dropped_sends += len(link.queue)
                link.queue.clear()
        # Half-close first and give peers a moment to close their side: closing a socket with
        # unread input would reset the connection and could discard frames just flushed.
        readers = [c.task for c in self._conns if c.task is not None and not c.task.done()]
        for conn in list(self._conns):
            conn.close_write()
        if readers:
            await asyncio.wait(readers, timeout=min(self.settings.flush_timeout, 1.0))
        for conn in list(self._conns):
            conn.close()
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
        try:
            await self.start()
            if on_start is not None:
                on_start()
            await done.wait()
            log.info("%s: signal received, shutting down", self.ref)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            await self.stop()

    # --- introspection -----------------------------------------------------------------------
    def now(self) -> float:
        """The clock handed to the core (monotonic seconds)."""
        assert self._loop is not None
        return self._loop.time()

    def peer_connections(self, ref: Ref) -> int:
        """How many open TCP connections to `ref` this runtime holds."""
        link = self._links.get(ref)
        return 0 if link is None else sum(1 for c in link.conns if not c.closed)

    def queued(self, ref: Ref) -> int:
        """Frames waiting to be written to `ref`."""
        link = self._links.get(ref)
        return 0 if link is None else len(link.queue)

    # --- sending -----------------------------------------------------------------------------
    def dispatch(self, sends: Iterable[Send]) -> None:
        """Deliver every Send a core returned."""
        try:
            items = list(sends)
        except TypeError:
            self._bad_send(sends)
            return
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
            link = self._links[dest] = Link(dest)
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
        if len(link.queue) >= self.settings.send_queue_bound:
            link.queue.popleft()
            self.stats.dropped_sends += 1
            self._limiter.log(
                ("queue_full", dest),
                logging.WARNING,
                "%s: send queue to %s full, dropping oldest frames",
                self.ref,
                dest,
            )
        link.queue.append((msg.kind, frame))
        if link.task is None or link.task.done():
            link.task = self._spawn(self._link_writer(link), f"writer {dest}")
        link.wakeup.set()

    def _deliver_local(self, msg: Message) -> None:
        if self._stopping:
            return
        self.dispatch(self._call("handle", self.app.handle, msg, self.now()))

    # --- the per-peer writer -----------------------------------------------------------------
    async def _link_writer(self, link: Link) -> None:
        while True:
            if not link.queue:
                if self._stopping:
                    return
                link.wakeup.clear()
                await link.wakeup.wait()
                continue
            conn = self._active(link)
            if conn is None:
                await self._connect(link)
                if self._stopping and self._active(link) is None:
                    return  # stop() counts what is left as dropped
                continue
            parts: list[bytes] = []
            size = 0
            while link.queue and size < WRITE_BATCH_BYTES:
                kind, frame = link.queue.popleft()
                parts.append(frame)
                size += len(frame)
                self.stats.frames_out[kind] += 1
                self.stats.bytes_out[kind] += len(frame)
            conn.write(b"".join(parts))
            try:
                await conn.writer.drain()
            except Exception as exc:  # noqa: BLE001 - any transport failure ends the connection
                log.debug("%s: write to %s failed: %r", self.ref, conn.label, exc)
                conn.close()

    def _preference(self, link: Link, conn: Connection) -> tuple[bool, int]:
        return (conn.initiator == min(self.ref, link.ref), conn.seq)

    def _active(self, link: Link) -> Connection | None:
        usable = [c for c in link.conns if c.writable]
        if not usable:
            return None
        return max(usable, key=lambda c: self._preference(link, c))

    def _adopt(self, link: Link, conn: Connection) -> None:
        """Make `conn` one of the link's connections and retire all but the preferred one."""
        link.conns.append(conn)
        link.failures = 0
        best = self._active(link)
        for other in link.conns:
            if other is not best and other.writable:
                log.debug("%s: retiring %r in favour of %r", self.ref, other, best)
                self.stats.connections_retired += 1
                other.close_write()
                assert self._loop is not None
                self._loop.call_later(RETIRE_LINGER, other.close)
        link.conn_added.set()
        link.wakeup.set()

    async def _connect(self, link: Link) -> None:
        """Connect to link.ref with backoff until a connection exists or the peer is reported."""
        s = self.settings
        while self._active(link) is None:
            host, port = split_ref(link.ref)
            link.conn_added.clear()
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), s.connect_timeout
                )
            except (TimeoutError, OSError) as exc:
                link.failures += 1
                self.stats.connect_failures += 1
                log.debug(
                    "%s: connect to %s failed (%d): %r", self.ref, link.ref, link.failures, exc
                )
                if self._stopping:
                    return
                if link.failures >= s.unreachable_after:
                    link.failures = 0
                    self._report_unreachable(link)
                    return
                base = min(
                    s.reconnect_backoff_max, s.reconnect_backoff_min * 2 ** (link.failures - 1)
                )
                delay = base * self._rng.uniform(0.5, 1.0)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(link.conn_added.wait(), delay)
                continue
            conn = Connection(reader, writer, outgoing=True)
            conn.role = "peer"
            conn.peer = link.ref
            conn.initiator = self.ref
            conn.write(wire.encode(Hello(ref=self.ref, role="peer"), s.max_frame_bytes))
            self.stats.connections_opened += 1
            self._register(conn)
            self._adopt(link, conn)
            log.debug("%s: connected to %s", self.ref, link.ref)

    def _report_unreachable(self, link: Link) -> None:
        dropped = len(link.queue)
        link.queue.clear()
        self.stats.dropped_sends += dropped
        self.stats.peers_unreachable += 1
        self._limiter.log(
            ("unreachable", link.ref),
            logging.WARNING,
            "%s: peer %s unreachable after %d connect attempts; dropped %d queued frames",
            self.ref,
            link.ref,
            self.settings.unreachable_after,
            dropped,
        )
        self.dispatch(
            self._call("peer_unreachable", self.app.peer_unreachable, link.ref, self.now())
        )

    # --- connections and the reader ----------------------------------------------------------
    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.close()
            return
        conn = Connection(reader, writer, outgoing=False)
        self.stats.connections_accepted += 1
        self._register(conn)
        assert self._loop is not None
        self._loop.call_later(self.settings.hello_timeout, self._hello_expired, conn)

    def _register(self, conn: Connection) -> None:
        self._conns.add(conn)
        self.stats.connections_open = len(self._conns)
        conn.task = self._spawn(self._read_loop(conn), f"reader {conn.address}")

    def _hello_expired(self, conn: Connection) -> None:
        if conn.role is None and not conn.closed:
            self._bad_input(conn, "no_hello", "no hello within the hello timeout", close=True)

    async def _read_loop(self, conn: Connection) -> None:
        max_frame = self.settings.max_frame_bytes
        reader = conn.reader
        in_frame = False
        try:
            while not conn.closed and not conn.fatal:
                in_frame = False
                header = await reader.readexactly(wire.HEADER_SIZE)
                in_frame = True
                try:
                    length = wire.frame_length(header, max_frame)
                except wire.WireError as exc:
                    self._bad_input(conn, exc.code, exc.detail, close=True)
                    break
                payload = await reader.readexactly(length)
                try:
                    msg = wire.decode(payload, max_frame)
                except wire.WireError as exc:
                    self._bad_input(conn, exc.code, exc.detail, close=False)
                    continue
                self.stats.frames_in[msg.kind] += 1
                self.stats.bytes_in[msg.kind] += wire.HEADER_SIZE + length
                self._on_message(conn, msg)
                if conn.role == "client" and conn.writable:
                    await conn.writer.drain()  # a client that does not read is not served
            if conn.fatal:
                # Read and discard until the peer closes (or ERROR_LINGER closes us), so
                # that closing with unread input does not reset away our ErrorReply.
                while await reader.read(65536):
                    pass
        except asyncio.IncompleteReadError as exc:
            if exc.partial or in_frame:
                self._bad_input(
                    conn, "truncated_frame", "connection closed inside a frame", close=True
                )
        except (ConnectionError, OSError) as exc:
            log.debug("%s: connection %r lost: %r", self.ref, conn, exc)
        finally:
            self._forget(conn)

    def _forget(self, conn: Connection) -> None:
        conn.close()
        session = self._sessions.pop(conn, None)
        if session is not None:
            session._closed()
        self._conns.discard(conn)
        self.stats.connections_open = len(self._conns)
        if conn.peer is not None:
            link = self._links.get(conn.peer)
            if link is not None and conn in link.conns:
                link.conns.remove(conn)
                link.wakeup.set()

    def _bad_input(self, conn: Connection, code: str, detail: str, *, close: bool) -> None:
        """Count, log (rate-limited per peer and code), answer with ErrorReply, maybe close.

        Closing is graceful: after the ErrorReply the write side is shut down and the reader
        discards input until the peer closes, at most ERROR_LINGER seconds.
        """
        self.stats.error(code)
        self._limiter.log(
            ("bad_input", conn.source, code),
            logging.WARNING,
            "%s: bad input from %s: %s: %s",
            self.ref,
            conn.label,
            code,
            detail,
        )
        if (
            conn.writable
            and conn.writer.transport.get_write_buffer_size() < ERROR_REPLY_BUFFER_LIMIT
        ):
            reply = ErrorReply(code=code, detail=detail[: wire.MAX_STR_CHARS])
            conn.write(wire.encode(reply, self.settings.max_frame_bytes))
            self.stats.frames_out[reply.kind] += 1
        if close and not conn.fatal:
            conn.fatal = True
            conn.close_write()
            assert self._loop is not None
            self._loop.call_later(ERROR_LINGER, conn.close)

    def _on_message(self, conn: Connection, msg: Message) -> None:
        if conn.role is None:
            self._on_hello(conn, msg)
        elif isinstance(msg, Hello):
            self.stats.error("duplicate_hello")
        elif getattr(msg, "admin_only", False):
            # Operator requests (`pubsub.runtime.admin`) count only on the admin listener.
            self._bad_input(
                conn, "forbidden", f"{msg.kind} is accepted only on the admin listener",
                close=False,
            )
        elif conn.role == "peer":
            if isinstance(msg, ErrorReply):
                self.stats.error("peer_error_reply")
                self._limiter.log(
                    ("peer_error", conn.label, msg.code),
                    logging.WARNING,
                    "%s: %s rejected a frame: %s: %s",
                    self.ref,
                    conn.label,
                    msg.code,
                    msg.detail,
                )
                return
            if self.faults.armed:
                fault = self.faults.incoming(conn.peer, self.now())  # type: ignore[arg-type]
                if fault is not None:
                    self.stats.fault_drops[fault] += 1
                    return
            self.dispatch(self._call("handle", self.app.handle, msg, self.now()))
        else:
            self._on_request(conn, msg)

    def _on_hello(self, conn: Connection, msg: Message) -> None:
        if not isinstance(msg, Hello):
            self._bad_input(conn, "no_hello", f"expected hello, got {msg.kind}", close=True)
        elif msg.role == "client" and msg.ref is None:
            conn.role = "client"
            self._sessions[conn] = ClientSession(self, conn)
        elif msg.role == "peer" and msg.ref is not None and msg.ref != self.ref:
            conn.role = "peer"
            conn.peer = conn.initiator = msg.ref
            link = self._links.get(msg.ref)
            if link is None:
                link = self._links[msg.ref] = Link(msg.ref)
            self._adopt(link, conn)
        else:
            self._bad_input(
                conn, "bad_hello", f"role {msg.role!r} with ref {msg.ref!r}", close=True
            )

    def _on_request(self, conn: Connection, msg: Message) -> None:
        now = self.now()
        sends: list[Send] = []
        session = self._sessions.get(conn)
        if session is not None and session.streaming:
            self._bad_input(
                conn, "request_on_stream", f"{msg.kind} on a connection that carries a stream",
                close=False,
            )
            return
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
            reply, sends = self.app.control(msg, now)
            if not isinstance(reply, Message):
                raise TypeError(f"control returned {type(reply).__name__} as the reply")
            sends = list(sends)
        except Exception as exc:  # noqa: BLE001 - the daemon must survive its core
            self._handler_failed("control", exc)
            reply = ErrorReply(code="handler_error", detail=f"{type(exc).__name__}: {exc}"[:200])
            sends = []
        try:
            frame = wire.encode(reply, self.settings.max_frame_bytes)
        except wire.WireError as exc:
            self.stats.error(exc.code)
            reply = ErrorReply(
                code=exc.code, detail=f"cannot send the {reply.kind} reply: {exc.detail}"[:200]
            )
            frame = wire.encode(reply)
        if conn.write(frame):
            self.stats.frames_out[reply.kind] += 1
            self.stats.bytes_out[reply.kind] += len(frame)
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

    async def _timer_loop(self) -> None:
        s = self.settings
        while True:
            jitter = self._rng.uniform(-s.timer_jitter, s.timer_jitter)
            await asyncio.sleep(s.timeout_interval * (1 + jitter))
            self.dispatch(self._call("timeout", self.app.timeout, self.now()))

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


# --- the client side -------------------------------------------------------------------------
class RequestError(Exception):
    """A control request got no valid reply; the message is one line for the operator."""


async def request(
    addr: str, msg: Message, timeout: float, *, max_frame: int = wire.DEFAULT_MAX_FRAME
) -> Message:
    """Send one control request to the daemon at `addr` and return its reply.

    Connects, says Hello(role="client"), sends `msg`, waits for one frame, closes.  Raises
    RequestError when the address is malformed, the daemon cannot be reached, does not answer
    within `timeout` seconds, or answers with something that is not a valid frame.
    """
    try:
        host, port = split_ref(addr)
    except wire.WireError:
        raise RequestError(f"bad address {addr!r}: expected HOST:PORT") from None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(msg, max_frame))
            await writer.drain()
            length = wire.frame_length(await reader.readexactly(wire.HEADER_SIZE), max_frame)
            return wire.decode(await reader.readexactly(length), max_frame)
    except TimeoutError:
        raise RequestError(f"no reply from {addr} within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise RequestError(f"cannot reach {addr}: connection refused") from None
    except asyncio.IncompleteReadError:
        raise RequestError(f"{addr} closed the connection without a reply") from None
    except wire.WireError as exc:
        raise RequestError(f"bad reply from {addr}: {exc}") from None
    except OSError as exc:
        raise RequestError(f"cannot reach {addr}: {exc.strerror or exc}") from None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
