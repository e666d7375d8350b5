"""The broker daemon's client connections: their requests, who owns what, their deliveries.

Its one job is the client side of one broker (`broker.app.BrokerApp` holds one
`ClientSessions` and gives it every request that arrives on a client connection and every
`Deliver` / `ClientRefused` the core addresses to a client).

Clients.  A client connection (``Hello(role="client")``) carries requests, each answered by
exactly one frame, in order: `Reply` with ``{"ok": true, "op": ..., ...}`` on success, the
core's `ClientRefused` (``code``: ``not_advertised``, ``duplicate_id``, ``unknown_id``,
``bad_publication``, ``bad_filter``, ``bad_client``, ``bad_id``) or an `ErrorReply` for a
request the daemon does not serve.  `Deliver` frames of the connection's subscriptions may
come between the replies at any time.

Who owns what (a choice the paper leaves open):

* **Advertisements belong to a client id** (``client`` of `ClientAdvertise`, 1..64 of
  ``[A-Za-z0-9_.:@-]``), not to a connection: they persist at the host broker until
  `ClientUnadvertise` (or the broker stops), so ``pubsub advertise --client P`` can return
  and a later ``pubsub publish --client P`` publishes under it.  A publication is routed only
  if it conforms to one of its client id's advertisements at this broker.
* **Subscriptions belong to the connection** that made them: the core sees the connection as
  the client ``"~c<n>"`` (ids starting with ``~`` cannot be chosen by clients), deliveries
  stream back on it, and when the connection closes every subscription it made is
  unsubscribed.  The ``client`` field of `ClientSubscribe` / `ClientUnsubscribe` is ignored.

With TLS (`pubsub.runtime.permissions`), the client id is the certificate's: a ``client``
certificate advertises, withdraws and publishes only as the client id its certificate names
(an ``admin`` certificate as any), so no one withdraws another's advertisement; content has
no topic, so the permissions file's ``publish`` / ``subscribe`` patterns are matched against
that client id.  A refusal is `ClientRefused` with code ``permission_denied``; nothing of the
request is done.

Sessions (`broker.durable`): a connection that first sends `ClientSessionRequest` opens a
session or resumes one by its token; its subscriptions then belong to the session and outlive
the connection for ``session_expiry`` seconds, deliveries are numbered, kept and handed over
on a resume, and losses reach the client as a `DeliveryGap` with their count.

Slow subscribers: deliveries to a client whose connection holds more than
``client_buffer_bytes`` not yet read are dropped and counted
(``deliveries_dropped_slow_client``); in a session they are kept for a resume and a gap
notice says how many were not written.

With a state directory (`broker.clientstate`), the advertisements and the sessions with their
subscriptions are written to disk at every change and made again at the next start.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from broker import clientstate
from broker.clientstate import ClientState
from broker.cores.corebase import BrokerCore
from broker.cores.language.filters import Filter
from broker.cores.messages import (
    ClientAdvertise,
    ClientPublish,
    ClientRefused,
    ClientSessionRequest,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Deliver,
    DeliveryGap,
)
from broker.cores.topology import BrokerId
from broker.durable import DEFAULT_EXPIRY, DEFAULT_KEEP, DurableSession
from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Message, Send
from pubsub.runtime.connection import ClientSession
from pubsub.runtime.identity import Identity
from pubsub.runtime.permissions import DENIED, Authority

log = logging.getLogger(__name__)
#: A session token as the broker makes them (32 hex digits).
TOKEN_RE = re.compile(r"[0-9a-f]{32}")

#: Client ids: what advertisements and publications are filed under.
CLIENT_ID_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
#: Longest advertisement / subscription / publication id a client may give.
MAX_ID_CHARS = 256

#: The client operations a broker serves on a client connection.
ClientOperation = ClientAdvertise | ClientUnadvertise | ClientSubscribe | ClientUnsubscribe | ClientPublish
CLIENT_OPERATIONS = (ClientAdvertise, ClientUnadvertise, ClientSubscribe, ClientUnsubscribe, ClientPublish)


class Refusal(NamedTuple):
    """Why the daemon refuses a client operation before the core sees it."""

    code: str
    detail: str


def refusal(msg: Message, identity: Identity | None, authority: Authority) -> Message | None:
    """With TLS: the refusal of client request `msg` from the holder of `identity`, or None
    when the rules let it through (see the module docstring)."""
    if not isinstance(msg, CLIENT_OPERATIONS):
        return None
    subscribing = isinstance(msg, (ClientSubscribe, ClientUnsubscribe))
    # Subscriptions belong to the connection (their client field is ignored): they are
    # checked under the certificate's own name.
    acting_as = (identity.name if identity is not None else "") if subscribing else msg.client
    action = "subscribe" if subscribing else "publish"
    problem = authority.check(identity, action, acting_as)
    if (
        problem is None and action == "publish" and identity is not None and identity.role == "client"
        and msg.client != identity.name
    ):
        problem = f"{identity} acts only as client {identity.name!r}, not {msg.client!r}"
    return None if problem is None else ClientRefused(msg.client, DENIED, problem)


def _check_id(value: str, what: str) -> str | None:
    """Why `value` is not an acceptable client-chosen id, or None."""
    if not value or len(value) > MAX_ID_CHARS:
        return f"{what} must have 1..{MAX_ID_CHARS} characters"
    if any(ord(ch) < 32 for ch in value):
        return f"{what} must not contain control characters"
    return None


class ClientSessions:
    """The client connections of one broker (see the module docstring).

    `counters` are the daemon's counters (shared with the app, which reports them), `route`
    hands the core's other sends on (to neighbours or to clients), and `clock` is the
    runtime's clock, None before the runtime is attached.
    """

    def __init__(
        self,
        me: BrokerId,
        core: BrokerCore,
        counters: Counter[str],
        client_buffer_bytes: int,
        route: Callable[[Iterable[Send]], None],
        clock: Callable[[], float | None],
        *,
        expiry: float = DEFAULT_EXPIRY,
        keep: int = DEFAULT_KEEP,
        state_dir: Path | None = None,
    ) -> None:
        self.me = me
        self.expiry = expiry
        self.keep = keep
        self.state_dir = state_dir
        #: sessions by token, by the core's client name, and by connection
        self._durable: dict[str, DurableSession] = {}
        self._durable_refs: dict[str, DurableSession] = {}
        self._bound: dict[int, DurableSession] = {}
        #: the advertisements (client, id) -> filter, for the state file
        self._ads: dict[tuple[str, str], Filter] = {}
        self.core = core
        self.counters = counters
        self.client_buffer_bytes = client_buffer_bytes
        self._route = route
        self._clock = clock
        self._sessions: dict[str, ClientSession] = {}
        self._session_refs: dict[int, str] = {}
        self._session_subs: dict[str, set[str]] = {}
        self._next_session = 0
        self._next_pid = 0

    # --- requests ------------------------------------------------------------------------------
    def request(self, msg: Message, session: ClientSession, now: float) -> None:
        """A request on a client connection (other than a status request); answered here,
        exactly one frame."""
        if isinstance(msg, ClientSessionRequest):
            self._open_session(msg, session, now)
            return
        if not isinstance(msg, CLIENT_OPERATIONS):
            self.counters["unsupported_client_request"] += 1
            session.send(ErrorReply(code="unsupported", detail=f"a broker does not serve {msg.kind!r}"))
            return
        ref = self._session_ref(session)
        op = self._owned(msg, ref)
        if isinstance(op, Refusal):
            self.counters[f"refused_{op.code}"] += 1
            session.send(ClientRefused(msg.client, op.code, op.detail))
            return
        self.counters[f"client_{msg.kind}"] += 1
        sends = self.core.handle(op, now)
        owner = op.client
        refusal: ClientRefused | None = None
        rest: list[Send] = []
        for send in sends:
            if refusal is None and isinstance(send.msg, ClientRefused) and send.dest == owner:
                refusal = send.msg
            else:
                rest.append(send)
        if refusal is not None:
            session.send(refusal)
        else:
            session.send(Reply(body=self._success(op, ref)))
        self._route(rest)

    def _session_ref(self, session: ClientSession) -> str:
        bound = self._bound.get(id(session))
        if bound is not None:
            return bound.ref
        ref = self._session_refs.get(id(session))
        if ref is None:
            self._next_session += 1
            ref = f"~c{self._next_session}"
            self._session_refs[id(session)] = ref
            self._sessions[ref] = session
            self._session_subs[ref] = set()
            session.on_close(lambda: self._session_closed(session, ref))
        return ref

    def _session_closed(self, session: ClientSession, ref: str) -> None:
        """The connection is gone: its subscriptions end (the core unsubscribes them)."""
        self._session_refs.pop(id(session), None)
        self._sessions.pop(ref, None)
        subs = self._session_subs.pop(ref, set())
        now = self._clock()
        if now is None:
            return
        for sub_id in sorted(subs):
            self.counters["unsubscribed_on_close"] += 1
            self._route(self.core.unsubscribe(ref, sub_id, now))

    def _owned(self, msg: ClientOperation, ref: str) -> ClientOperation | Refusal:
        """The operation as the core gets it (subscriptions: owned by the connection), or the
        refusal when the client's ids are unacceptable."""
        if isinstance(msg, (ClientSubscribe, ClientUnsubscribe)):
            problem = _check_id(msg.sub_id, "a subscription id")
            if problem:
                return Refusal("bad_id", problem)
            if isinstance(msg, ClientSubscribe):
                return ClientSubscribe(ref, msg.sub_id, msg.sub)
            return ClientUnsubscribe(ref, msg.sub_id)
        client = msg.client
        if not CLIENT_ID_RE.fullmatch(client):
            return Refusal(
                "bad_client",
                f"a client id is 1..64 of letters, digits and _.:@- , not {client[:70]!r}",
            )
        if isinstance(msg, ClientPublish):
            if not msg.pid:
                self._next_pid += 1
                return ClientPublish(client, f"{client}@{self.me}#{self._next_pid}", msg.attrs)
            problem = _check_id(msg.pid, "a publication id")
        else:
            problem = _check_id(msg.adv_id, "an advertisement id")
        if problem:
            return Refusal("bad_id", problem)
        return msg

    def _success(self, op: Message, ref: str) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": True, "broker": self.me}
        durable = self._durable_refs.get(ref)
        if isinstance(op, ClientSubscribe):
            if durable is not None:
                durable.subscriptions[op.sub_id] = op.sub
                self._persist()
            else:
                self._session_subs[ref].add(op.sub_id)
            body.update(op="subscribe", id=op.sub_id, uid=self.core.local_subs.get((ref, op.sub_id)))
        elif isinstance(op, ClientUnsubscribe):
            if durable is not None:
                durable.subscriptions.pop(op.sub_id, None)
                self._persist()
            else:
                self._session_subs[ref].discard(op.sub_id)
            body.update(op="unsubscribe", id=op.sub_id)
        elif isinstance(op, ClientAdvertise):
            self._ads[(op.client, op.adv_id)] = op.adv
            self._persist()
            body.update(
                op="advertise", id=op.adv_id, client=op.client,
                uid=self.core.local_advs.get((op.client, op.adv_id)),
            )
        elif isinstance(op, ClientUnadvertise):
            self._ads.pop((op.client, op.adv_id), None)
            self._persist()
            body.update(op="unadvertise", id=op.adv_id, client=op.client)
        elif isinstance(op, ClientPublish):
            body.update(op="publish", pid=op.pid, client=op.client)
        return body

    # --- sessions (`broker.durable`) -------------------------------------------------------------
    def _open_session(self, msg: ClientSessionRequest, conn: ClientSession, now: float) -> None:
        """Open a session, or resume one and hand over what it kept after `msg.after`."""
        if msg.token and not TOKEN_RE.fullmatch(msg.token) or msg.after < 0:
            self.counters["refused_bad_session"] += 1
            conn.send(ClientRefused(msg.client, "bad_session", "a session token is 32 hex digits from the broker, "
                                    "and the last delivery number is >= 0"))
            return
        if self._session_subs.get(self._session_refs.get(id(conn), ""), set()):
            self.counters["refused_bad_session"] += 1
            conn.send(ClientRefused(msg.client, "bad_session", "this connection has subscriptions of its own: "
                                    "open the session before subscribing"))
            return
        ds = self._durable.get(msg.token) if msg.token else None
        if ds is None:
            ds = DurableSession(secrets.token_hex(16), self._session_name(), self.keep)
            self._durable[ds.token] = ds
            self._durable_refs[ds.ref] = ds
            self._bind(ds, conn)
            self.counters["sessions_opened"] += 1
            self._persist()
            conn.send(Reply(body={"ok": True, "op": "session", "broker": self.me, "session": ds.token,
                                  "resumed": False, "reason": "unknown" if msg.token else "new"}))
            return
        if ds.restored:  # nothing was kept across the restart: numbering goes on after the client's
            ds.seq, ds.restored = max(ds.seq, msg.after), False
            missed, reason = -1, "broker_restarted"
            replay: list[Deliver] = []
        else:
            missed, replay = ds.after(msg.after)
            reason = "overflow"
        ds.unwritten = 0
        self._bind(ds, conn)
        self.counters["sessions_resumed"] += 1
        conn.send(Reply(body={"ok": True, "op": "session", "broker": self.me, "session": ds.token, "resumed": True,
                              "missed": missed, "replayed": len(replay), "subscriptions": sorted(ds.subscriptions),
                              "after": replay[0].seq - 1 if replay else ds.seq}))
        if missed:
            self.counters["session_gaps"] += 1
            conn.send(DeliveryGap(msg.client, missed, reason, sorted(ds.subscriptions)))
        for numbered in replay:
            conn.send(numbered)
        self.counters["deliveries_replayed"] += len(replay)

    def _session_name(self) -> str:
        """The client name the core files a new session's subscriptions under."""
        self._next_session += 1
        return f"~s{self._next_session}"

    def _bind(self, ds: DurableSession, conn: ClientSession) -> None:
        """One connection per session and one session per connection."""
        old = ds.connection
        if old is not None and old is not conn:
            self._bound.pop(id(old), None)  # the client came back on another connection
        previous = self._bound.get(id(conn))
        if previous is not None and previous is not ds:  # this connection leaves its former session
            previous.connection, previous.detached_at = None, self._clock() or 0.0
        ds.connection, ds.detached_at = conn, None
        self._bound[id(conn)] = ds
        conn.on_close(lambda: self._detach(ds, conn))

    def _detach(self, ds: DurableSession, conn: ClientSession) -> None:
        self._bound.pop(id(conn), None)
        if ds.connection is conn:
            ds.connection = None
            ds.detached_at = self._clock() or 0.0

    def expire(self, now: float) -> None:
        """End the sessions whose client stayed away longer than the expiry."""
        gone = [ds for ds in self._durable.values() if ds.expired(now, self.expiry)]
        for ds in gone:
            del self._durable[ds.token]
            del self._durable_refs[ds.ref]
            for sub_id in sorted(ds.subscriptions):
                self._route(self.core.unsubscribe(ds.ref, sub_id, now))
            self.counters["sessions_expired"] += 1
        if gone:
            self._persist()

    def restore(self, state: ClientState, now: float) -> None:
        """Make the advertisements and sessions of a state file again (at start)."""
        for client, adv_id, adv in state.advertisements:
            self._ads[(client, adv_id)] = adv
            self._route_quietly(self.core.handle(ClientAdvertise(client, adv_id, adv), now))
        for token, subs in state.sessions.items():
            ds = DurableSession(token, self._session_name(), self.keep, restored=True, detached_at=now)
            self._durable[token] = ds
            self._durable_refs[ds.ref] = ds
            for sub_id, sub in subs:
                ds.subscriptions[sub_id] = sub
                self._route_quietly(self.core.handle(ClientSubscribe(ds.ref, sub_id, sub), now))
        self.counters["restored_advertisements"] += len(state.advertisements)
        self.counters["restored_sessions"] += len(state.sessions)

    def _route_quietly(self, sends: list[Send]) -> None:
        self._route([s for s in sends if not isinstance(s.msg, ClientRefused)])

    def _persist(self) -> None:
        if self.state_dir is None:
            return
        state = ClientState(self.me, [(c, i, f) for (c, i), f in self._ads.items()],
                            {t: list(ds.subscriptions.items()) for t, ds in self._durable.items()})
        try:
            clientstate.save(self.state_dir, state)
        except OSError as exc:
            self.counters["state_write_errors"] += 1
            log.error("%s: cannot write the client state to %s: %s", self.me, self.state_dir, exc)

    # --- deliveries ----------------------------------------------------------------------------
    def deliver(self, dest: str, msg: Message) -> None:
        """A `Deliver` or `ClientRefused` of the core, to the client connection `dest` names
        (or to the session: numbered, kept, written if its client is connected)."""
        durable = self._durable_refs.get(dest)
        if durable is not None and isinstance(msg, Deliver):
            self._deliver_in_session(durable, msg)
            return
        session = self._sessions.get(dest)
        if session is None or session.closed:
            self.counters["deliveries_to_gone_client"] += 1
            return
        if session.buffered() > self.client_buffer_bytes:
            self.counters["deliveries_dropped_slow_client"] += 1
            return
        if session.send(msg):
            self.counters["deliveries"] += 1
        else:
            self.counters["deliveries_failed"] += 1

    def _deliver_in_session(self, ds: DurableSession, msg: Deliver) -> None:
        numbered = ds.record(msg)
        conn = ds.connection
        if conn is None or conn.closed:
            self.counters["deliveries_kept_for_session"] += 1
            return
        if conn.buffered() > self.client_buffer_bytes:
            ds.unwritten += 1
            self.counters["deliveries_dropped_slow_client"] += 1
            return
        if ds.unwritten:
            self.counters["session_gaps"] += 1
            conn.send(DeliveryGap(msg.client, ds.unwritten, "slow_client", sorted(ds.subscriptions)))
            ds.unwritten = 0
        if conn.send(numbered):
            self.counters["deliveries"] += 1
        else:
            self.counters["deliveries_failed"] += 1

    # --- status --------------------------------------------------------------------------------
    def connections(self) -> int:
        """Client connections that made a request and are still open."""
        return len(self._sessions)

    def subscriptions(self) -> int:
        """Subscriptions of those connections and of the sessions."""
        return sum(len(s) for s in self._session_subs.values()) + sum(
            len(ds.subscriptions) for ds in self._durable.values())

    def sessions(self) -> tuple[int, int]:
        """Sessions, and those of them waiting for their client."""
        return len(self._durable), sum(ds.connection is None for ds in self._durable.values())


__all__ = ["CLIENT_ID_RE", "MAX_ID_CHARS", "ClientOperation", "ClientSessions", "Refusal"]
