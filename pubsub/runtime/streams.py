"""Reading messages from an asyncio stream: the socket side of the sans-I/O frame decoder.

`MessageReader` feeds what `StreamReader.read` returns to a `pubsub.kernel.framing.FrameDecoder`
and hands out one message at a time.  The admin listener and the client side (`request`,
the client libraries) read through it; the runtime's own reader feeds the decoder directly.
"""

from __future__ import annotations

import asyncio
from collections import deque

from pubsub.kernel import wire
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Message

#: Bytes asked of the socket per read.
READ_CHUNK = 256 * 1024


class MessageReader:
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

    async def read(self) -> Message | None:
        """The next message; None at a clean end of the stream; WireError for anything
        that is not a valid frame (see `payload` and `pubsub.kernel.wire.decode`)."""
        payload = await self.payload()
        return None if payload is None else wire.decode(payload, self._max_frame)
