"""The probe daemon (paper 004, §3.1.1): what a node does with (v, u, probe).

It adds the prober to its neighbours; if it is still ISOLATED it takes the prober as its
predecessor, becomes PROBED and accepts; otherwise it rejects.  So every node accepts at
most one probe, the first, and has at most one predecessor (the graph G1 of §3.1).
"""

from __future__ import annotations

from pubsub.pairing.messages import Kind, Message
from pubsub.pairing.node import PairingNode
from pubsub.pairing.states import State


def on_probe(node: PairingNode, msg: Message) -> list[Message]:
    """One probe in, its answer out."""
    v = msg.sender
    node.neighbors.add(v)
    if node.state is State.ISOLATED:
        node.pred = v
        node.state = State.PROBED
        return [Message(node.ident, v, Kind.ACCEPT)]
    return [Message(node.ident, v, Kind.REJECT)]
