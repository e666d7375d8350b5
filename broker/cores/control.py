"""Wire messages of the broker daemon itself (not of the routing cores).

- `BrokerHeartbeat`, broker -> neighbour broker: sent every ``--heartbeat`` seconds with the
  sender's incarnation, so that a dead, hung or restarted neighbour is noticed
  (`broker.cores.failures`) even when no publication happens to be routed to it.  The
  routing cores never see it.

Run-time changes by an operator (the link rate) are admin actions (`broker.faults`), served
on the admin listener only.

Client requests and their answers (`broker.sessions` documents the exchange) reuse
`broker.cores.messages` (the client operations, `Deliver`, `ClientRefused`) and the daemons'
generic `StatusRequest` / `Reply` / `ErrorReply` (`pubsub.kernel.control`).
"""

from __future__ import annotations

from pubsub.kernel.message import Message, message


@message("broker_heartbeat")
class BrokerHeartbeat(Message):
    """Broker -> neighbour: I am alive (`sender` is the broker id "x,i"); `incarnation`
    grows with each start of the sender, so a restart is noticed however fast
    (`broker.cores.failures`)."""

    sender: str
    incarnation: int = 0
