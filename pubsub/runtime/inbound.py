"""The runtime's input from one connection: chunks to frames, frames to messages, messages to
the application (`pubsub.runtime.net.Runtime`).

Each connection the runtime holds, accepted or opened (`pubsub.runtime.links`), is `attach`ed
here: its chunks arrive as they are read, without a reader task (`pubsub.runtime.receiving`),
and are cut into frames by its own sans-I/O `pubsub.kernel.framing.FrameDecoder`.  Then, frame
by frame and in order:

* **decoding**: an undecodable frame is counted by its `WireError` code, answered with
  ErrorReply and the connection kept; an over-long length prefix is refused before the body
  is read (counted, answered, the connection closed); a frame cut short by EOF is counted
  and the connection closed.  What a connection holds of an unfinished frame is borrowed
  from the shared frame buffer (`pubsub.runtime.limits.BufferPool`); one that cannot
  borrow more is closed (``buffer_limit``);
* **bad input** (`bad_input`): counted, logged rate-limited per (peer, code) -- never one
  line per frame --, answered with ErrorReply unless the connection's write buffer is
  already full, and, when it closes the connection, closed gracefully: the write side
  shut down, input discarded until the peer closes, at most `ERROR_LINGER` seconds;
* **dispatching**: the first message must be a Hello, which makes the connection a peer's
  (adopted as the link to that ref for sending too) or a client's (a `ClientSession`); a
  peer's messages -- a `Bundle` unpacked, each checked as if it had come alone -- go to
  ``app.handle`` and what it returns to the runtime's `dispatch`; a client's requests to the
  runtime's `serve_request`, whose reply is written back here (`_reply`).  Operator
  requests (``admin_only``, `pubsub.runtime.admin`) are refused as ``forbidden``, and the
  network faults an operator injected (`pubsub.runtime.faults.NetworkFaults`) drop peer
  messages before they are handled;
* **admission** (`pubsub.runtime.admission`): the Hello's identity (with TLS), each peer
  message's sender (with TLS), each client request's permission and publish quota are the
  gate's to decide before the application sees the message;
* **back-pressure**: a client that does not read what it is sent is not served -- once its
  connection holds more than the high-water mark, its remaining frames wait and reading
  pauses until it has read enough (`_client_reads`).

The per-frame path is as short as it was inside the runtime: the receiver calls a bound
`_received`, and the runtime's methods this needs per message (`now`, the core call,
`dispatch`) and the gate's are bound once, at construction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from functools import partial

from pubsub.kernel import wire
from pubsub.kernel.control import Bundle, ErrorReply, Hello
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Message, Ref, Send
from pubsub.runtime.admission import Admission
from pubsub.runtime.application import Application
from pubsub.runtime.connection import ClientSession, Connection
from pubsub.runtime.faults import NetworkFaults
from pubsub.runtime.limits import BUFFER_LIMIT, BufferPool
from pubsub.runtime.links import Links
from pubsub.runtime.receiving import receiver_of
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.stats import LogLimiter, Stats

#: The runtime's logger: the records written here keep the name they had when this was part
#: of `pubsub.runtime.net` (rate-limited ones go through the runtime's `LogLimiter` anyway).
log = logging.getLogger("pubsub.runtime.net")

#: Seconds a connection closed for bad input lingers (half-closed) so the ErrorReply arrives.
ERROR_LINGER = 2.0
#: No ErrorReply is written to a connection whose transport buffer already holds this much.
ERROR_REPLY_BUFFER_LIMIT = 256 * 1024


class Inbound:
    """The input of every connection of one runtime (see the module docstring).

    What it needs of the runtime comes as callables, bound once: `now` (the core's clock),
    `call(name, fn, *args)` (call the core, counting what it raises), `dispatch` (deliver
    the core's sends), `serve_request(msg, session, reply, now)` (one client request) and
    `forget` (a connection ended: the runtime lets go of it).
    """

    def __init__(
        self,
        app: Application,
        ref: Ref,
        settings: RuntimeSettings,
        stats: Stats,
        limiter: LogLimiter,
        admission: Admission,
        links: Links,
        faults: NetworkFaults,
        *,
        now: Callable[[], float],
        call: Callable[..., list[Send]],
        dispatch: Callable[[list[Send]], None],
        serve_request: Callable[[Message, ClientSession | None, Callable[[Message], object], float], None],
        forget: Callable[[Connection], None],
    ) -> None:
        self._app = app
        self._ref = ref
        self._settings = settings
        self._stats = stats
        self._limiter = limiter
        self._links = links
        self._faults = faults
        self._admission = admission
        self._tls = admission.tls
        self._quotas = admission.quotas
        self._sender_refusal = admission.sender_refusal
        self._permitted = admission.permitted
        self._over_quota = admission.over_quota
        self._now = now
        self._call = call
        self._dispatch = dispatch
        self._serve_request = serve_request
        self._forget = forget
        #: The shared buffer of unfinished frames (`pubsub.runtime.limits`).
        self.pool = BufferPool(settings.inflight_bytes, settings.conn_buffer_bytes)
        #: The client connections, by connection (their Hello made them clients).
        self.sessions: dict[Connection, ClientSession] = {}

    # --- one connection ----------------------------------------------------------------------
    def attach(self, conn: Connection) -> None:
        """Take `conn`'s input from now on: its chunks, its end, its client's reads."""
        decoder = FrameDecoder(self._settings.max_frame_bytes)
        receiver_of(conn.writer).attach(
            partial(self._received, conn, decoder),
            partial(self._ended, conn, decoder),
            partial(self._client_reads, conn, decoder),
        )

    def release(self, conn: Connection) -> None:
        """`conn` is gone: give back what it borrowed of the frame buffer, end its session."""
        self.pool.give_back(conn.borrowed)
        conn.borrowed = 0
        session = self.sessions.pop(conn, None)
        if session is not None:
            session._closed()

    # --- frames ------------------------------------------------------------------------------
    def _hold(self, conn: Connection, decoder: FrameDecoder, completed: bool) -> bool:
        """After a read: note when the unfinished frame began and settle what `conn`
        borrows of the shared frame buffer; False (and `conn` closed) if it cannot."""
        if not decoder.in_frame:
            conn.frame_started = None
        elif completed or conn.frame_started is None:
            conn.frame_started = time.monotonic()
        if decoder.pending <= self.pool.allowance and not conn.borrowed:
            return True
        borrowed = self.pool.settle(conn.borrowed, decoder.pending)
        if borrowed is None:
            conn.borrowed = 0
            decoder.discard()
            self.bad_input(
                conn, BUFFER_LIMIT,
                f"the daemon holds too many unfinished frames to buffer {decoder.pending} bytes more",
                close=True, tally=self._stats.closed,
            )
            return False
        conn.borrowed = borrowed
        return True

    def _received(self, conn: Connection, decoder: FrameDecoder, data: bytes) -> None:
        """A chunk from `conn` (`pubsub.runtime.receiving`): cut it into frames and act on
        them in order.  After bad input that closes the connection, what still arrives is
        discarded until the peer closes (or ERROR_LINGER closes us), so that closing with
        unread input does not reset away our ErrorReply."""
        if conn.closed or conn.fatal:
            return
        try:
            payloads = decoder.feed(data)
            if not self._hold(conn, decoder, bool(payloads)):
                return
            conn.pending.extend(payloads)
            if not conn.reading_paused:
                self._take_frames(conn, decoder)
        except Exception:  # noqa: BLE001 - a failure here ends this connection, not the daemon
            self._stats.error("runtime_error")
            log.exception("%s: reading %r failed", self._ref, conn)
            self._forget(conn)

    def _take_frames(self, conn: Connection, decoder: FrameDecoder) -> None:
        """Act on the frames `conn` delivered, in order.  A client that does not read what
        it is sent is not served: once its connection holds more than the high-water mark,
        the rest waits and reading pauses until the client has read enough
        (`_client_reads`)."""
        pending = conn.pending
        while pending and not conn.closed and not conn.fatal:
            self._on_frame(conn, pending.popleft())
            if conn.role == "client" and conn.writable and conn.backlogged():
                conn.pause_reading()
                return
        pending.clear()
        if decoder.error is not None and not conn.fatal and not conn.closed:
            self.bad_input(conn, decoder.error.code, decoder.error.detail, close=True)

    def _client_reads(self, conn: Connection, decoder: FrameDecoder) -> None:
        """`conn`'s write buffer drained: go on with the frames that waited, then read."""
        if not conn.reading_paused or conn.closed:
            return
        conn.resume_reading()
        self._take_frames(conn, decoder)

    def _ended(self, conn: Connection, decoder: FrameDecoder, exc: BaseException | None) -> None:
        """`conn` reached its end: EOF, a local close, or an error."""
        if exc is not None:
            log.debug("%s: connection %r lost: %r", self._ref, conn, exc)
        elif decoder.in_frame and not conn.fatal and not conn.closed:
            self.bad_input(conn, "truncated_frame", "connection closed inside a frame", close=True)
        self._forget(conn)

    def _on_frame(self, conn: Connection, payload: bytes) -> None:
        """One frame from `conn`: decode it, count it, act on it."""
        try:
            msg = wire.decode(payload, self._settings.max_frame_bytes)
        except wire.WireError as exc:
            self.bad_input(conn, exc.code, exc.detail, close=False)
            return
        self._stats.frames_in[msg.kind] += 1
        self._stats.bytes_in[msg.kind] += wire.HEADER_SIZE + len(payload)
        conn.last_active = time.monotonic()
        self._on_message(conn, msg)

    # --- bad input ---------------------------------------------------------------------------
    def bad_input(
        self, conn: Connection, code: str, detail: str, *, close: bool, tally: Counter[str] | None = None
    ) -> None:
        """Count (in `tally`, by default the errors), log (rate-limited per peer and code),
        answer with ErrorReply, maybe close.

        Closing is graceful: after the ErrorReply the write side is shut down and the reader
        discards input until the peer closes, at most ERROR_LINGER seconds.
        """
        (self._stats.errors if tally is None else tally)[code] += 1
        self._limiter.log(
            ("bad_input", conn.source, code),
            logging.WARNING,
            "%s: bad input from %s: %s: %s",
            self._ref,
            conn.label,
            code,
            detail,
        )
        if (
            conn.writable
            and conn.transport.get_write_buffer_size() < ERROR_REPLY_BUFFER_LIMIT
        ):
            reply = ErrorReply(code=code, detail=detail[: wire.MAX_STR_CHARS])
            conn.write(wire.encode(reply, self._settings.max_frame_bytes))
            self._stats.frames_out[reply.kind] += 1
        if close and not conn.fatal:
            conn.fatal = True
            conn.close_write()
            asyncio.get_running_loop().call_later(ERROR_LINGER, conn.close)

    # --- messages ----------------------------------------------------------------------------
    def _on_message(self, conn: Connection, msg: Message) -> None:
        if conn.role is None:
            self._on_hello(conn, msg)
        elif isinstance(msg, Hello):
            self._stats.error("duplicate_hello")
        elif getattr(msg, "admin_only", False):
            # Operator requests (`pubsub.runtime.admin`) count only on the admin listener.
            self.bad_input(
                conn, "forbidden", f"{msg.kind} is accepted only on the admin listener",
                close=False,
            )
        elif conn.role == "peer":
            if isinstance(msg, ErrorReply):
                self._stats.error("peer_error_reply")
                self._limiter.log(
                    ("peer_error", conn.label, msg.code),
                    logging.WARNING,
                    "%s: %s rejected a frame: %s: %s",
                    self._ref,
                    conn.label,
                    msg.code,
                    msg.detail,
                )
                return
            if self._faults.armed:
                fault = self._faults.incoming(conn.peer, self._now())  # type: ignore[arg-type]
                if fault is not None:
                    self._stats.fault_drops[fault] += 1
                    return
            if isinstance(msg, Bundle):
                self._on_bundle(conn, msg)
                return
            if self._tls and (problem := self._sender_refusal(conn, msg)) is not None:
                self.bad_input(conn, "forbidden_sender", problem, close=False)
                return
            sends = self._call("handle", self._app.handle, msg, self._now())
            if sends:
                self._dispatch(sends)
        elif isinstance(msg, Bundle):
            self.bad_input(conn, "bundle_from_client", "bundles are exchanged by peers only", close=False)
        else:
            self._on_request(conn, msg)

    def _on_bundle(self, conn: Connection, bundle: Bundle) -> None:
        """Each message of a peer's bundle, checked and handled as if it had come alone."""
        max_frame = self._settings.max_frame_bytes
        for payload in bundle.payloads:
            try:
                msg = wire.decode(payload, max_frame)
            except wire.WireError as exc:
                self.bad_input(conn, exc.code, f"in a bundle: {exc.detail}", close=False)
                continue
            if isinstance(msg, Bundle):
                self.bad_input(conn, "nested_bundle", "a bundle inside a bundle", close=False)
                continue
            self._stats.bundled_in[msg.kind] += 1
            self._on_message(conn, msg)

    def _on_hello(self, conn: Connection, msg: Message) -> None:
        if not isinstance(msg, Hello):
            self.bad_input(conn, "no_hello", f"expected hello, got {msg.kind}", close=True)
        elif problem := self._admission.hello_refusal(conn, msg):
            self.bad_input(conn, "identity_mismatch", problem, close=True)
        elif msg.role == "client" and msg.ref is None:
            conn.role = "client"
            self.sessions[conn] = ClientSession(conn, self._stats, self._settings.max_frame_bytes)
        elif msg.role == "peer" and msg.ref is not None and msg.ref != self._ref:
            conn.role = "peer"
            conn.peer = conn.initiator = msg.ref
            self._links.adopt(self._links.link(msg.ref), conn)
        else:
            self.bad_input(
                conn, "bad_hello", f"role {msg.role!r} with ref {msg.ref!r}", close=True
            )

    def _on_request(self, conn: Connection, msg: Message) -> None:
        if self._quotas.enabled and self._over_quota(conn, msg):
            return
        now = self._now()
        session = self.sessions.get(conn)
        if session is not None and session.streaming:
            self.bad_input(
                conn, "request_on_stream", f"{msg.kind} on a connection that carries a stream",
                close=False,
            )
            return
        if not self._permitted(conn, msg):
            return
        self._serve_request(msg, session, partial(self._reply, conn), now)

    def _reply(self, conn: Connection, reply: Message) -> None:
        """Write a control reply to a TCP client (a reply too large for a frame is
        replaced by an ErrorReply saying so)."""
        try:
            frame = wire.encode(reply, self._settings.max_frame_bytes)
        except wire.WireError as exc:
            self._stats.error(exc.code)
            reply = ErrorReply(
                code=exc.code, detail=f"cannot send the {reply.kind} reply: {exc.detail}"[:200]
            )
            frame = wire.encode(reply)
        if conn.write(frame):
            self._stats.frames_out[reply.kind] += 1
            self._stats.bytes_out[reply.kind] += len(frame)
