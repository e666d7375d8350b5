"""The broker daemon's telemetry, handed to the daemon host (`pubsub.runtime.host`).

Prometheus (`BrokerCollector`, read from the daemon's state at scrape time; the ``link``
label takes the broker ids of this broker's neighbours, a set the topology fixes):

=============================================  ==============================================
``pubsub_broker_publications_routed_total``    publication copies handed to neighbour links
``pubsub_broker_publications_delivered_total``  deliveries written to subscribing clients
``pubsub_broker_client_requests_total{op}``    client operations accepted, by operation
``pubsub_broker_refused_total{code}``          client operations refused, by code
``pubsub_broker_link_queue{link}``             messages waiting on the link (Q_l of §9.2)
``pubsub_broker_link_congested{link}``         1 while Eq. 3's congestion element exceeds tau
``pubsub_broker_link_congestion{link}``        the congestion element itself
``pubsub_broker_link_congested_windows_total{link}``  t_w windows after which it was congested
``pubsub_broker_link_sent_total{link}``        messages written towards the neighbour
``pubsub_broker_link_dropped_total{link}``     messages lost because the link's queue was full
``pubsub_broker_link_rate_limit{link}``        the link's rate limit, messages/s (absent: none)
``pubsub_broker_table_entries{table}``         CLT, SRT and PRT sizes
``pubsub_broker_clients{what}``                client connections, subscriptions, advertisements
``pubsub_broker_idr_cases_total{case}``        scotIDR decisions by case (Alg. 4)
``pubsub_broker_neighbours_suspected``         neighbours suspected now
``pubsub_broker_suspicions_total{reason}``     suspicions (silent, refused) and clearings
``pubsub_broker_neighbour_restarts_total``     neighbour restarts noticed by their incarnation
``pubsub_broker_detours_total{kind}``          messages sent around a suspect; detours arrived
``pubsub_broker_undeliverable_total{reason}``  what no detour could carry, by reason
``pubsub_broker_syncs_applied_total{table}``   neighbours' PRT / CLT syncs applied
=============================================  ==============================================

Events (docs/events.md, role ``broker``): ``messages`` deltas every Timeout, like every
daemon, and a ``broker`` event with the tables, the clients and sessions, every link's queue
and congestion, and the suspects and failure counters when they change and every
``events_snapshot_every`` intervals.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.cores import control as broker_control
from broker.cores import messages
from pubsub.kernel import control
from pubsub.kernel.message import kinds_of
from pubsub.runtime.host import Instrument, Instruments
from pubsub.runtime.settings import TelemetrySettings
from pubsub.telemetry.events import EventWriter, MessageDeltas, Observer
from pubsub.telemetry.metrics import TopicLabels

#: Every message kind of the broker daemon: the kernel's control messages, the brokers' and
#: their clients' (of both protocols: a few dozen).  The runtime's message and byte counters
#: report each from the start; tests/telemetry/test_metrics.py checks that every
#: ``@message`` of broker/ is here.
KINDS = kinds_of(control, broker_control, messages)


class BrokerCollector:
    """The broker's own metrics (see the module docstring); `app` is a `broker.app.BrokerApp`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        app = self.app
        counters = app.counters
        yield CounterMetricFamily(
            "pubsub_broker_publications_routed",
            "Publication copies this broker handed to neighbour links.",
            value=counters.get("routed_publications", 0),
        )
        yield CounterMetricFamily(
            "pubsub_broker_publications_delivered",
            "Publications delivered to subscribing clients of this broker.",
            value=counters.get("deliveries", 0),
        )
        requests = CounterMetricFamily(
            "pubsub_broker_client_requests", "Client operations accepted, by operation.", labels=["op"]
        )
        for key, value in sorted(counters.items()):
            if key.startswith("client_broker_"):
                requests.add_metric([key.removeprefix("client_broker_")], value)
        yield requests
        refused = CounterMetricFamily(
            "pubsub_broker_refused", "Client operations refused, by code.", labels=["code"]
        )
        for code, value in sorted(app.refusals().items()):
            refused.add_metric([code], value)
        yield refused
        yield from self._links()
        yield GaugeMetricFamily(
            "pubsub_broker_neighbours_suspected", "Neighbours this broker suspects now (silent or refusing).",
            value=len(app.detector.suspected),
        )
        suspicions = CounterMetricFamily(
            "pubsub_broker_suspicions", "Suspicions of a neighbour, by reason (silent: missed heartbeats; "
            "refused: connects refused; cleared: heard again).", labels=["reason"]
        )
        for reason in ("silent", "refused", "cleared"):
            suspicions.add_metric([reason], counters.get(f"suspicions_{reason}", 0))
        yield suspicions
        yield CounterMetricFamily(
            "pubsub_broker_neighbour_restarts", "Neighbour restarts noticed by a new incarnation.",
            value=counters.get("restarts_noticed", 0),
        )
        core = app.core.counters
        around = CounterMetricFamily(
            "pubsub_broker_detours", "Messages sent around a suspected neighbour through a parallel cluster, "
            "by kind; arrived: detours handled here as their exit.", labels=["kind"]
        )
        for kind, key in (("publication", "detoured_publications"), ("subscribe", "detoured_scot_sub"),
                          ("unsubscribe", "detoured_scot_unsub"), ("arrived", "detours_arrived")):
            around.add_metric([kind], core.get(key, 0))
        yield around
        lost = CounterMetricFamily(
            "pubsub_broker_undeliverable", "What could not be routed around a suspect, by reason "
            "(subscriber_at_suspect: its subscriber is a client of the suspect; no_way: no cluster left).",
            labels=["reason"],
        )
        lost.add_metric(["subscriber_at_suspect"], core.get("undeliverable_subscriber_at_suspect", 0))
        lost.add_metric(["no_way"], core.get("detour_undeliverable", 0))
        yield lost
        syncs = CounterMetricFamily(
            "pubsub_broker_syncs_applied", "Neighbours' tables applied after a restart or a suspicion (prt, clt).",
            labels=["table"]
        )
        for table in ("prt", "clt"):
            syncs.add_metric([table], core.get(f"{table}_syncs_applied", 0))
        yield syncs
        tables = GaugeMetricFamily(
            "pubsub_broker_table_entries", "Routing table sizes (CLT, SRT, PRT).", labels=["table"]
        )
        for table, size in app.table_sizes().items():
            if size is not None:
                tables.add_metric([table], size)
        yield tables
        clients = GaugeMetricFamily(
            "pubsub_broker_clients", "Client connections, subscriptions and advertisements.", labels=["what"]
        )
        for what, value in app.client_counts().items():
            clients.add_metric([what], value)
        yield clients
        idr = CounterMetricFamily("pubsub_broker_idr_cases", "scotIDR decisions by case (Alg. 4).", labels=["case"])
        for case in (1, 2, 3):
            idr.add_metric([str(case)], app.core.counters.get(f"idr_case_{case}", 0))
        yield idr

    def _links(self) -> Iterator[Metric]:
        app = self.app
        lst = app.core.lst
        queue = GaugeMetricFamily("pubsub_broker_link_queue", "Messages waiting on the link (Q_l).", labels=["link"])
        congested = GaugeMetricFamily(
            "pubsub_broker_link_congested", "1 while the link is congested (Eq. 3).", labels=["link"]
        )
        ce = GaugeMetricFamily("pubsub_broker_link_congestion", "The link's congestion element.", labels=["link"])
        windows = CounterMetricFamily(
            "pubsub_broker_link_congested_windows", "t_w windows after which the link was congested.", labels=["link"]
        )
        sent = CounterMetricFamily("pubsub_broker_link_sent", "Messages sent on the link.", labels=["link"])
        dropped = CounterMetricFamily(
            "pubsub_broker_link_dropped", "Messages lost to a full link queue.", labels=["link"]
        )
        rate = GaugeMetricFamily("pubsub_broker_link_rate_limit", "The link's rate limit, msg/s.", labels=["link"])
        for bid, link in sorted(app.links.items()):
            queue.add_metric([bid], link.queue_len())
            congested.add_metric([bid], 1 if lst.overloaded(bid) else 0)
            row = lst.rows.get(bid)
            ce.add_metric([bid], 0.0 if row is None else row.ce)
            windows.add_metric([bid], lst.congested_windows(bid))
            sent.add_metric([bid], link.sent)
            dropped.add_metric([bid], link.dropped)
            if link.rate is not None:
                rate.add_metric([bid], link.rate)
        yield from (queue, congested, ce, windows, sent, dropped, rate)


