"""Wire messages of the broker daemon itself (not of the routing cores).

- `BrokerHeartbeat`, broker -> neighbour broker: sent every ``--heartbeat`` seconds with the
  sender's incarnation, so that a dead, hung or restarted neighbour is noticed
  (`broker.cores.failures`) even when no publication happens to be routed to it, and with the
  count of publication copies the sender has handled from the receiver, which acknowledges
  them (`broker.cores.inflight`).  The routing cores see only the count.

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
    #: publication copies the sender has handled from the receiver (`broker.cores.inflight`),
    #: counted since the receiver's start `acked_for` (the receiver's incarnation; 0: none heard)
    acked: int = 0
    acked_for: int = 0
