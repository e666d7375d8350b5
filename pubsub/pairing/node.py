"""One node's variables in the pairing protocol (paper 004, §3.1.1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pubsub.pairing.messages import NodeId
from pubsub.pairing.states import Direction, Line, State


class ProtocolViolation(Exception):
    """An input the copy's model cannot produce: FIFO channels, one phase at a time, every
    node beginning at line 1 (`pubsub.sim.pairing`).  The cores raise it rather than guess,
    so that a driver or a test that breaks the model fails loudly."""


@dataclass(slots=True)
class PairingNode:
    """The variables the copy's pseudo-code uses, named as there.

    ``neighbors`` is N_u: at first whom the node knows; the probe daemon adds every prober,
    line 5 removes a neighbour that refused a proposal with ``reject_propose``.  ``pred`` is
    the prober it accepted, ``succ`` the one successor line 3 kept, ``obj`` its partner,
    ``waiting`` the proposer a PROPOSED node holds.  ``chosen`` is a direction; the node it
    names is `chosen_node` (the copy compares ``chosen`` with nodes and sends to it).

    ``line`` is where the main thread is; ``probed`` the probes line 2 still waits on,
    ``accepted`` the nodes that accepted, v1 .. vk in the order their answers came;
    ``proposed_to`` the node line 5 proposed to.
    """

    ident: NodeId
    neighbors: set[NodeId]
    state: State = State.ISOLATED
    chosen: Direction = Direction.PRED
    pred: NodeId | None = None
    succ: NodeId | None = None
    obj: NodeId | None = None
    waiting: NodeId | None = None
    line: Line = Line.START
    probed: set[NodeId] = field(default_factory=set)
    accepted: list[NodeId] = field(default_factory=list)
    proposed_to: NodeId | None = None

    def chosen_node(self) -> NodeId | None:
        """The node ``chosen`` points to: ``pred`` or ``succ`` (None while that is unknown)."""
        return self.pred if self.chosen is Direction.PRED else self.succ
