"""Wire messages of the broker daemon itself (not of the routing cores).

- `BrokerHeartbeat`, broker -> neighbour broker: sent every ``--heartbeat`` seconds so that a
  dead neighbour is noticed (connects fail, the runtime reports it unreachable) even when
  no publication happens to be routed to it.  The cores never see it.
- `BrokerControl`, client -> broker: an operator's run-time change.  The one action is
  ``link_rate`` with ``params = {"link": "x,i", "rate": R}`` (R messages per second, or
  null to remove the limit): throttle the output queue towards one neighbour, so that a
  test or a demonstration can congest an iLink on purpose (`broker.links`).

Client requests and their answers (`broker.app` documents the exchange) reuse
`broker.cores.messages` (the client operations, `Deliver`, `ClientRefused`) and the daemons'
generic `StatusRequest` / `Reply` / `ErrorReply` (`pubsub.skipring.messages`).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from pubsub.kernel.message import Message, message


@message("broker_heartbeat")
class BrokerHeartbeat(Message):
    """Broker -> neighbour: I am alive (`sender` is the broker id "x,i")."""

    sender: str


@message("broker_control")
class BrokerControl(Message):
    """Client -> broker: an operator's run-time change (see the module docstring)."""

    action: str
    params: dict[str, Any] = field(default_factory=dict)


#: The actions `BrokerControl` knows.
CONTROL_ACTIONS = ("link_rate",)
