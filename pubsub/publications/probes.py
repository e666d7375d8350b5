"""The failure detector of a supervisor that configures its nodes (the clique's, tco's and omen's):
a node reported unreachable -- by a peer, or by the supervisor's own runtime -- is probed,
and one that has not answered within `timeout` seconds is dead.  Pure: the supervisor core
sends the overlay's own ping with the nonce `suspect` returns and hands the pong to
`answered`; `expired` names the dead at a Timeout."""

from __future__ import annotations

import random
from collections.abc import Container, Sequence

from pubsub.kernel.message import Ref


class Probes:
    """The nodes under suspicion, each with its probe's nonce and deadline."""

    def __init__(self, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError("the probe timeout must be positive")
        self.timeout = timeout
        #: suspected node -> (nonce of its probe, when the probe expires).
        self.pending: dict[Ref, tuple[int, float]] = {}
        self._nonce = 0

    def __contains__(self, ref: object) -> bool:
        return ref in self.pending

    def __len__(self) -> int:
        return len(self.pending)

    def suspect(self, ref: Ref, now: float) -> int | None:
        """Start probing `ref`: the nonce its ping carries (None: it is probed already)."""
        if ref in self.pending:
            return None
        self._nonce += 1
        self.pending[ref] = (self._nonce, now + self.timeout)
        return self._nonce

    def answered(self, ref: Ref, nonce: int) -> None:
        """`ref` answered the probe with `nonce`: not suspected any more."""
        probe = self.pending.get(ref)
        if probe is not None and probe[0] == nonce:
            del self.pending[ref]

    def alive(self, ref: Ref) -> None:
        """`ref` spoke on its own: not suspected any more."""
        self.pending.pop(ref, None)

    def expired(self, now: float) -> list[Ref]:
        """The nodes whose probe ran out, in order; they are no longer probed."""
        dead = sorted(ref for ref, (_, until) in self.pending.items() if until <= now)
        for ref in dead:
            del self.pending[ref]
        return dead

    def suspects(self) -> list[Ref]:
        return sorted(self.pending)


def choose_member(
    members: Sequence[Ref], suspected: Container[Ref], avoid: Ref | None, rng: random.Random
) -> Ref | None:
    """The member a supervisor names for a hand-over (`GetMember`): a random one of `members`
    that is neither under suspicion nor `avoid` (the one that just failed to take it); any
    of them if there is no other; None for no member."""
    preferred = [r for r in members if r not in suspected and r != avoid]
    choices = preferred or list(members)
    return rng.choice(choices) if choices else None
