"""The admin listener: serves an operator's `ChaosRequest`s for one daemon's `Chaos`
(`pubsub.runtime.admin`), on its own address, to clients only.

With TLS the listener speaks TLS too (the daemon's certificate, client certificates
required) and serves only an identity allowed admin actions (an ``admin`` certificate, or a
client granted ``admin`` in the permissions file, `pubsub.runtime.permissions`); anyone else
gets ``permission_denied``, counted as ``admin_permission_denied``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping

from pubsub.kernel import wire
from pubsub.kernel.control import ChaosRequest, ErrorReply, Hello, Reply
from pubsub.kernel.message import Message, Ref
from pubsub.runtime.admin import Action, Chaos, EventSink
from pubsub.runtime.adminparams import ChaosError
from pubsub.runtime.connection import split_ref
from pubsub.runtime.net import Runtime
from pubsub.runtime.permissions import DENIED
from pubsub.runtime.settings import AdminSettings
from pubsub.runtime.stats import LogLimiter
from pubsub.runtime.streams import MessageReader
from pubsub.runtime.tls import peer_identity, server_context

log = logging.getLogger(__name__)

#: Seconds the answer to a crash request may take to leave before the process is killed.
CRASH_REPLY_GRACE = 1.0


class AdminError(RuntimeError):
    """The admin listener cannot be opened; the message is one line for the operator."""


class AdminServer:
    """Serves `ChaosRequest`s on the admin address, for one daemon's `Chaos`.

    `start` (call it once the runtime runs) binds the address -- AdminError if it cannot --
    and serves it in a task of the runtime, so stopping the runtime closes it.  Bad input
    (no Hello, an undecodable or truncated frame) is counted in the runtime's Stats as
    ``admin_<code>``, logged rate-limited, answered with ErrorReply, and the connection is
    closed; a well-formed request that is refused only gets its ErrorReply.
    """

    def __init__(self, chaos: Chaos, listen: Ref) -> None:
        self.chaos = chaos
        self.listen = listen
        self.runtime = chaos.runtime
        self._limiter = LogLimiter(log)
        self._sock: socket.socket | None = None

    def start(self) -> None:
        """Bind and listen now; serve in a runtime task."""
        host, port = split_ref(self.listen)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(16)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise AdminError(f"cannot open the admin listener {self.listen}: {reason}") from None
        self._sock = sock
        self.runtime.spawn(self._serve(sock), "admin listener")
        log.info("%s: admin listener on %s", self.chaos.ref, self.listen)

    async def _serve(self, sock: socket.socket) -> None:
        context = server_context(self.runtime.settings)
        tls: dict[str, object] = {}
        if context is not None:
            tls = {"ssl": context, "ssl_handshake_timeout": self.runtime.settings.hello_timeout}
        server = await asyncio.start_server(self._connection, sock=sock, **tls)  # type: ignore[arg-type]
        try:
            await asyncio.Event().wait()  # until the runtime cancels us
        finally:
            server.close()
            sock.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        settings = self.runtime.settings
        peer = writer.get_extra_info("peername")
        source = peer[0] if isinstance(peer, tuple) else str(peer)
        messages = MessageReader(reader, settings.max_frame_bytes)
        try:
            async with asyncio.timeout(settings.hello_timeout):
                hello = await self._read(messages, writer, source)
            if hello is None:
                return
            if not (isinstance(hello, Hello) and hello.role == "client" and hello.ref is None):
                self._refuse(writer, source, "no_hello", "expected Hello(role=client, ref=None)")
                return
            authority = self.runtime.authority
            if authority is not None and (problem := authority.check(peer_identity(writer), "admin")):
                self._refuse(writer, source, DENIED, problem)
                return
            while True:
                msg = await self._read(messages, writer, source)
                if msg is None:
                    return
                crash = self._answer(writer, msg, source)
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.drain()
                if crash:
                    with contextlib.suppress(Exception):
                        writer.write_eof()
                        async with asyncio.timeout(CRASH_REPLY_GRACE):
                            await reader.read()  # until the operator has read the answer
                    self.chaos.crash_now()
        except TimeoutError:
            self._refuse(writer, source, "no_hello", "no hello within the hello timeout")
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _read(
        self, messages: MessageReader, writer: asyncio.StreamWriter, source: str
    ) -> Message | None:
        """The next frame's message; None at EOF or after refusing a bad frame."""
        try:
            return await messages.read()
        except wire.WireError as exc:
            self._refuse(writer, source, exc.code, exc.detail)
        return None

    def _answer(self, writer: asyncio.StreamWriter, msg: Message, source: str) -> bool:
        """Reply to one request; whether the daemon must crash now."""
        stats = self.runtime.stats
        if not isinstance(msg, ChaosRequest):
            detail = f"the admin listener serves only chaos requests, not {msg.kind}"
            self._send(writer, ErrorReply("unsupported", detail))
            stats.error("admin_unsupported")
            return False
        try:
            outcome = self.chaos.handle(msg)
        except ChaosError as exc:
            stats.error(f"admin_{exc.code}")
            self._send(writer, ErrorReply(exc.code, exc.detail[: wire.MAX_STR_CHARS]))
            return False
        except Exception as exc:  # noqa: BLE001 - the daemon must survive a failed injection
            stats.error("handler_error")
            log.exception("%s: chaos %s failed", self.chaos.ref, msg.action)
            self._send(writer, ErrorReply("handler_error", f"{type(exc).__name__}: {exc}"[:200]))
            return False
        self._send(writer, Reply(body=outcome.body))
        return outcome.crash

    def _send(self, writer: asyncio.StreamWriter, msg: Message) -> None:
        try:
            frame = wire.encode(msg, self.runtime.settings.max_frame_bytes)
        except wire.WireError as exc:
            detail = f"cannot send the {msg.kind} reply: {exc.detail}"[:200]
            frame = wire.encode(ErrorReply(exc.code, detail))
        if not writer.is_closing():
            writer.write(frame)

    def _refuse(self, writer: asyncio.StreamWriter, source: str, code: str, detail: str) -> None:
        self.runtime.stats.error(f"admin_{code}")
        self._limiter.log(
            ("admin", source, code),
            logging.WARNING,
            "%s: admin listener: bad input from %s: %s: %s",
            self.chaos.ref,
            source,
            code,
            detail,
        )
        self._send(writer, ErrorReply(code, detail[: wire.MAX_STR_CHARS]))


def open_admin(
    settings: AdminSettings | None,
    runtime: Runtime,
    *,
    role: str,
    actions: Mapping[str, Action] | None = None,
    events: EventSink | None = None,
) -> AdminServer | None:
    """The daemon's admin listener as `settings` ask (None when it is off); call its `start`
    once the runtime runs."""
    if settings is None or settings.admin_listen is None:
        return None
    chaos = Chaos(runtime, role=role, actions=actions, events=events)
    return AdminServer(chaos, Ref(settings.admin_listen))
