"""One TCP connection as the runtime holds it (`Connection`), and a client's connection as
the application sees it (`ClientSession`: send at any time, wait for the client to read,
learn when it is gone)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import cast

from pubsub.kernel import wire
from pubsub.kernel.message import Message, Ref
from pubsub.runtime.identity import Identity
from pubsub.runtime.stats import Stats

log = logging.getLogger(__name__)


def split_ref(ref: str) -> tuple[str, int]:
    """("host", port) of a reference "host:port"; WireError("bad_field") if malformed."""
    wire.validate_ref(ref)
    host, _, port = ref.rpartition(":")
    return host, int(port)


class Connection:
    """One TCP connection (peer or client), alive until `finished` (the runtime's `_forget`)."""

    _next_seq = 0

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        *,
        outgoing: bool,
        identity: Identity | None = None,
    ) -> None:
        Connection._next_seq += 1
        self.seq = Connection._next_seq
        self.writer = writer
        #: The writer's transport, written to directly (the hot path: no StreamWriter
        #: method in between).
        self.transport = cast(asyncio.Transport, writer.transport)
        self.outgoing = outgoing
        self.role: str | None = None  # "peer" / "client" once known
        self.peer: Ref | None = None  # the other side's ref (peers only)
        self.initiator: Ref | None = None  # the ref of the side that connected
        #: Who the other side's TLS certificate names (None: plain TCP or no identity).
        self.identity = identity
        self.write_closed = False
        self.closed = False
        self.fatal = False  # bad input: ErrorReply sent, write side closed, discarding input
        #: Done once the runtime forgot the connection (it ended or was closed).
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: Frames received and not yet acted on, and whether reading waits for the other
        #: side to read (`pubsub.runtime.inbound`: a client is not served while it does not read).
        self.pending: deque[bytes] = deque()
        self.reading_paused = False
        #: Resource limits (`pubsub.runtime.limits`), on the monotonic clock: when the
        #: unfinished frame being read began (None: between frames), when a frame was last
        #: read or written, what this connection borrowed of the shared frame buffer, and
        #: the source address it is counted under (None: not counted, e.g. outgoing).
        self.frame_started: float | None = None
        self.last_active = time.monotonic()
        self.borrowed = 0
        self.counted_as: str | None = None
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
        return not (self.write_closed or self.closed or self.transport.is_closing())

    def backlogged(self) -> bool:
        """Whether more is buffered for the other side than the connection's high-water mark
        (the point at which ``drain`` would start to wait)."""
        transport = self.transport
        return bool(transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1])

    def pause_reading(self) -> None:
        self.reading_paused = True
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.reading_paused = False
        self.transport.resume_reading()

    def write(self, data: bytes) -> bool:
        """Write `data` unless the connection can no longer be written to (False then)."""
        if not self.writable:
            return False
        self.transport.write(data)
        self.last_active = time.monotonic()
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

    #: Whether what is sent goes out encoded (`send_encoded` takes payloads); a session
    #: without a socket takes message objects only (`pubsub.runtime.local.QueuedSession`).
    encodes = True

    def __init__(self, conn: Connection, stats: Stats, max_frame: int) -> None:
        self._conn = conn
        self._stats = stats
        self._max_frame = max_frame
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
        stats = self._stats
        try:
            frame = wire.encode(msg, self._max_frame)
        except wire.WireError as exc:
            stats.error(exc.code)
            return False
        if not self._conn.write(frame):
            return False
        stats.frames_out[msg.kind] += 1
        stats.bytes_out[msg.kind] += len(frame)
        return True

    def send_many(self, msgs: list[Message]) -> list[int] | None:
        """Write several frames to the client with one write.  None (nothing written) if
        the connection is gone; else the indices of the messages that did not fit in a
        frame (counted as errors by their code, and skipped)."""
        if self._gone or not self._conn.writable:
            return None
        stats = self._stats
        frames: list[bytes] = []
        skipped: list[int] = []
        for i, msg in enumerate(msgs):
            try:
                frame = wire.encode(msg, self._max_frame)
            except wire.WireError as exc:
                stats.error(exc.code)
                skipped.append(i)
                continue
            frames.append(frame)
            stats.frames_out[msg.kind] += 1
            stats.bytes_out[msg.kind] += len(frame)
        if frames and not self._conn.write(b"".join(frames)):
            return None
        return skipped

    def send_encoded(self, kind: str, payloads: list[bytes]) -> list[int] | None:
        """`send_many` for messages of one `kind` encoded already (each payload as
        `wire.encode_payload` writes it; the hot path: a stream's Deliveries), framed here,
        with one write.  None (nothing written) if the connection is gone; else the indices
        of the payloads too large for a frame (counted as errors, and skipped)."""
        if self._gone or not self._conn.writable:
            return None
        max_frame = self._max_frame
        frames: list[bytes] = []
        skipped: list[int] = []
        for i, payload in enumerate(payloads):
            try:
                frames.append(wire.frame(kind, payload, max_frame))
            except wire.WireError as exc:
                self._stats.error(exc.code)
                skipped.append(i)
        if frames:
            data = b"".join(frames)
            if not self._conn.write(data):
                return None
            self._stats.frames_out[kind] += len(frames)
            self._stats.bytes_out[kind] += len(data)
        return skipped

    def buffered(self) -> int:
        """Bytes written to the client and not yet accepted by its socket."""
        if self.closed:
            return 0
        return self._conn.transport.get_write_buffer_size()

    def backlogged(self) -> bool:
        """Whether more is buffered for the client than its connection's high-water mark
        (the point at which `drain` starts to wait)."""
        return not self.closed and self._conn.backlogged()

    def takes_more(self) -> bool:
        """Whether the connection is open and not `backlogged` (one look, for the hot path)."""
        conn = self._conn
        return not self._gone and conn.writable and not conn.backlogged()

    async def drain(self) -> None:
        """Wait until the client has read enough of what was sent (returns at once when
        the connection is gone)."""
        if self.closed:
            return
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            await self._conn.writer.drain()

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