#: The core's counters of failure handling in the ``broker`` event (docs/events.md).
FAILURE_COUNTERS = ("detoured_publications", "detours_arrived", "rerouted_unacknowledged", "suppressed_duplicates",
                    "undeliverable_subscriber_at_suspect", "detour_undeliverable", "prt_syncs_applied",
                    "clt_syncs_applied")


class BrokerEvents(Observer):
    """``messages`` and ``broker`` events of the broker daemon (see the module docstring)."""

    def __init__(self, writer: EventWriter, app: Any, stats: Any, snapshot_every: int) -> None:
        self.writer = writer
        self.app = app
        self.snapshot_every = max(1, snapshot_every)
        self.messages = MessageDeltas(stats)
        self._last: dict[str, Any] | None = None

    def _state(self) -> dict[str, Any]:
        app = self.app
        return {
            "broker": app.me,
            "tables": app.table_sizes(),
            "clients": app.client_counts(),
            "links": {
                bid: {
                    "queue": link.queue_len(),
                    "congested": app.core.lst.overloaded(bid),
                    "state": app.link_state(bid),
                    "rate_limit": link.rate,
                }
                for bid, link in sorted(app.links.items())
            },
            "failures": {
                "suspected": sorted(app.detector.suspected),
                **{key: app.core.counters.get(key, 0) for key in FAILURE_COUNTERS},
            },
        }

    def ticked(self) -> None:
        interval = int(getattr(self.app, "intervals", 0))
        self.writer.emit("messages", interval=interval, **self.messages.delta())
        state = self._state()
        if state != self._last or interval % self.snapshot_every == 0:
            reason = "change" if state != self._last else "periodic"
            self.writer.emit("broker", **state, interval=interval, reason=reason)
            self._last = state
        self.writer.tick()

    def close(self) -> None:
        self.writer.close()


def broker_instrument(app: Any, stats: Any) -> Instrument:
    """The broker's `Instrument` for the daemon host: its collector and its events."""

    def make(topics: TopicLabels, events: EventWriter | None, settings: TelemetrySettings) -> Instruments:
        observers: list[Observer] = []
        if events is not None:
            observers.append(BrokerEvents(events, app, stats, settings.events_snapshot_every))
        return Instruments([BrokerCollector(app)], observers, KINDS)

    return make
