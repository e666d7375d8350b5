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
* sends a `broker.cores.control.BrokerHeartbeat` with its incarnation and the count of
  publication copies it handled from that neighbour to every neighbour every
  ``--heartbeat`` seconds, and suspects a
  neighbour silent for ``--suspect-after`` periods, or at once when its connects are refused;
  a heartbeat with a new incarnation says the neighbour restarted (`broker.cores.failures`;
  status ``suspected``, each link's ``suspected`` and ``incarnation``).

Clients (`broker.sessions`): each request on a client connection is answered by exactly one
frame; advertisements belong to a client id, subscriptions to the connection that made them;
deliveries to a slow subscriber are dropped and counted.  Settings (`broker.settings`): flags,
then ``PUBSUB_BROKER_*`` variables, checked against the topology file before the daemon starts.

Failures.  Broker failure is out of the paper's scope.  Here: a dead, hung (SIGSTOP) or
partitioned neighbour is suspected within ``heartbeat × (suspect_after + 1/4)`` seconds (above); when
its connects fail the runtime also reports it unreachable (status: ``unreachable``, the link's
``state``).  Every change the detector makes goes to the core (``core.neighbour_changed``):
OctopiA routes what would cross a suspect around it through a parallel cluster
(`broker.cores.detours`) and, when the suspect is heard again or restarted, sends it its
tables (`broker.cores.resync`); at start the broker rebuilds its own tables from its
neighbours the same way.  Not yet: copies already queued for or sent to a broker that dies
are lost (``stats.dropped_sends`` counts those still queued), and a restarted broker's own
clients' advertisements and subscriptions are gone (their clients must make them again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import uvloop

from broker import clientstate
from broker.cores.control import BrokerHeartbeat
from broker.cores.factory import make_core
from broker.cores.failures import Change, FailureDetector
from broker.cores.messages import (
    TO_CLIENT,
    CivSet,
    CivUnset,
    CltSync,
    PadresAdvertise,
    PadresPublish,
    PadresSubscribe,
    PadresUnadvertise,
    PadresUnsubscribe,
    PrtSync,
    ScotAdvertise,
    ScotDetour,
    ScotPublish,
    ScotSubscribe,
    ScotUnadvertise,
    ScotUnsubscribe,
)
from broker.cores.octopia import OctopiaBroker
from broker.cores.topology import BrokerId, Scot
from broker.faults import broker_actions
from broker.links import NeighbourLink
from broker.sessions import ClientSessions
from broker.sessions import refusal as client_refusal
from broker.settings import BrokerSettings
from broker.telemetry import broker_instrument
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Send
from pubsub.runtime.connection import ClientSession
from pubsub.runtime.host import Daemon, host
from pubsub.runtime.identity import Identity
from pubsub.runtime.net import Runtime
from pubsub.runtime.permissions import Authority
from pubsub.runtime.settings import AdminSettings, RuntimeSettings, TelemetrySettings
from pubsub.runtime.stats import Stats

log = logging.getLogger(__name__)

#: Entries of the CLT / SRT lists shown in a status reply (the sizes are always exact).
STATUS_TABLE_ROWS = 64
#: Broker-to-broker messages each protocol accepts from peers.
#: Publication copies between brokers (counted as routed).
PUBLICATIONS = (ScotPublish, PadresPublish)
PEER_MESSAGES: dict[str, frozenset[type]] = {
    "octopia": frozenset(
        {ScotAdvertise, ScotUnadvertise, CivSet, CivUnset, ScotSubscribe, ScotUnsubscribe, ScotPublish,
         ScotDetour, PrtSync, CltSync}
    ),
    "padres": frozenset(
        {PadresAdvertise, PadresUnadvertise, PadresSubscribe, PadresUnsubscribe, PadresPublish}
    ),
}


class BrokerApp:
    """The `pubsub.runtime.application.Application` of one broker (see the module docstring)."""

    def __init__(self, topo: Scot, settings: BrokerSettings, stats: Stats, ref: Ref) -> None:
        self.topo = topo
        self.settings = settings
        self.me: BrokerId = settings.broker_id
        self.ref = ref
        self.stats = stats
        #: This start of the broker, in every heartbeat: a restart is a larger number.
        self.incarnation = time.time_ns()
        self.core = make_core(
            settings.broker_protocol,
            topo,
            settings.broker_id,
            dynamic=settings.broker_routing in ("idr", "idr+", "tid-d"),  # scotIDR or TID-D
            tau=settings.broker_tau,
            t_w=settings.broker_tw,
            epoch=f"{self.incarnation:x}.",  # this start's ids differ from the last one's
        )
        if isinstance(self.core, OctopiaBroker):
            self.core.intra_cluster = settings.broker_routing == "idr+"  # beyond §9.2 (issue 46 item 3)
        self._peer_types = PEER_MESSAGES[settings.broker_protocol]
        self.runtime: Runtime | None = None
        self.links: dict[BrokerId, NeighbourLink] = {}
        self._addr_to_bid = {topo.address(b): b for b in topo.neighbours(self.me)}
        #: Daemon-level counters: rejected input, dropped deliveries, client operations.
        self.counters: Counter[str] = Counter()
        #: Broker messages handed to the core, by kind.
        self.handled: Counter[str] = Counter()
        #: Suspicions of the neighbours and when each was last heard (`broker.cores.failures`);
        #: started again at `attach`.
        self.detector = self._detector(0.0)
        #: neighbour -> when the runtime last reported it unreachable (cleared on reconnect).
        self.unreachable: dict[BrokerId, float] = {}
        #: The client connections (`broker.sessions`).
        self.clients = ClientSessions(
            self.me, self.core, self.counters, settings.broker_client_buffer_bytes, self._route, self._clock,
            expiry=settings.broker_session_expiry, keep=settings.broker_session_keep,
            state_dir=settings.broker_state_dir,
        )
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
        self.detector = self._detector(runtime.now())
        for bid in self.topo.neighbours(self.me):
            address = self.topo.address(bid)
            link = NeighbourLink(bid, address, self.topo.link_kind(self.me, bid) or "?", runtime)
            rate = self.settings.broker_link_rates.get(bid)
            if rate is not None:
                link.set_rate(rate)
            self.links[bid] = link
        runtime.spawn(self._window_loop(), "lst window")
        runtime.spawn(self._liveness_loop(), "heartbeats")
        self._route(self.core.start(runtime.now()))
        if self.settings.broker_state_dir is not None:  # checked by the command before the start
            self.clients.restore(clientstate.load(self.settings.broker_state_dir, self.me), runtime.now())

    def _detector(self, start: float) -> FailureDetector:
        beat = self.settings.broker_heartbeat  # off (0): suspected only when connects are refused
        return FailureDetector(self.topo.neighbours(self.me), beat or float("inf"),
                               self.settings.broker_suspect_after, start)

    def _detected(self, changes: Iterable[Change], now: float) -> None:
        """Count and log what the failure detector changed, and tell the core."""
        for change in changes:
            if change.kind == "suspected":
                log.warning("%s: neighbour %s suspected (%s)", self.me, change.neighbour, change.reason)
                self.counters[f"suspicions_{change.reason}"] += 1
            elif change.kind == "cleared":
                log.info("%s: neighbour %s heard again", self.me, change.neighbour)
                self.counters["suspicions_cleared"] += 1
            else:
                log.warning("%s: neighbour %s restarted (a new incarnation)", self.me, change.neighbour)
                self.counters["restarts_noticed"] += 1
            self._route(self.core.neighbour_changed(change, now))

    async def _liveness_loop(self) -> None:
        """Every heartbeat period, a heartbeat to each neighbour (acknowledging the publication
        copies handled from it); four times a period, the detector's check of silent
        neighbours, so that a suspicion comes at most a quarter period after the bound."""
        assert self.runtime is not None
        beat = self.settings.broker_heartbeat
        if not beat:
            return
        while True:
            now = self.runtime.now()
            if now - self._last_heartbeat >= beat:
                self._last_heartbeat = now
                for bid, link in self.links.items():
                    self.runtime.send(link.ref, BrokerHeartbeat(self.me, self.incarnation, self.core.received_from(bid),
                                                                self.detector.incarnation.get(bid, 0)))
            self._detected(self.detector.tick(now), now)
            await asyncio.sleep(beat / 4)

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
    def admits(self, msg: Message, identity: Identity) -> str | None:
        """With TLS: peer messages only from brokers, and a message naming a `sender` only
        from the neighbour whose address that broker has in the topology."""
        if identity.role != "broker":
            return f"{msg.kind} is accepted only from brokers, not from {identity}"
        sender = getattr(msg, "sender", None)
        if sender is not None and self._addr_to_bid.get(Ref(identity.name)) != sender:
            return f"{msg.kind} from {sender} is accepted only from that neighbour, not from {identity.name}"
        return None

    def handle(self, msg: Message, now: float) -> list[Send]:
        """A frame from a peer connection."""
        sender = getattr(msg, "sender", None)
        if isinstance(msg, BrokerHeartbeat):
            if sender in self.links:
                self._detected(self.detector.heard(sender, now, msg.incarnation), now)
                if msg.acked_for == self.incarnation:  # a count of copies from this start
                    self.core.acknowledged(sender, msg.acked)
            else:
                self.counters["heartbeat_from_stranger"] += 1
            return []
        if type(msg) not in self._peer_types:
            self.counters["rejected_peer_message"] += 1
            self.counters[f"rejected_peer_message_{msg.kind}"] += 1
            return []
        if sender in self.links:
            self._detected(self.detector.heard(sender, now), now)
        self.handled[msg.kind] += 1
        self._route(self.core.handle(msg, now))
        return []

    def timeout(self, now: float) -> list[Send]:
        """The runtime's timer: session expiry and the core's (empty) Timeout (heartbeats and
        suspicions have their own, finer loop: `_liveness_loop`)."""
        self.clients.expire(now)
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
        self._detected(self.detector.refused(bid), now)
        return []

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        if isinstance(msg, StatusRequest):
            return Reply(body=self.status()), []
        return ErrorReply(code="unsupported", detail=f"a broker does not serve {msg.kind!r}"), []

    def refuses(self, msg: Message, identity: Identity | None, authority: Authority) -> Message | None:
        """With TLS: the refusal of a client request the rules do not allow, or None
        (`broker.sessions.refusal`)."""
        return client_refusal(msg, identity, authority)

    def session_request(self, msg: Message, session: ClientSession, now: float) -> list[Send] | None:
        """Every request on a client connection; answered by `broker.sessions`, exactly one
        frame each (a status request by `control`)."""
        if isinstance(msg, StatusRequest):
            return None  # `control` answers
        self.clients.request(msg, session, now)
        return []

    def _clock(self) -> float | None:
        """The runtime's clock (None before the runtime is attached)."""
        return self.runtime.now() if self.runtime is not None else None

    # --- routing the core's sends --------------------------------------------------------------
    def _route(self, sends: Iterable[Send]) -> None:
        """Core sends: to a neighbour's output queue, or to a client connection."""
        for dest, msg in sends:
            if isinstance(msg, TO_CLIENT):
                self.clients.deliver(dest, msg)
                continue
            link = self.links.get(dest)
            if link is None or self.runtime is None:
                self.counters["send_to_non_neighbour"] += 1
                continue
            self.runtime.send(link.ref, msg)
            if isinstance(msg, PUBLICATIONS):
                self.counters["routed_publications"] += 1

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
        """Client connections, their subscriptions, sessions, and this broker's advertisements."""
        sessions, waiting = self.clients.sessions()
        return {
            "connections": self.clients.connections(),
            "subscriptions": self.clients.subscriptions(),
            "advertisements": len(self.core.local_advs),
            "sessions": sessions,
            "sessions_waiting": waiting,
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
            entry["congested_windows"] = lst.congested_windows(bid)
            row = lst.rows.get(bid)
            entry["ce"] = None if row is None else round(row.ce, 4)
            entry["state"] = self.link_state(bid)
            heard = self.detector.heard_at(bid)
            entry["last_heard_s"] = None if heard is None else round(now - heard, 3)
            entry["suspected"] = self.detector.suspected.get(bid)
            entry["incarnation"] = self.detector.incarnation.get(bid)
            links[bid] = entry
        core_counters = dict(self.core.counters)
        body.update(
            ref=self.ref,
            settings={
                "protocol": self.settings.broker_protocol,
                "routing": self.settings.broker_routing,  # idr / spr (OctopiA), tid-s / tid-d (PADRES)
                "tau": self.settings.broker_tau,
                "tw": self.settings.broker_tw,
                "heartbeat": self.settings.broker_heartbeat,
                "suspect_after": self.settings.broker_suspect_after,
            },
            tables=self.table_sizes(),
            links=links,
            unreachable=sorted(b for b in self.links if self.link_state(b) == "unreachable"),
            suspected=sorted(self.detector.suspected),
            incarnation=self.incarnation,
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
    runtime = Runtime(app, runtime_settings, stats=stats, role="broker")
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
    "run_broker",
    "serve_broker",
]
