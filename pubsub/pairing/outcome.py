"""What a finished phase of the pairing must be (paper 004, §3.1): a matching -- paired nodes
name each other, nobody is paired twice -- with nobody left waiting on a predecessor or an
answer.

The copy promises a matching that covers a constant fraction of the nodes on average (about
half in the worst case); paired nodes need not share an edge of the knowledge graph.  The
fraction is measured (`bench.pairing`), not checked here.
"""

from __future__ import annotations

from collections.abc import Mapping

from pubsub.pairing.messages import NodeId
from pubsub.pairing.node import PairingNode
from pubsub.pairing.states import Line, State

#: Where a node may rest once nothing is in transit: line 4, never probed (ISOLATED); line 6
#: (PAIRED); line 7 (not paired).
RESTING = frozenset({Line.AWAIT_STATE, Line.MERGE, Line.RESTART})


def problems(nodes: Mapping[NodeId, PairingNode]) -> list[str]:
    """Every way the phase's end state falls short, one line each (empty: it is a matching
    and every node is at rest)."""
    found: list[str] = []
    for u, node in sorted(nodes.items()):
        if node.line not in RESTING:
            found.append(f"{u} stopped at {node.line.value} in {node.state.value}")
        elif node.line is Line.AWAIT_STATE and node.state is not State.ISOLATED:
            found.append(f"{u} waits at line 4 in {node.state.value}")
        if (node.line is Line.MERGE) != (node.state is State.PAIRED):
            found.append(f"{u} is {node.state.value} at {node.line.value}")
        if node.state is not State.PAIRED:
            continue
        partner = nodes.get(node.obj) if node.obj is not None else None
        if node.obj == u or partner is None:
            found.append(f"{u} is paired with {node.obj}")
        elif partner.state is not State.PAIRED or partner.obj != u:
            found.append(f"{u} is paired with {node.obj}, which is {partner.state.value} with {partner.obj}")
    return found


def pairs(nodes: Mapping[NodeId, PairingNode]) -> list[tuple[NodeId, NodeId]]:
    """The pairs (smaller identity first, in order), assuming `problems` found none."""
    return sorted(
        (u, n.obj) for u, n in nodes.items() if n.state is State.PAIRED and n.obj is not None and u < n.obj
    )
