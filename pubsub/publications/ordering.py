"""Each publisher's publications in order (issue 12): an arrival waits for its predecessor.

A node numbers (and so delivers) publications in the order it stores them.  The arc
broadcast usually brings one publisher's publications in order, but anti-entropy, a late
join or a lost message bring them in key order, which is random.  Every publication names
its publisher's previous one in the same topic (`Publication.prev`); the `Sequencer` lets
an arrival through only once that predecessor has gone through (or was stored earlier, or
there is none), and lets the followers that waited for it through right behind it.

How long an arrival waits depends on progress, not on a fixed clock: the held-back
arrivals of one *stream* (one publisher in one topic) wait while that stream's
publications keep coming -- anti-entropy filling a late joiner brings a long history in
key order over many rounds, and every round brings predecessors -- and go through, sorted
by sequence number, once the stream has been quiet for `wait` seconds (its missing
predecessors are not on their way: they failed, or their publisher restarted) or once the
oldest of them has waited `max_wait` seconds, whichever comes first.  A stream of which
nothing has gone through here yet waits the whole `max_wait`: a node that just joined
often hears a publisher's newest publication (live) before anti-entropy has begun to bring
the history it follows, and the quiet before that first exchange says nothing.  Each one released
while its predecessor has not gone through is counted as ``released_late``.

Guaranteed: at every node, a publisher's publications in a topic are numbered in their
sequence order, except around a predecessor that did not come before the stream went
quiet for `wait` seconds or within `max_wait` (counted as ``released_late``) and across a
restart of the publishing node (its first publication after a restart names no
predecessor).  Not guaranteed: any order between different publishers -- each node
interleaves them as they arrive, so two nodes may number them differently.

Pure: time comes in as `now`.  Memory is bounded: at most `limit` arrivals wait (beyond,
the stream that has waited longest goes through), and for each publisher only the last
`window` sequence numbers are remembered (older predecessors count as through: they were
released long ago).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import Publication
from pubsub.publications.topicstate import Arrival

#: Seconds a stream with held-back arrivals may be quiet before they go through.
DEFAULT_WAIT = 2.0
#: Seconds an arrival is held back at most, however busy its stream.
DEFAULT_MAX_WAIT = 30.0
#: Sequence numbers remembered per (topic, publisher).
RELEASED_WINDOW = 4096
#: Arrivals waiting at most (the longest-waiting stream goes through beyond).
MAX_WAITING = 100_000

Stream = tuple[Topic, Ref]


@dataclass(slots=True)
class _Seen:
    """The sequence numbers of one stream that went through lately."""

    top: int = -1
    recent: set[int] = field(default_factory=set)
    order: deque[int] = field(default_factory=deque)


@dataclass(slots=True)
class _Held:
    """One stream's held-back arrivals, by the sequence number they wait for."""

    first_held: float
    last_arrival: float
    by_prev: dict[int, list[Arrival]] = field(default_factory=dict)
    count: int = 0


class Sequencer:
    """Holds arrivals back until their predecessor went through (see the module docstring)."""

    def __init__(
        self,
        wait: float = DEFAULT_WAIT,
        max_wait: float = DEFAULT_MAX_WAIT,
        window: int = RELEASED_WINDOW,
        limit: int = MAX_WAITING,
    ) -> None:
        if wait < 0 or max_wait < wait or window < 1 or limit < 1:
            raise ValueError("need 0 <= wait <= max_wait, window and limit >= 1")
        self.wait = wait
        self.max_wait = max_wait
        self.window = window
        self.limit = limit
        self._seen: dict[Stream, _Seen] = {}
        self._held: dict[Stream, _Held] = {}
        self._count = 0
        self._out: list[tuple[Topic, Arrival]] = []
        #: ``in_order`` (went through at once), ``waited`` (held back), ``released_late``.
        self.counters: Counter[str] = Counter()

    @property
    def waiting(self) -> int:
        """Arrivals held back now."""
        return self._count

    def known(self, topic: Topic, publication: Publication) -> None:
        """`publication` is stored already (restored from the store): it counts as through."""
        self._mark(topic, publication)

    def admit(self, topic: Topic, arrival: Arrival) -> None:
        """An arrival that must go through now, whatever its predecessor: one this node
        must write before it may answer for it (it issued it, or took it by hand-over)."""
        self.counters["admitted"] += 1
        self._let_through(topic, arrival)

    def push(self, topic: Topic, arrival: Arrival, now: float) -> None:
        """A new arrival: through now if its predecessor is, else held back."""
        p = arrival.publication
        if not self._held and self._through(topic, p):  # nothing waits: the usual case, in short
            self.counters["in_order"] += 1
            self._out.append((topic, arrival))
            self._mark(topic, p)
            return
        stream = (topic, p.publisher)
        held = self._held.get(stream)
        if held is not None:
            held.last_arrival = now  # the stream makes progress
        if self._through(topic, p):
            self.counters["in_order"] += 1
            self._let_through(topic, arrival)
            return
        self.counters["waited"] += 1
        if held is None:
            held = self._held[stream] = _Held(first_held=now, last_arrival=now)
        held.by_prev.setdefault(p.prev, []).append(arrival)
        held.count += 1
        self._count += 1
        while self._count > self.limit:
            self._flush(min(self._held, key=lambda s: self._held[s].first_held))

    def release(self, now: float) -> list[tuple[Topic, Arrival]]:
        """What went through since the last call, in order; the held-back arrivals of a
        stream that has been quiet for `wait` seconds, or that have waited `max_wait`,
        go through too (sorted by sequence number)."""
        if self._held:
            due = [
                stream
                for stream, held in self._held.items()
                if now - held.first_held >= self.max_wait
                or (now - held.last_arrival >= self.wait and stream in self._seen)
            ]
            for stream in due:
                self._flush(stream)
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ internals
    def _through(self, topic: Topic, p: Publication) -> bool:
        if p.prev < 0:
            return True
        seen = self._seen.get((topic, p.publisher))
        if seen is None:
            return False
        return p.prev in seen.recent or p.prev < seen.top - self.window

    def _let_through(self, topic: Topic, arrival: Arrival) -> None:
        ready = [arrival]
        while ready:
            item = ready.pop()
            self._out.append((topic, item))
            p = item.publication
            self._mark(topic, p)
            stream = (topic, p.publisher)
            held = self._held.get(stream)
            if held is None:
                continue
            followers = held.by_prev.pop(p.seq, None)
            if followers:
                held.count -= len(followers)
                self._count -= len(followers)
                ready.extend(reversed(followers))
                if not held.count:
                    del self._held[stream]

    def _flush(self, stream: Stream) -> None:
        """Let all of a stream's held-back arrivals through, lowest sequence number first."""
        held = self._held.pop(stream)
        self._count -= held.count
        topic = stream[0]
        arrivals = sorted(
            (a for group in held.by_prev.values() for a in group), key=lambda a: a.publication.seq
        )
        for arrival in arrivals:
            if not self._through(topic, arrival.publication):
                self.counters["released_late"] += 1
            self._out.append((topic, arrival))
            self._mark(topic, arrival.publication)

    def _mark(self, topic: Topic, p: Publication) -> None:
        seen = self._seen.get((topic, p.publisher))
        if seen is None:
            seen = self._seen[(topic, p.publisher)] = _Seen()
        if p.seq in seen.recent:
            return
        seen.recent.add(p.seq)
        seen.order.append(p.seq)
        if p.seq > seen.top:
            seen.top = p.seq
        while len(seen.order) > self.window:
            seen.recent.discard(seen.order.popleft())
