"""Reading messages from a connection: the socket side of the sans-I/O frame decoder.

Two readers hand out one message at a time through the same `read` and `payload`:

* `MessageReader` feeds what `StreamReader.read` returns to a
  `pubsub.kernel.framing.FrameDecoder`.  The admin listener and one-shot control requests
  (`pubsub.runtime.client.request`) read through it.
* `ReceivedMessages` reads a connection made by `pubsub.runtime.receiving.connect`: each
  chunk is cut into frames in the protocol callback that received it, so a reader finds
  every frame already there without waking a task per chunk, and a consumer that does not
  await per message can take the frames from `on_ready`'s callback with no task switch at
  all (`pubsub.client.library.Subscription.consume`).  The client libraries read through
  it.  When frames pile up unread beyond `PAUSE_ABOVE` bytes, reading the socket pauses
  until the reader catches up, as a `StreamReader` does.

The runtime's own connections feed the decoder directly (`pubsub.runtime.inbound`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from pubsub.kernel import wire
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Message
from pubsub.runtime.receiving import receiver_of

#: Bytes asked of the socket per read.
READ_CHUNK = 256 * 1024
#: Bytes of received, unread frames above which `ReceivedMessages` pauses reading the socket.
PAUSE_ABOVE = 256 * 1024


class _Messages:
    """What both readers share: `read` decodes what `payload` returns."""

    _max_frame: int

    async def payload(self) -> bytes | None:
        raise NotImplementedError

    async def read(self) -> Message | None:
        """The next message; None at a clean end of the stream; WireError for anything
        that is not a valid frame (see `payload` and `pubsub.kernel.wire.decode`)."""
        payload = await self.payload()
        return None if payload is None else wire.decode(payload, self._max_frame)


class MessageReader(_Messages):
    """Messages from one stream, in order."""

    def __init__(self, reader: asyncio.StreamReader, max_frame: int = wire.DEFAULT_MAX_FRAME) -> None:
        self._reader = reader
        self._max_frame = max_frame
        self._decoder = FrameDecoder(max_frame)
        self._ready: deque[bytes] = deque()

    async def payload(self) -> bytes | None:
        """The next frame's payload; None at a clean end of the stream.

        Raises WireError: ``truncated_frame`` when the stream ends inside a frame,
        ``frame_too_large`` for an oversize length prefix.
        """
        while not self._ready:
            if self._decoder.error is not None:
                raise self._decoder.error
            data = await self._reader.read(READ_CHUNK)
            if not data:
                if self._decoder.in_frame:
                    raise wire.WireError("truncated_frame", "connection closed inside a frame")
                return None
            self._ready.extend(self._decoder.feed(data))
        return self._ready.popleft()


class ReceivedMessages(_Messages):
    """Messages from one connection made by `pubsub.runtime.receiving.connect`, in order,
    cut into frames as they arrive (module docstring)."""

    def __init__(self, writer: asyncio.StreamWriter, max_frame: int = wire.DEFAULT_MAX_FRAME) -> None:
        receiver = receiver_of(writer)
        self._transport = writer.transport
        self._loop = receiver.loop
        self._max_frame = max_frame
        self._decoder = FrameDecoder(max_frame)
        self._ready: deque[bytes] = deque()
        self._ready_bytes = 0
        self._paused = False
        self._ended = False
        self._end_error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._on_ready: Callable[[], None] | None = None
        receiver.attach(self._received, self._end, _nothing)

    def on_ready(self, callback: Callable[[], None] | None) -> None:
        """From now on call `callback()` (None: stop) from the receiving callback whenever
        frames arrived or the stream ended; it takes them with `take_message` (or `take` and
        `ended`).  A task waiting in `payload` meanwhile is not woken."""
        self._on_ready = callback

    def take(self) -> bytes | None:
        """The next payload already received, or None when none is waiting."""
        if not self._ready:
            return None
        payload = self._ready.popleft()
        self._ready_bytes -= len(payload)
        if self._paused and self._ready_bytes <= PAUSE_ABOVE // 2:
            self._paused = False
            if not self._ended:
                self._transport.resume_reading()  # type: ignore[attr-defined]
        return payload

    def ended(self) -> bool:
        """Whether the stream is over, once `take` returned None: False while it is open,
        True at a clean end.  Raises WireError (``frame_too_large``, or ``truncated_frame``
        when the stream ended inside a frame) or the connection's error when it broke."""
        if self._decoder.error is not None:
            raise self._decoder.error
        if not self._ended:
            return False
        if self._end_error is not None:
            raise self._end_error
        if self._decoder.in_frame:
            raise wire.WireError("truncated_frame", "connection closed inside a frame")
        return True

    def take_message(self) -> Message | None:
        """The next message already received, or None while none is waiting.  Raises
        `asyncio.IncompleteReadError` at the end of the stream (a clean end or one inside a
        frame), WireError for a frame that is not a valid message or too large, and the
        connection's error when it broke."""
        payload = self.take()
        if payload is not None:
            return wire.decode(payload, self._max_frame)
        try:
            if not self.ended():
                return None
        except wire.WireError as exc:
            if exc.code != "truncated_frame":
                raise
        raise asyncio.IncompleteReadError(b"", None)

    async def payload(self) -> bytes | None:
        """The next frame's payload; None at a clean end of the stream; raises as `ended`."""
        while (payload := self.take()) is None:
            if self.ended():
                return None
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return payload

    def _received(self, chunk: bytes) -> None:
        frames = self._decoder.feed(chunk)
        if frames:
            self._ready.extend(frames)
            self._ready_bytes += sum(map(len, frames))
            if self._ready_bytes > PAUSE_ABOVE and not self._paused:
                self._paused = True  # the rest waits in the socket until the reader catches up
                self._transport.pause_reading()  # type: ignore[attr-defined]
            self._signal()
        elif self._decoder.error is not None:
            self._signal()

    def _end(self, exc: BaseException | None) -> None:
        self._ended = True
        self._end_error = exc
        self._signal()

    def _signal(self) -> None:
        if self._on_ready is not None:
            self._on_ready()
        elif self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _nothing() -> None:
    """The client side does not pause reading for a peer that does not read."""
