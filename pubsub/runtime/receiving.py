"""Receiving without a reader task: the runtime's connections hand what arrives to a callback.

asyncio's streams wake a reading task for every chunk that arrives: the transport calls
the protocol, which feeds the `StreamReader`, which resolves a future, whose callback
schedules the task, which returns from ``read`` on the next pass of the event loop.  On
this machine that chain cost about 60 µs of CPU per wake-up of an otherwise idle process
(`docs/measurements/issue11.md`: a reader woken every 5 ms spent 100-125 µs per message
through a stream, 50-60 through a protocol callback), and a node wakes up once per
publication when publications arrive one at a time.

`Receiver` is a `StreamReaderProtocol` (so the connection keeps its `StreamWriter`, with
``drain``, ``get_extra_info`` and TLS as before) whose bytes go to the callbacks given to
`attach` instead of the stream reader: `on_data(chunk)` for each chunk, and `on_end(exc)`
once, on the next pass of the loop after the connection ended (``None`` at a clean end of
the stream or a local close, else the error).  What arrives before `attach` is kept and
handed over by `attach` (up to `EARLY_LIMIT` bytes; reading pauses beyond that).
`on_writable()` is called, on the next pass of the loop, when the transport's write buffer
drained below its low-water mark after having been above the high-water mark -- the moment
``drain`` would return -- so that the owner can resume reading a connection it paused
because the other side does not read what it is sent.

`serve` and `connect` are `asyncio.start_server` and `asyncio.open_connection` with this
protocol.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from typing import Any, cast

#: Bytes kept before `attach` at most; beyond them reading pauses until `attach`.
EARLY_LIMIT = 256 * 1024

OnData = Callable[[bytes], None]
OnEnd = Callable[[BaseException | None], None]
OnWritable = Callable[[], None]
Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], None]


class Receiver(asyncio.StreamReaderProtocol):
    """A stream protocol that hands received bytes to callbacks (module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, accept: Accept | None = None) -> None:
        #: Kept only for the writer (`asyncio.StreamWriter` wants one); nothing is fed to it.
        self.reader = asyncio.StreamReader(loop=loop)
        self.loop = loop
        super().__init__(self.reader, accept, loop=loop)
        self._on_data: OnData | None = None
        self._on_end: OnEnd | None = None
        self._on_writable: OnWritable | None = None
        self._early: list[bytes] = []
        self._early_bytes = 0
        self._read_transport: asyncio.BaseTransport | None = None  # ours, to pause and resume
        self._paused_early = False
        self._ended: list[BaseException | None] = []  # [exc] once ended, before `attach`
        self._end_told = False

    def attach(self, on_data: OnData, on_end: OnEnd, on_writable: OnWritable) -> None:
        """Send what arrives to these callbacks from now on (and what arrived already)."""
        self._on_data, self._on_end, self._on_writable = on_data, on_end, on_writable
        early, self._early, self._early_bytes = self._early, [], 0
        for chunk in early:
            on_data(chunk)
        if self._paused_early:
            self._paused_early = False
            if not self._ended and self._read_transport is not None:
                cast(asyncio.Transport, self._read_transport).resume_reading()
        if self._ended:
            self._end(self._ended[0])

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._read_transport = transport
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        on_data = self._on_data
        if on_data is None:
            self._early.append(data)
            self._early_bytes += len(data)
            if self._early_bytes > EARLY_LIMIT and not self._paused_early:
                self._paused_early = True  # the rest waits in the socket until `attach`
                if self._read_transport is not None:
                    cast(asyncio.Transport, self._read_transport).pause_reading()
        else:
            on_data(data)

    def eof_received(self) -> bool:
        keep_open = bool(super().eof_received())
        self._end(None)
        return keep_open

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._end(exc)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._on_writable is not None:  # on the next pass, not inside the transport's write
            self.loop.call_soon(self._on_writable)

    def _end(self, exc: BaseException | None) -> None:
        if self._on_end is None:
            if not self._ended:
                self._ended.append(exc)
            return
        if not self._end_told:
            # On the next pass: a transport may end inside a call of ours (a TLS transport
            # closed while a chunk's frames are being handled), and the frames already
            # received are still handled, as a reader task would.
            self._end_told = True
            self.loop.call_soon(self._on_end, exc)


def receiver_of(writer: asyncio.StreamWriter) -> Receiver:
    """The `Receiver` behind a writer made by `serve` or `connect`."""
    protocol = writer.transport.get_protocol()
    if not isinstance(protocol, Receiver):
        raise TypeError(f"not a Receiver connection: {protocol!r}")
    return protocol


async def serve(accept: Accept, *, host: str | None = None, port: int | None = None,
                sock: socket.socket | None = None, **kwargs: Any) -> asyncio.Server:
    """Listen like `asyncio.start_server`; `accept(reader, writer)` runs for each connection
    (from the protocol's ``connection_made``, so `attach` there misses nothing)."""
    loop = asyncio.get_running_loop()
    if sock is not None:
        return await loop.create_server(lambda: Receiver(loop, accept), sock=sock, **kwargs)
    return await loop.create_server(lambda: Receiver(loop, accept), host, port, **kwargs)


async def connect(host: str, port: int, *, ssl: ssl.SSLContext | None = None) -> asyncio.StreamWriter:
    """Connect like `asyncio.open_connection`: the writer, whose protocol is a `Receiver`
    (what arrives goes to the callbacks given to its `attach`, no reader is needed)."""
    loop = asyncio.get_running_loop()
    protocol = Receiver(loop)
    transport, _ = await loop.create_connection(lambda: protocol, host, port, ssl=ssl)
    return asyncio.StreamWriter(transport, protocol, protocol.reader, loop)
