"""The control plane every daemon speaks, whatever its mode.

A connection opens with `Hello` (who is calling: a peer daemon by its reference, or a
client); a client asks for `StatusRequest` and gets a `Reply` or an `ErrorReply`; an
operator's `ChaosRequest` is served only on a daemon's admin listener
(`pubsub.runtime.admin`).  Mode-specific requests (joining a topic, publishing,
advertising) live with their modes.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from pubsub.kernel.message import Message, Ref, message


@message("status")
class StatusRequest(Message):
    """Client -> daemon: report state."""


@message("reply")
class Reply(Message):
    """Daemon -> client: the answer to a control request."""

    body: dict[str, Any] = field(default_factory=dict)


@message("error")
class ErrorReply(Message):
    """Any daemon -> peer: a request or frame was rejected."""

    code: str
    detail: str


# --- operator -> daemon, on the admin listener only (`pubsub.runtime.admin`) ------------------------
@message("chaos")
class ChaosRequest(Message):
    """Operator -> daemon: inject a fault (`action`: crash, corrupt_node, ...; `params` as
    `pubsub.runtime.admin` documents), or ask who the daemon is (`info`).  Served only on the
    daemon's admin listener; on its peer/client port it is counted and refused
    (``forbidden``) by the runtime, which never passes an `admin_only` message on."""

    admin_only: ClassVar[bool] = True

    action: str
    params: dict[str, Any] = field(default_factory=dict)


# --- many messages to one peer in one frame (the runtime; cores never see it) -----------------
@message("bundle")
class Bundle(Message):
    """Peer -> peer: several messages in one frame, each a complete frame payload of its own
    (`pubsub.runtime.bundling`).  The receiving runtime checks and handles each as if it
    had arrived alone; a bundle never holds a bundle, and is refused from clients."""

    payloads: list[bytes]


# --- connection setup (network runtime only; cores never see it) -----------------------------
@message("hello")
class Hello(Message):
    """First frame on every TCP connection: who is calling (`pubsub.runtime`).

    A peer names its listen address (its reference) with role "peer"; a client (the CLI,
    an application) sends ref None and role "client" and then exchanges control requests
    and replies on the same connection.
    """

    ref: Ref | None
    role: str
