"""The pairing protocol's two entry points (paper 004, §3.1.1): `begin` a phase at line 1,
`handle` one delivered message.

A message goes to its daemon (probe, propose, pair, no_pair), or, for the answers the main
thread waits for, to the thread: ``reject`` and a probe's ``accept`` to line 2;
``reject_propose``, ``paired`` and a proposal's ``accept`` to line 5.  The copy uses one
``accept`` for both answers; which one a message is follows from where the thread waits
(line 2 until every probe is answered, line 5 only later).  Each call runs atomically, as
the copy asks of its daemons, then lets the main thread go on as far as it can.
"""

from __future__ import annotations

from pubsub.pairing.mainthread import advance, begin, probe_answer, proposal_answer
from pubsub.pairing.messages import Kind, Message
from pubsub.pairing.node import PairingNode, ProtocolViolation
from pubsub.pairing.notices import on_no_pair, on_pair
from pubsub.pairing.probe import on_probe
from pubsub.pairing.propose import on_propose
from pubsub.pairing.states import Line

__all__ = ["begin", "handle"]


def handle(node: PairingNode, msg: Message) -> list[Message]:
    """One message delivered to `node`: what it sends in consequence, in order."""
    if msg.receiver != node.ident:
        raise ProtocolViolation(f"{node.ident}: a message for {msg.receiver}: {msg}")
    if node.line is Line.START:
        raise ProtocolViolation(f"{node.ident}: a message before it began: {msg}")
    sends: list[Message]
    kind = msg.kind
    if kind is Kind.PROBE:
        sends = on_probe(node, msg)
    elif kind is Kind.PROPOSE:
        sends = on_propose(node, msg)
    elif kind is Kind.PAIR:
        sends = on_pair(node, msg)
    elif kind is Kind.NO_PAIR:
        sends = on_no_pair(node, msg)
    elif kind is Kind.REJECT or (kind is Kind.ACCEPT and node.line is Line.AWAIT_REPLIES):
        probe_answer(node, msg)
        sends = []
    else:  # ACCEPT at line 5, REJECT_PROPOSE, PAIRED
        proposal_answer(node, msg)
        sends = []
    return sends + advance(node)
