"""The SCOT broker daemon: an OctopiA (or PADRES-style) broker core on the network runtime.

``pubsub broker --topology FILE --id x,i [--listen HOST:PORT]`` runs broker B(x, i) of the
SCOT in FILE.  The topology file names every broker's address (its ``"addresses"`` map,
`broker.cores.topology`), so every broker knows where its neighbours listen; ``--listen`` may be
left out and must equal the file's address when given.  The daemon

* drives the core (`broker.cores.octopia.OctopiaBroker`, SPR or IDR, or `broker.cores.padres.PadresBroker`)
  over `pubsub.runtime.net.Runtime`: messages from neighbours go to ``core.handle``; the core's sends
  to broker ids ``"x,i"`` go through the runtime's send path to that neighbour (whose queue
  and rate limit the runtime keeps, `broker.links.NeighbourLink` reads them for the LST), its
  `Deliver` / `ClientRefused` to the client connection they name;
* accepts only the running protocol's broker-to-broker messages from peers (a client
  operation or the other protocol's message arriving on a peer connection is dropped and
  counted as ``rejected_peer_message``);
* every t_w seconds reports each output queue's length and the messages that entered and
  left it during the window to ``core.link_status`` -- the Link Status Table of §9.2, so that
  IDR (Alg. 4, Eq. 3) sees real congestion; ``--link-rate x,i=R`` (or, at run
  time, the admin action ``link_rate``, `broker.faults`) throttles one outgoing link to R
  messages per second so that congestion can be produced on purpose;
* sends a `broker.cores.control.BrokerHeartbeat` to every neighbour every ``--heartbeat`` seconds,
  so that a dead neighbour is reported unreachable by the runtime even when nothing else is
  sent to it.

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

Failures.  Broker failure is out of the paper's scope.  Here: when a neighbour dies, the
runtime's connects fail and it reports the neighbour unreachable (status: ``unreachable``,
the link's ``state``); what was queued for it and whatever is routed to it later is dropped
(``stats.dropped_sends``).  No routing table is repaired: publications whose path crosses the
dead broker are lost, every other path keeps working, and nothing waits on the dead broker.
A restarted broker starts with empty tables (advertisements and subscriptions of its former
clients are gone; entries elsewhere that name it as a last hop stay).

Slow subscribers: deliveries to a client whose connection holds more than
``client_buffer_bytes`` not yet read are dropped and counted
(``deliveries_dropped_slow_client``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import uvloop
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from broker.cores.control import BrokerHeartbeat
from broker.faults import broker_actions
from broker.telemetry import broker_instrument
from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW
from broker.links import NeighbourLink
from broker.cores.messages import (
    CivSet,
    CivUnset,
    ClientAdvertise,
    ClientPublish,
    ClientRefused,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    PadresAdvertise,
    PadresPublish,
    PadresSubscribe,
    PadresUnadvertise,
    PadresUnsubscribe,
    ScotAdvertise,
    ScotPublish,
    ScotSubscribe,
    ScotUnadvertise,
    ScotUnsubscribe,
    TO_CLIENT,
)
from broker.cores.factory import make_core
from broker.cores.topology import BrokerId, Scot, TopologyError, parse_broker_id
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Send
from pubsub.runtime.connection import ClientSession
from pubsub.runtime.net import Runtime
from pubsub.runtime.stats import Stats
from pubsub.runtime.host import Daemon, host
from pubsub.runtime.settings import ENV_PREFIX, AdminSettings, RuntimeSettings, SettingsError, TelemetrySettings

log = logging.getLogger(__name__)

#: Client ids: what advertisements and publications are filed under.
CLIENT_ID_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
#: Longest advertisement / subscription / publication id a client may give.
MAX_ID_CHARS = 256
#: Entries of the CLT / SRT lists shown in a status reply (the sizes are always exact).
STATUS_TABLE_ROWS = 64
#: Broker-to-broker messages each protocol accepts from peers.
#: Publication copies between brokers (counted as routed).
PUBLICATIONS = (ScotPublish, PadresPublish)
PEER_MESSAGES: dict[str, frozenset[type]] = {
    "octopia": frozenset(
        {ScotAdvertise, ScotUnadvertise, CivSet, CivUnset, ScotSubscribe, ScotUnsubscribe, ScotPublish}
    ),
    "padres": frozenset(
        {PadresAdvertise, PadresUnadvertise, PadresSubscribe, PadresUnsubscribe, PadresPublish}
    ),
}

#: Setting name -> command-line flag (for one-line configuration errors).
FLAGS = {
    "broker_topology": "--topology",
    "broker_id": "--id",
    "broker_protocol": "--protocol",
    "broker_routing": "--routing",
    "broker_tau": "--tau",
    "broker_tw": "--tw",
    "broker_link_rates": "--link-rate",
    "broker_heartbeat": "--heartbeat",
}


class BrokerSettings(BaseSettings):
    """The broker daemon (flags, then ``PUBSUB_BROKER_*`` environment variables)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    broker_topology: Path = Field(description="the SCOT topology file, with every broker's address")
    broker_id: str = Field(description="this broker's id 'x,i' in the topology")
    broker_protocol: Literal["octopia", "padres"] = Field(
        "octopia", description="OctopiA (§6-§9) or the PADRES-style baseline (TID-S)"
    )
    broker_routing: Literal["idr", "spr"] = Field(
        "idr", description="OctopiA publication routing: dynamic (scotIDR) or static (scotSPR)"
    )
    broker_tau: float = Field(DEFAULT_TAU, ge=0, description="congestion threshold tau of Eq. 3")
    broker_tw: float = Field(
        DEFAULT_TW, gt=0, le=60, description="seconds of the Link Status Table window t_w"
    )
    broker_link_rates: dict[str, float] = Field(
        default_factory=dict, description="outgoing link -> messages per second at most"
    )
    broker_heartbeat: float = Field(
        0.5, ge=0, description="seconds between heartbeats to every neighbour (0: off)"
    )
    broker_client_buffer_bytes: int = Field(
        8 << 20, ge=1024, description="unread bytes a client may hold before deliveries drop"
    )

    @field_validator("broker_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        try:
            parse_broker_id(value)
        except TopologyError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("broker_link_rates")
    @classmethod
    def _check_rates(cls, value: dict[str, float]) -> dict[str, float]:
        for link, rate in value.items():
            try:
                parse_broker_id(link)
            except TopologyError as exc:
                raise ValueError(f"link {link!r}: {exc}") from None
            if not rate > 0 or rate == float("inf"):
                raise ValueError(f"link {link}: the rate must be a finite number > 0, not {rate}")
        return value


def parse_link_rate(text: str) -> tuple[str, float]:
    """``"x,i=R"`` -> ("x,i", R); ValueError with a one-line message."""
    link, sep, rate_text = text.rpartition("=")
    if not sep:
        raise ValueError(f"{text!r} is not LINK=RATE (e.g. b,1=20)")
    try:
        parse_broker_id(link)
    except TopologyError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    try:
        rate = float(rate_text)
    except ValueError:
        raise ValueError(f"{text!r}: the rate {rate_text!r} is not a number") from None
    if not rate > 0 or rate == float("inf"):
        raise ValueError(f"{text!r}: the rate must be a finite number of messages per second > 0")
    return link, rate


def check_against_topology(topo: Scot, settings: BrokerSettings, listen: str | None) -> str:
    """The address to listen on; SettingsError (one line) when the settings and the
    topology disagree: unknown id, no addresses, --listen differing from the file, a rate
    for a link that is not one of this broker's."""
    me = settings.broker_id
    if me not in topo:
        raise SettingsError(
            f"invalid configuration: broker_id (--id / PUBSUB_BROKER_ID): {me} is not a broker "
            f"of {settings.broker_topology} (vertices {list(topo.vertices)[:8]}, m = {topo.m})"
        )
    if not topo.addresses:
        raise SettingsError(
            f"invalid configuration: {settings.broker_topology} has no \"addresses\" map; the "
            "brokers need every broker's HOST:PORT (see `pubsub broker --help`)"
        )
    address = topo.address(me)
    if listen is not None and listen != address:
        raise SettingsError(
            f"invalid configuration: --listen {listen} differs from the address of {me} in "
            f"{settings.broker_topology} ({address}); omit --listen or make them agree"
        )
    neighbours = set(topo.neighbours(me))
    for link in settings.broker_link_rates:
        if link not in neighbours:
            raise SettingsError(
                f"invalid configuration: broker_link_rates (--link-rate / "
                f"PUBSUB_BROKER_LINK_RATES): {link} is not a neighbour of {me} "
                f"(neighbours: {', '.join(topo.neighbours(me))})"
            )
    return address


def _check_id(value: str, what: str) -> str | None:
    """Why `value` is not an acceptable client-chosen id, or None."""
    if not value or len(value) > MAX_ID_CHARS:
        return f"{what} must have 1..{MAX_ID_CHARS} characters"
    if any(ord(ch) < 32 for ch in value):
        return f"{what} must not contain control characters"
    return None


class BrokerApp:
    """The `pubsub.runtime.application.Application` of one broker (see the module docstring)."""

    def __init__(self, topo: Scot, settings: BrokerSettings, stats: Stats, ref: Ref) -> None:
        self.topo = topo
        self.settings = settings
        self.me: BrokerId = settings.broker_id
        self.ref = ref
        self.stats = stats
        self.core = make_core(
            settings.broker_protocol,
            topo,
            settings.broker_id,
            dynamic=settings.broker_routing == "idr",
            tau=settings.broker_tau,
            t_w=settings.broker_tw,
        )
        self._peer_types = PEER_MESSAGES[settings.broker_protocol]
        self.runtime: Runtime | None = None
        self.links: dict[BrokerId, NeighbourLink] = {}
        self._addr_to_bid = {topo.address(b): b for b in topo.neighbours(self.me)}
        #: Daemon-level counters: rejected input, dropped deliveries, client operations.
        self.counters: Counter[str] = Counter()
        #: Broker messages handed to the core, by kind.
        self.handled: Counter[str] = Counter()
        #: neighbour -> runtime clock of the last message or heartbeat from it.
        self.last_heard: dict[BrokerId, float] = {}
        #: neighbour -> when the runtime last reported it unreachable (cleared on reconnect).
        self.unreachable: dict[BrokerId, float] = {}
        self._sessions: dict[str, ClientSession] = {}
        self._session_refs: dict[int, str] = {}
        self._session_subs: dict[str, set[str]] = {}
        self._next_session = 0
        self._next_pid = 0
        self._last_heartbeat = float("-inf")
        #: Timeout actions run so far (the ``interval`` of events).
        self.intervals = 0
        #: Telemetry (`broker.telemetry`): told when a Timeout ran.
        self.observers: list[Any] = []

    # --- start-up ----------------------------------------------------------------------------
    def attach(self, runtime: Runtime) -> None:
        """Called by the runtime at start: the neighbour links (with their configured rate
        limits) and the t_w window."""
        self.runtime = runtime
        for bid in self.topo.neighbours(self.me):
            address = self.topo.address(bid)
            link = NeighbourLink(bid, address, self.topo.link_kind(self.me, bid) or "?", runtime)
            rate = self.settings.broker_link_rates.get(bid)
            if rate is not None:
                link.set_rate(rate)
            self.links[bid] = link
        runtime.spawn(self._window_loop(), "lst window")

    async def _window_loop(self) -> None:
        """Every t_w: close each link's window and report it to the LST (§9.2)."""
        assert self.runtime is not None
        while True:
            await asyncio.sleep(self.settings.broker_tw)
            now = self.runtime.now()
            for bid, link in self.links.items():
                q_len, q_in, q_out = link.window()
                self.core.link_status(bid, q_len, q_in, q_out, now)

    # --- the runtime's callbacks -------------------------------------------------------------
    def handle(self, msg: Message, now: float) -> list[Send]:
        """A frame from a peer connection."""
        sender = getattr(msg, "sender", None)
        if isinstance(msg, BrokerHeartbeat):
            if sender in self.links:
                self.last_heard[sender] = now
            else:
                self.counters["heartbeat_from_stranger"] += 1
            return []
        if type(msg) not in self._peer_types:
            self.counters["rejected_peer_message"] += 1
            self.counters[f"rejected_peer_message_{msg.kind}"] += 1
            return []
        if sender in self.links:
            self.last_heard[sender] = now
        self.handled[msg.kind] += 1
        self._route(self.core.handle(msg, now))
        return []

    def timeout(self, now: float) -> list[Send]:
        """The runtime's timer: heartbeats, and the core's (empty) Timeout."""
        beat = self.settings.broker_heartbeat
        if beat and self.runtime is not None and now - self._last_heartbeat >= beat:
            self._last_heartbeat = now
            for link in self.links.values():
                if link.queue_len() == 0:  # queued frames already make the runtime connect
                    self.runtime.send(link.ref, BrokerHeartbeat(self.me))
        self._route(self.core.timeout(now))
        self.intervals += 1
        for observer in self.observers:
            try:
                observer.ticked()
            except Exception:  # noqa: BLE001 - telemetry must not stop the broker
                self.stats.error("telemetry_error")
                log.exception("%s: telemetry failed", self.me)
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        bid = self._addr_to_bid.get(ref)
        if bid is None:
            self.counters["unreachable_stranger"] += 1
            return []
        if bid not in self.unreachable:
            log.warning("%s: neighbour %s (%s) is unreachable", self.me, bid, ref)
        self.unreachable[bid] = now
        self.counters["neighbour_unreachable_reports"] += 1
        return []

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        if isinstance(msg, StatusRequest):
            return Reply(body=self.status()), []
        return ErrorReply(code="unsupported", detail=f"a broker does not serve {msg.kind!r}"), []

    def session_request(self, msg: Message, session: ClientSession, now: float) -> list[Send] | None:
        """Every request on a client connection; answered here, exactly one frame each."""
        if isinstance(msg, StatusRequest):
            return None  # `control` answers
        if not isinstance(msg, (ClientAdvertise, ClientUnadvertise, ClientSubscribe, ClientUnsubscribe, ClientPublish)):
            self.counters["unsupported_client_request"] += 1
            session.send(ErrorReply(code="unsupported", detail=f"a broker does not serve {msg.kind!r}"))
            return []
        ref = self._session_ref(session)
        op, problem = self._owned(msg, ref)
        if problem is not None:
            code, detail = problem
            self.counters[f"refused_{code}"] += 1
            session.send(ClientRefused(getattr(msg, "client", ""), code, detail))
            return []
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
        return []

    # --- client operations ---------------------------------------------------------------------
    def _session_ref(self, session: ClientSession) -> str:
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
        if self.runtime is None:
            return
        now = self.runtime.now()
        for sub_id in sorted(subs):
            self.counters["unsubscribed_on_close"] += 1
            self._route(self.core.unsubscribe(ref, sub_id, now))

    def _owned(self, msg: Message, ref: str) -> tuple[Any, tuple[str, str] | None]:
        """The operation as the core gets it (subscriptions: owned by the connection), or
        (None, (code, detail)) when the client's ids are unacceptable."""
        if isinstance(msg, (ClientSubscribe, ClientUnsubscribe)):
            problem = _check_id(msg.sub_id, "a subscription id")
            if problem:
                return None, ("bad_id", problem)
            if isinstance(msg, ClientSubscribe):
                return ClientSubscribe(ref, msg.sub_id, msg.sub), None
            return ClientUnsubscribe(ref, msg.sub_id), None
        client = msg.client  # type: ignore[attr-defined]
        if not CLIENT_ID_RE.fullmatch(client):
            return None, (
                "bad_client",
                f"a client id is 1..64 of letters, digits and _.:@- , not {client[:70]!r}",
            )
        if isinstance(msg, ClientPublish):
            if not msg.pid:
                self._next_pid += 1
                return ClientPublish(client, f"{client}@{self.me}#{self._next_pid}", msg.attrs), None
            problem = _check_id(msg.pid, "a publication id")
        else:
            problem = _check_id(msg.adv_id, "an advertisement id")  # type: ignore[attr-defined]
        if problem:
            return None, ("bad_id", problem)
        return msg, None

    def _success(self, op: Message, ref: str) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": True, "broker": self.me}
        if isinstance(op, ClientSubscribe):
            self._session_subs[ref].add(op.sub_id)
            body.update(op="subscribe", id=op.sub_id, uid=self.core.local_subs.get((ref, op.sub_id)))
        elif isinstance(op, ClientUnsubscribe):
            self._session_subs[ref].discard(op.sub_id)
            body.update(op="unsubscribe", id=op.sub_id)
        elif isinstance(op, ClientAdvertise):
            body.update(
                op="advertise", id=op.adv_id, client=op.client,
                uid=self.core.local_advs.get((op.client, op.adv_id)),
            )
        elif isinstance(op, ClientUnadvertise):
            body.update(op="unadvertise", id=op.adv_id, client=op.client)
        elif isinstance(op, ClientPublish):
            body.update(op="publish", pid=op.pid, client=op.client)
        return body

    # --- routing the core's sends --------------------------------------------------------------
    def _route(self, sends: Iterable[Send]) -> None:
        """Core sends: to a neighbour's output queue, or to a client connection."""
        for dest, msg in sends:
            if isinstance(msg, TO_CLIENT):
                self._to_client(dest, msg)
                continue
            link = self.links.get(dest)
            if link is None or self.runtime is None:
                self.counters["send_to_non_neighbour"] += 1
                continue
            self.runtime.send(link.ref, msg)
            if isinstance(msg, PUBLICATIONS):
                self.counters["routed_publications"] += 1

    def _to_client(self, dest: str, msg: Message) -> None:
        session = self._sessions.get(dest)
        if session is None or session.closed:
            self.counters["deliveries_to_gone_client"] += 1
            return
        if session.buffered() > self.settings.broker_client_buffer_bytes:
            self.counters["deliveries_dropped_slow_client"] += 1
            return
        if session.send(msg):
            self.counters["deliveries"] += 1
        else:
            self.counters["deliveries_failed"] += 1

    # --- status --------------------------------------------------------------------------------
    def link_state(self, bid: BrokerId) -> str:
        """"up" (connected), "unreachable" (reported and not connected since) or "idle"."""
        link = self.links[bid]
        if self.runtime is not None and self.runtime.peer_connections(Ref(link.address)) > 0:
            self.unreachable.pop(bid, None)
            return "up"
        return "unreachable" if bid in self.unreachable else "idle"

    def table_sizes(self) -> dict[str, int | None]:
        """CLT, SRT and PRT sizes (None where the protocol has no such table)."""
        body = self.core.status()
        return {"clt": body.get("clt_size"), "srt": body.get("srt_size"), "prt": body.get("prt_size")}

    def client_counts(self) -> dict[str, int]:
        """Client connections, their subscriptions, and this broker's advertisements."""
        return {
            "connections": len(self._sessions),
            "subscriptions": sum(len(s) for s in self._session_subs.values()),
            "advertisements": len(self.core.local_advs),
        }

    def refusals(self) -> dict[str, int]:
        """Refused client operations by code (the core's and the daemon's)."""
        merged = dict(self.core.counters) | dict(self.counters)
        return {k.removeprefix("refused_"): v for k, v in sorted(merged.items()) if k.startswith("refused_")}

    def status(self) -> dict[str, Any]:
        """The status reply body (README: SCOT broker mode, status JSON)."""
        body = dict(self.core.status())
        for table in ("clt", "srt"):
            rows = body.get(table)
            if isinstance(rows, list) and len(rows) > STATUS_TABLE_ROWS:
                body[table] = rows[:STATUS_TABLE_ROWS]
                body[f"{table}_truncated"] = True
        now = self.runtime.now() if self.runtime is not None else 0.0
        lst = self.core.lst
        links: dict[str, Any] = {}
        for bid, link in self.links.items():
            entry = link.snapshot()
            entry["congested"] = lst.overloaded(bid)
            row = lst.rows.get(bid)
            entry["ce"] = None if row is None else round(row.ce, 4)
            entry["state"] = self.link_state(bid)
            heard = self.last_heard.get(bid)
            entry["last_heard_s"] = None if heard is None else round(now - heard, 3)
            links[bid] = entry
        core_counters = dict(self.core.counters)
        body.update(
            ref=self.ref,
            settings={
                "protocol": self.settings.broker_protocol,
                "routing": self.settings.broker_routing if self.settings.broker_protocol == "octopia" else "tid-s",
                "tau": self.settings.broker_tau,
                "tw": self.settings.broker_tw,
                "heartbeat": self.settings.broker_heartbeat,
            },
            tables=self.table_sizes(),
            links=links,
            unreachable=sorted(b for b in self.links if self.link_state(b) == "unreachable"),
            clients=self.client_counts(),
            idr={f"case_{n}": core_counters.get(f"idr_case_{n}", 0) for n in (1, 2, 3)},
            refused=self.refusals(),
            daemon_counters=dict(sorted(self.counters.items())),
            messages={
                "in": dict(sorted(self.stats.frames_in.items())),
                "out": dict(sorted(self.stats.frames_out.items())),
                "handled": dict(sorted(self.handled.items())),
            },
            dropped={
                "queue_full": sum(link.dropped for link in self.links.values()),
                "sends": self.stats.dropped_sends,
                "slow_client": self.counters.get("deliveries_dropped_slow_client", 0),
            },
            stats=self.stats.snapshot(),
        )
        return body


async def serve_broker(
    topo: Scot,
    settings: BrokerSettings,
    listen: Ref,
    runtime_settings: RuntimeSettings,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
) -> None:
    """Run broker `settings.broker_id` on `listen` until SIGTERM/SIGINT, through the daemon
    host (metrics, events, admin listener as `telemetry` and `admin` ask).  OSError when the
    address cannot be bound; MetricsError, EventsError or AdminError as the host raises."""
    stats = Stats()
    app = BrokerApp(topo, settings, stats, listen)
    runtime = Runtime(app, runtime_settings, stats=stats)
    log.info(
        "%s: broker %s (%s%s) of a SCOT with %d brokers",
        listen,
        settings.broker_id,
        settings.broker_protocol,
        f", {settings.broker_routing}" if settings.broker_protocol == "octopia" else "",
        len(topo),
    )
    daemon = Daemon(
        role="broker",
        app=app,
        runtime=runtime,
        instrument=broker_instrument(app, stats),
        actions=broker_actions(app),
    )
    await host(daemon, telemetry, admin)


def run_broker(
    topo: Scot,
    settings: BrokerSettings,
    listen: Ref,
    runtime_settings: RuntimeSettings,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
) -> None:
    """`serve_broker` on a fresh uvloop event loop."""
    uvloop.run(serve_broker(topo, settings, listen, runtime_settings, telemetry, admin))


__all__ = [
    "BrokerApp",
    "BrokerSettings",
    "FLAGS",
    "check_against_topology",
    "parse_link_rate",
    "run_broker",
    "serve_broker",
]
