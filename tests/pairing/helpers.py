"""Shared bits of the pairing tests: nodes in a given state, a coin that lands as told."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from pubsub.pairing.messages import Kind, Message, NodeId
from pubsub.pairing.node import PairingNode
from pubsub.pairing.states import Direction, Line, State


class Coins(random.Random):
    """A Random whose `choice` returns the given directions in turn (then repeats the last)."""

    def __init__(self, directions: Iterable[Direction]) -> None:
        super().__init__(0)
        self.directions = list(directions)

    def choice(self, seq: Sequence[Any]) -> Any:
        direction = self.directions.pop(0) if len(self.directions) > 1 else self.directions[0]
        assert direction in seq
        return direction


def node(ident: NodeId = 0, *, state: State = State.ISOLATED, line: Line = Line.AWAIT_STATE,
         neighbors: Iterable[NodeId] = (), **fields: Any) -> PairingNode:
    """A node already begun, in `state`, at `line`."""
    made = PairingNode(ident, set(neighbors), state=state, line=line)
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def msg(sender: NodeId, receiver: NodeId, kind: Kind, about: NodeId | None = None) -> Message:
    return Message(sender, receiver, kind, about)
