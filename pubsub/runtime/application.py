"""What the runtime drives (`Application`, `SessionApplication`): a protocol core plus the
daemon's control-plane answers.  Every daemon's app (`pubsub.node.app.NodeApp`,
`pubsub.supervisor.app.SupervisorApp`, `broker.app.BrokerApp`) has this shape."""

from __future__ import annotations

from typing import Protocol

from pubsub.kernel.message import Message, Ref, Send
from pubsub.runtime.connection import ClientSession


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
