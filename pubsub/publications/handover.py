"""Publishing through a node that does not subscribe to the topic: the hand-over, without I/O.

A node that is not a member of topic t cannot store a publication of t in a trie (it runs
none for t).  It hands the publication over to a member instead:

1. GetMember(t, self, nonce) to the supervisor, which answers MemberIs(t, u, nonce) with a
   member u chosen at random, or None when t has no members (the request fails at once,
   code ``no_members``);
2. HandOver(t, self, p, request) to u; u stores p durably as if it had issued it (and
   floods it), then answers HandOverAck(t, u, request, ok=True).  An answer with ok=False
   (u is not, or no longer, a member) or no answer within `step_timeout` seconds starts
   the next attempt at step 1, asking the supervisor to avoid u (``GetMember.avoid``),
   so another member is tried whenever there is one.

After `attempts` failed attempts the request ends without an acknowledgement.  Every
attempt hands over the *same* publication (same key), so a member that stored it but whose
acknowledgement was lost and a second member that stores it again hold one publication,
not two: the tries deduplicate by key.

Honest outcomes.  Once a HandOver has left, a member may hold the publication even though
no acknowledgement came back (it was slow, frozen, or its answer was lost): such a request
ends ``unknown``, never "failed".  Only a request that never sent a HandOver -- the topic
has no members (``no_members``), the supervisor never named one (``handover_failed``) --
definitely stored nothing.  A member's `HandOverAck` also says whether its store is
durable (`durable`), which the node passes on to its client.

`HandOverClient` keeps the outstanding requests.  Like the protocol cores it returns the
messages to send and takes the time as an argument; finished requests are collected with
`drain_outcomes`.  Replies whose nonce or request number is not outstanding (late, stale or
forged) are ignored and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pubsub.kernel.message import Ref, Send, Topic
from pubsub.publications.messages import GetMember, HandOver, HandOverAck, MemberIs, Publication

DEFAULT_STEP_TIMEOUT = 1.5
DEFAULT_ATTEMPTS = 4


@dataclass(slots=True)
class Outcome:
    """How a hand-over ended: ok and the member that stored it, or a failure code."""

    request: int
    topic: Topic
    publication: Publication
    ok: bool
    member: Ref | None = None
    code: str = ""
    detail: str = ""
    durable: bool = True
    #: The publication the member held already under the same message id (then this
    #: one was not stored: the client's answer names the original).
    original: Publication | None = None


@dataclass(slots=True)
class _Pending:
    request: int
    topic: Topic
    publication: Publication
    attempt: int
    nonce: int
    deadline: float
    member: Ref | None = None  # None while waiting for MemberIs
    failed_member: Ref | None = None  # the member of the previous attempt, if it failed
    last_problem: str = ""
    handed_over: bool = False  # a HandOver left: a member may hold it from then on


class HandOverClient:
    """The outstanding hand-overs of one node."""

    def __init__(
        self,
        ref: Ref,
        supervisor: Ref | Callable[[Topic], Ref],
        *,
        step_timeout: float = DEFAULT_STEP_TIMEOUT,
        attempts: int = DEFAULT_ATTEMPTS,
    ) -> None:
        if step_timeout <= 0 or attempts < 1:
            raise ValueError("step_timeout must be positive and attempts at least 1")
        self.ref = ref
        #: The supervisor to ask about a topic: one for all, or the overlay's owner of each
        #: (sharded supervisors, `pubsub.kernel.shards`).
        self.owner_of: Callable[[Topic], Ref] = (
            supervisor if callable(supervisor) else (lambda topic: supervisor)
        )
        self.step_timeout = step_timeout
        self.attempts = attempts
        self.pending: dict[int, _Pending] = {}
        self.counters: Counter[str] = Counter()
        self._by_nonce: dict[int, int] = {}  # nonce of the current step -> request
        self._next = 1
        self._outcomes: list[Outcome] = []

    def _number(self) -> int:
        n = self._next
        self._next += 1
        return n

    # ------------------------------------------------------------------ entry points
    def start(self, topic: Topic, publication: Publication, now: float) -> tuple[int, list[Send]]:
        """Begin handing `publication` over; returns the request number and the sends."""
        request = self._number()
        entry = _Pending(request, topic, publication, 0, 0, 0.0)
        self.pending[request] = entry
        self.counters["started"] += 1
        return request, self._ask(entry, now)

    def handle(self, msg: MemberIs | HandOverAck, now: float) -> list[Send]:
        """A MemberIs from the supervisor or a HandOverAck from a member."""
        if isinstance(msg, MemberIs):
            return self._member_is(msg, now)
        return self._ack(msg, now)

    def timeout(self, now: float) -> list[Send]:
        """Start the next attempt of every request whose current step has timed out."""
        sends: list[Send] = []
        for entry in [e for e in self.pending.values() if e.deadline <= now]:
            what = "the supervisor" if entry.member is None else entry.member
            self.counters["step_timeouts"] += 1
            sends.extend(self._retry(entry, f"no answer from {what}", now))
        return sends

    def drain_outcomes(self) -> list[Outcome]:
        """Requests finished since the last call."""
        out, self._outcomes = self._outcomes, []
        return out

    # ------------------------------------------------------------------ steps
    def _ask(self, entry: _Pending, now: float) -> list[Send]:
        self._by_nonce.pop(entry.nonce, None)
        entry.attempt += 1
        entry.failed_member = entry.member or entry.failed_member
        entry.member = None
        entry.nonce = self._number()
        entry.deadline = now + self.step_timeout
        self._by_nonce[entry.nonce] = entry.request
        ask = GetMember(entry.topic, self.ref, entry.nonce, entry.failed_member)
        return [Send(self.owner_of(entry.topic), ask)]

    def _member_is(self, msg: MemberIs, now: float) -> list[Send]:
        entry = self._current(msg.nonce)
        if entry is None or entry.member is not None or msg.topic != entry.topic:
            self.counters["stale_replies"] += 1
            return []
        if msg.member is None:
            if entry.handed_over:
                return self._retry(entry, "the supervisor names no other member", now, last=True)
            self._finish(entry, False, code="no_members", detail=f"topic {entry.topic!r} has no members")
            return []
        self._by_nonce.pop(entry.nonce, None)
        entry.member = msg.member
        entry.nonce = self._number()
        entry.deadline = now + self.step_timeout
        self._by_nonce[entry.nonce] = entry.request
        entry.handed_over = True
        return [Send(msg.member, HandOver(entry.topic, self.ref, entry.publication, entry.nonce))]

    def _ack(self, msg: HandOverAck, now: float) -> list[Send]:
        entry = self._current(msg.request)
        if entry is None or entry.member is None or msg.member != entry.member:
            self.counters["stale_replies"] += 1
            return []
        if msg.ok:
            self._finish(entry, True, member=msg.member, durable=msg.durable, original=msg.original)
            return []
        self.counters["refused"] += 1
        return self._retry(entry, f"{msg.member} refused: {msg.code}", now)

    def _retry(self, entry: _Pending, problem: str, now: float, *, last: bool = False) -> list[Send]:
        entry.last_problem = problem
        if last or entry.attempt >= self.attempts:
            if entry.handed_over:
                self._finish(
                    entry,
                    False,
                    code="unknown",
                    detail=f"no member of {entry.topic!r} acknowledged the publication after "
                    f"{entry.attempt} attempts (last: {problem}); one that received it may "
                    "still store it",
                )
            else:
                self._finish(
                    entry,
                    False,
                    code="handover_failed",
                    detail=f"no member of {entry.topic!r} could be reached after "
                    f"{entry.attempt} attempts (last: {problem}); nothing was stored",
                )
            return []
        self.counters["retries"] += 1
        return self._ask(entry, now)

    def _current(self, nonce: int) -> _Pending | None:
        request = self._by_nonce.get(nonce)
        return None if request is None else self.pending.get(request)

    def _finish(
        self,
        entry: _Pending,
        ok: bool,
        *,
        member: Ref | None = None,
        code: str = "",
        detail: str = "",
        durable: bool = True,
        original: Publication | None = None,
    ) -> None:
        self._by_nonce.pop(entry.nonce, None)
        del self.pending[entry.request]
        self.counters["succeeded" if ok else ("unknown" if code == "unknown" else "failed")] += 1
        self._outcomes.append(
            Outcome(entry.request, entry.topic, entry.publication, ok, member, code, detail, durable, original)
        )
