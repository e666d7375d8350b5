"""The states of §3.1.1 (paper 004), the coin's directions, and where the main thread is."""

from __future__ import annotations

from enum import Enum


class State(Enum):
    """The five states of §3.1.1 and what each makes of an incoming proposal.

    ISOLATED: never probed, no predecessor; accepts a proposal at once.
    PROBED: probed, not yet told by its predecessor whether it is paired; a proposal from
    the side its coin points to moves it to PROPOSED, any other is refused.
    PROPOSED: holds one proposal unanswered until its predecessor's notice comes.
    PROPOSING: told by its predecessor it is not paired; proposes the way its coin points,
    accepts a proposal from that side, refuses any other.
    PAIRED: paired, by its predecessor or by coins; refuses every proposal.
    """

    ISOLATED = "ISOLATED"
    PROBED = "PROBED"
    PROPOSED = "PROPOSED"
    PROPOSING = "PROPOSING"
    PAIRED = "PAIRED"


class Direction(Enum):
    """The coin of line 1: ``chosen`` is drawn from {pred, succ}."""

    PRED = "pred"
    SUCC = "succ"


class Line(Enum):
    """Where the main thread (lines 1-7) is: the waits of lines 2, 4 and 5, or done.

    START: not begun (line 1 not run).  AWAIT_REPLIES: line 2, probes out.  AWAIT_STATE:
    line 4, waiting for the state to leave ISOLATED / PROBED (and PROPOSED: INFERRED, see
    `pubsub.pairing.mainthread`).  AWAIT_ANSWER: line 5, a proposal out.  MERGE: line 6,
    paired -- the merge with ``obj`` is §3.2's, not built; the driver takes over.  RESTART:
    line 7 reached unpaired -- the node begins again at line 1 when the driver starts the
    next phase.
    """

    START = "start"
    AWAIT_REPLIES = "await_replies"
    AWAIT_STATE = "await_state"
    AWAIT_ANSWER = "await_answer"
    MERGE = "merge"
    RESTART = "restart"
