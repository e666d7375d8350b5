"""The sans-I/O frame decoder: bytes in as they arrive, whole frame payloads out.

A frame is a 4-byte big-endian length and that many payload bytes (`pubsub.kernel.wire`).
`FrameDecoder.feed` takes whatever a read returned -- part of a header, many frames at
once, a frame cut anywhere -- and returns the payloads it completed, in order.  It is the
only frame parser of the project: the network runtime, the admin listener and both client
libraries feed it from their sockets, and tests feed it without any.

Limits are checked before memory is spent: a length prefix over `max_frame` is refused as
soon as its four bytes are in, before any of the body is buffered.  `feed` still returns the
frames completed before it; from then on `error` holds `WireError("frame_too_large")` and
every further byte is discarded (the stream cannot be resynchronised; its owner answers and
closes the connection).  `pending` tells how many bytes of an unfinished frame are
held (the runtime charges what is over a per-connection allowance to a shared pool,
`pubsub.runtime.limits.BufferPool`), `in_frame` whether the stream stopped inside a frame
(an EOF then truncated one), and `discard` drops what is held when the owner closes.
"""

from __future__ import annotations

from pubsub.kernel.wire import DEFAULT_MAX_FRAME, HEADER, HEADER_SIZE, WireError, oversize_frame

_unpack_header = HEADER.unpack_from


class FrameDecoder:
    """Cuts one byte stream into frame payloads (see the module docstring)."""

    __slots__ = ("max_frame", "error", "_buf", "_need")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 1:
            raise ValueError("max_frame must be positive")
        self.max_frame = max_frame
        self._buf = bytearray()
        self._need = -1  # body length of the frame being read, -1 while reading a header
        #: Set once the stream announced an oversize frame; input is discarded from then on.
        self.error: WireError | None = None

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._buf)

    @property
    def in_frame(self) -> bool:
        """Whether the stream so far ends inside a frame (header or body)."""
        return bool(self._buf) or self._need >= 0

    @property
    def expected(self) -> int | None:
        """The announced body length of the frame being read (None while in a header)."""
        return self._need if self._need >= 0 else None

    def discard(self) -> None:
        """Drop the unfinished frame and ignore all further input (the connection is being
        closed: what it held need not wait for the socket to close)."""
        self._buf = bytearray()
        self._need = -1
        if self.error is None:
            self.error = WireError("discarded", "input discarded")

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Take `data`; return the payloads of the frames it completed (maybe none), in
        order.  A length prefix over `max_frame` sets `error` (see the module docstring)."""
        if self.error is not None or not data:
            return []
        buf = self._buf
        if not buf and self._need < 0:
            return self._feed_fresh(data)
        buf += data
        return self._drain()

    def _feed_fresh(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The common case, nothing buffered: slice whole frames straight out of `data`."""
        view = memoryview(data)
        size = len(view)
        pos = 0
        frames: list[bytes] = []
        max_frame = self.max_frame
        while size - pos >= HEADER_SIZE:
            (length,) = _unpack_header(view, pos)
            if length > max_frame:
                self._fail(length)
                return frames
            end = pos + HEADER_SIZE + length
            if end > size:
                break
            frames.append(bytes(view[pos + HEADER_SIZE : end]))
            pos = end
        if pos < size:
            self._buf += view[pos:]
            if len(self._buf) >= HEADER_SIZE:
                self._start_body()
        return frames

    def _drain(self) -> list[bytes]:
        buf = self._buf
        frames: list[bytes] = []
        while True:
            if self._need < 0 and (len(buf) < HEADER_SIZE or not self._start_body()):
                return frames
            need = self._need
            if len(buf) < HEADER_SIZE + need:
                return frames
            frames.append(bytes(buf[HEADER_SIZE : HEADER_SIZE + need]))
            del buf[: HEADER_SIZE + need]
            self._need = -1

    def _start_body(self) -> bool:
        """Read the buffered header; False (and `error` set) if it announces too much."""
        (length,) = _unpack_header(self._buf, 0)
        if length > self.max_frame:
            self._fail(length)
            return False
        self._need = length
        return True

    def _fail(self, length: int) -> None:
        self.error = oversize_frame(length, self.max_frame)
        self._buf.clear()
        self._need = -1
