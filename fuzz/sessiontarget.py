"""The ``broker-sessions`` fuzz target: a broker's client side (`broker.sessions.ClientSessions`
with `broker.durable` sessions) on an OctopiA core, driven by a sequence of client
connections opening, resuming (with real, stale and malformed tokens, any `after`), subscribing,
unsubscribing, advertising, publishing, going slow, closing, and time passing (expiry).

What must hold after every step:

* every request on a connection is answered by exactly one `Reply`, `ClientRefused` or
  `ErrorReply`, in order;
* on every connection, the numbered deliveries of a session come in increasing order, none
  twice, and a resume hands over nothing at or before the `after` it asked for;
* the core holds exactly the subscriptions of the open connections and of the sessions that
  have not expired.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from broker.cores.language.text import parse_filter
from broker.cores.messages import (
    TO_CLIENT,
    Attrs,
    ClientAdvertise,
    ClientPublish,
    ClientRefused,
    ClientSessionRequest,
    ClientSubscribe,
    ClientUnsubscribe,
    Deliver,
)
from broker.cores.octopia import OctopiaBroker
from broker.sessions import ClientSessions
from fuzz.checks import require
from fuzz.source import Source
from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Message, Send

FILTERS = [parse_filter(t) for t in ("k > 1", "k exists", 'k = 3 and s = "x"', "s exists")]
ADVERT = parse_filter("k exists and s exists")


class FakeConnection:
    """What `ClientSessions` needs of a client connection, recording what it is sent."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.closed = False
        self.slow = False
        self._callbacks: list[Callable[[], None]] = []

    def send(self, msg: Message) -> bool:
        if self.closed:
            return False
        self.sent.append(msg)
        return True

    def buffered(self) -> int:
        return 1 << 30 if self.slow else 0

    def on_close(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for callback in self._callbacks:
                callback()


def broker_sessions(data: bytes) -> int:
    """A broker's client side under a sequence of connections and requests (module docstring)."""
    from broker.topologyfile import figure3

    src = Source(data)
    topo = figure3()
    me = topo.brokers[0]
    core = OctopiaBroker(topo, me)
    counters: Counter[str] = Counter()
    clock = [0.0]
    sessions: ClientSessions

    def route(sends: Iterable[Send]) -> None:
        for dest, msg in sends:
            if isinstance(msg, TO_CLIENT):
                sessions.deliver(dest, msg)

    sessions = ClientSessions(me, core, counters, 1 << 20, route, lambda: clock[0],
                              expiry=src.choice((0.5, 5.0)), keep=src.choice((1, 3, 50)))
    conns: list[FakeConnection] = []
    asked: Counter[int] = Counter()
    tokens: list[str] = ["", "0" * 32, "zz"]
    numbering = Numbering()
    handled = 0
    for _ in range(src.between(1, 60)):
        if not src.left:
            break
        action = src.below(10)
        if action == 0 or not conns:
            conns.append(FakeConnection())
            continue
        conn = src.choice(conns)
        if action == 1:
            conn.close()
            continue
        if action == 2:
            clock[0] += src.choice((0.1, 1.0, 10.0))
            sessions.expire(clock[0])
            continue
        if action == 3:
            conn.slow = not conn.slow
            continue
        if conn.closed:
            continue
        msg: Message
        if action == 4:
            msg = ClientSessionRequest("c", src.choice(tokens), src.choice((0, 1, 2, 5, 10**6, -1)))
        elif action == 5:
            msg = ClientSubscribe("c", src.choice(("s1", "s2", "s3")), src.choice(FILTERS))
        elif action == 6:
            msg = ClientUnsubscribe("c", src.choice(("s1", "s2", "s3")))
        elif action == 7:
            msg = ClientAdvertise(src.choice(("p", "q")), "a", ADVERT)
        else:
            msg = ClientPublish(src.choice(("p", "q")), "", Attrs({"k": src.below(5), "s": src.choice(("x", "y"))}))
        before = len(conn.sent)
        numbering.check(conn)
        sessions.request(msg, conn, clock[0])  # type: ignore[arg-type]
        asked[id(conn)] += 1
        handled += 1
        answers = [m for m in conn.sent[before:] if isinstance(m, (Reply, ClientRefused, ErrorReply))]
        require(len(answers) == 1, f"{msg.kind} answered by {len(answers)} frames")
        answer = answers[0]
        if isinstance(answer, Reply) and answer.body.get("op") == "session":
            tokens.append(str(answer.body["session"]))
            if isinstance(msg, ClientSessionRequest):  # a hand-over starts after `after`, a new session at 1
                after = min(msg.after, answer.body["after"]) if answer.body.get("resumed") else 0
                numbering.resumed(conn, after, before)
        check_sessions(conns, sessions, core, numbering)
    return handled


class Numbering:
    """Per connection: the deliveries read so far must rise, from the `after` of the last resume."""

    def __init__(self) -> None:
        self.cursor: dict[int, int] = {}
        self.last: dict[int, int] = {}

    def resumed(self, conn: FakeConnection, after: int, at: int) -> None:
        self.check(conn, upto=at)
        self.last[id(conn)] = after

    def check(self, conn: FakeConnection, upto: int | None = None) -> None:
        start = self.cursor.get(id(conn), 0)
        end = len(conn.sent) if upto is None else upto
        for msg in conn.sent[start:end]:
            if isinstance(msg, Deliver) and msg.seq:
                last = self.last.get(id(conn), 0)
                require(msg.seq > last, f"delivery {msg.seq} after {last} on one connection: out of order or twice")
                self.last[id(conn)] = msg.seq
        self.cursor[id(conn)] = end


def check_sessions(conns: list[FakeConnection], sessions: ClientSessions, core: OctopiaBroker,
                   numbering: Numbering) -> None:
    for conn in conns:
        numbering.check(conn)
    expected: set[tuple[str, str]] = set()
    for ref, subs in sessions._session_subs.items():
        expected |= {(ref, s) for s in subs}
    for ds in sessions._durable.values():
        expected |= {(ds.ref, s) for s in ds.subscriptions}
    held = set(core.local_subs)
    require(held == expected, f"the core holds {sorted(held)}, the sessions {sorted(expected)}")
