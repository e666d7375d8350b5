"""Publishing through a node: the acknowledgement (`Ack`), the failure (`PublishError`),
the checks of what is published, and the connection that concurrent publications share
(`Publisher`).  `pubsub.client.library.Client.publish` uses them; its docstring and the
library's describe acknowledgements, retries and the error codes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pubsub.client.connection import Channel, ClientError
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply
from pubsub.kernel.message import Message
from pubsub.publications.fields import validate_msg_id
from pubsub.publications.messages import PublishAck, PublishFailed

#: Bytes a publishing connection may hold unsent before `publish` waits for the node.
DRAIN_ABOVE = 256 * 1024


class PublishError(ClientError):
    """A publication was not acknowledged (the codes: `pubsub.client.library`'s docstring)."""


class Unanswered(PublishError):
    """An attempt sent its request and got no answer (timeout, lost connection)."""


@dataclass(frozen=True, slots=True)
class Ack:
    """A publication acknowledged as durable at `stored_by`.

    `publisher` and `seq` name it (the node that issued it and its number there), `key`
    is its 16-byte key, `local_seq` its local number at `stored_by` when the node we
    published through stored it itself (None after a hand-over).
    """

    topic: str
    publisher: str
    seq: int
    key: bytes
    stored_by: str
    local_seq: int | None
    durable: bool = True
    duplicate: bool = False
    msg_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (`pubsub publish --json`), the key as hex."""
        return {
            "topic": self.topic,
            "publisher": self.publisher,
            "seq": self.seq,
            "key": self.key.hex(),
            "stored_by": self.stored_by,
            "local_seq": self.local_seq,
            "durable": self.durable,
            "duplicate": self.duplicate,
            "msg_id": self.msg_id,
        }


def check_payload(payload: bytes | str) -> bytes:
    data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    if len(data) > wire.MAX_PAYLOAD_BYTES:
        raise PublishError(
            "payload_too_large",
            f"payload_too_large: payload of {len(data)} bytes exceeds the largest a frame "
            f"carries ({wire.MAX_PAYLOAD_BYTES} bytes)",
        )
    return data


def check_msg_id(value: str) -> str:
    try:
        return validate_msg_id(value)
    except wire.WireError as exc:
        raise ClientError("bad_msg_id", exc.detail) from None


class Publisher:
    """The connection shared by concurrent `publish` calls, answers matched by id.

    Answers are matched in the callback that received them from the connection
    (`Channel.on_ready`): no task wakes up to read them."""

    def __init__(self, addr: str, channel: Channel) -> None:
        self.addr = addr
        self.channel = channel
        self.pending: dict[int, asyncio.Future[Message]] = {}
        self.error: ClientError | None = None
        channel.on_ready(self._answers)
        self._answers()  # what arrived with the handshake

    @property
    def usable(self) -> bool:
        return self.error is None and not self.channel.closing

    async def drain(self) -> None:
        """Wait while the node reads slower than we publish (backpressure)."""
        if self.channel.buffered() > DRAIN_ABOVE:
            await self.channel.drain()

    def _answers(self) -> None:
        """Hand each answer that arrived to the call waiting for it."""
        channel = self.channel
        try:
            while self.error is None and (msg := channel.take_message()) is not None:
                if isinstance(msg, (PublishAck, PublishFailed)):
                    future = self.pending.pop(msg.id, None)
                    if future is not None and not future.done():
                        future.set_result(msg)
                elif isinstance(msg, ErrorReply):
                    # Not tied to one request: the node rejected a frame (should not happen
                    # for frames this library builds).  Fail everything in flight.
                    self._fail(ClientError(msg.code, f"{self.addr} refused a request: {msg.detail}"))
        except asyncio.IncompleteReadError:
            self._fail(Unanswered("connection", f"{self.addr} closed the connection"))
        except wire.WireError as exc:
            self._fail(Unanswered("connection", f"bad frame from {self.addr}: {exc}"))
        except (ConnectionError, OSError) as exc:
            self._fail(Unanswered("connection", f"connection to {self.addr} lost: {exc}"))

    def _fail(self, error: ClientError) -> None:
        if self.error is None:
            self.error = error
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        self.channel.on_ready(None)
        self._fail(PublishError("connection", "the client was closed"))
        await self.channel.close()


__all__ = [
    "DRAIN_ABOVE",
    "Ack",
    "PublishError",
    "Publisher",
    "Unanswered",
    "check_msg_id",
    "check_payload",
]
