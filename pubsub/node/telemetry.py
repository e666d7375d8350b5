"""The node daemon's telemetry (handed to the daemon host, `pubsub.runtime.host`): its
Prometheus collector (topics, degrees, tries, stores, streams, deliveries by arrival path
and their latency) and its events (``snapshot`` of each topic's BuildSR state, ``delivery``
per stored publication; docs/events.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from pubsub.runtime.host import Instrument, Instruments
from pubsub.runtime.settings import TelemetrySettings
from pubsub.telemetry.events import EventWriter, Observer, SnapshotObserver, as_pair
from pubsub.telemetry.metrics import (
    LatencyHistogram,
    TopicLabels,
    by_label,
    counter_family,
    gauge_family,
    overlay_families,
)

#: Arrival paths of a stored publication, as label values.
VIAS = ("local", "handover", "tree", "flood", "antientropy")
#: Reasons a publication message is rejected (`AntiEntropy._reject`, and a publication at or
#: before the topic's retention horizon), as label values of pubsub_publications_rejected.
REJECTION_REASONS = (
    "unknown_message", "bad_prefix", "prefix_too_long", "bad_publish", "bad_hops", "bad_spread",
    "bad_sender", "bad_tuples", "bad_label", "label_too_long", "bad_hash", "bad_publication",
    "key_mismatch", "retention",
)


class DeliveryMetrics(Observer):
    """Publications a node stored for the first time, by arrival path, and their latency
    from ``published_ms`` (when the first node accepted it) to this node's commit."""

    def __init__(self) -> None:
        self.delivered: Counter[str] = Counter()
        self.latency = LatencyHistogram()
        self.unknown_published = 0

    def stored(self, rows: Sequence[Any]) -> None:
        for row in rows:
            via = VIA_NAMES.get(row.via, row.via)
            self.delivered[via] += 1
            published = row.publication.published_ms
            if published:
                self.latency.observe(via, max(0.0, (row.stored_at_ms - published) / 1000))
            else:
                self.unknown_published += 1


def _degree(ref: str, entry: Mapping[str, Any]) -> int:
    """Distinct other nodes one topic's state references (ring, list and shortcut edges)."""
    refs: set[str] = set()
    for key in ("left", "right", "ring"):
        pair = entry.get(key)
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[1] is not None:
            refs.add(str(pair[1]))
    for holder in (entry.get("shortcuts") or {}).values():
        if holder is not None:
            refs.add(str(holder))
    refs.discard(ref)
    return len(refs)


class NodeCollector:
    """A node's per-topic state and publication counters (`pubsub.node.app.NodeApp`)."""

    def __init__(self, app: Any, topics: TopicLabels, deliveries: DeliveryMetrics) -> None:
        self.app = app
        self.topics = topics
        self.deliveries = deliveries

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        app = self.app
        status = app.core.status()
        running: Mapping[str, Any] = status.get("topics") or {}
        length: dict[str, int] = {}
        degree: Counter[str] = Counter()
        trie: Counter[str] = Counter()
        for topic, entry in sorted(running.items()):
            value = self.topics(topic)
            bits = entry.get("label")
            length[value] = max(length.get(value, 0), len(bits) if bits else 0)
            degree[value] += _degree(app.ref, entry)
            trie[value] += int((entry.get("publications") or {}).get("count", 0) or 0)
        yield gauge_family("pubsub_node_topics", "Topics this node runs.", len(running))
        yield by_label(
            GaugeMetricFamily(
                "pubsub_node_label_length",
                "Length of this node's label in the topic's skip ring (0 while it has none).",
                labels=["topic"],
            ),
            length,
        )
        yield by_label(
            GaugeMetricFamily(
                "pubsub_node_degree",
                "Distinct nodes this node references for the topic (ring and shortcut edges).",
                labels=["topic"],
            ),
            degree,
        )
        yield by_label(
            GaugeMetricFamily(
                "pubsub_trie_publications", "Publications in the topic's Patricia trie.",
                labels=["topic"],
            ),
            trie,
        )
        counters = app.core.publication_counters()
        yield counter_family(
            "pubsub_antientropy_rounds", "Anti-entropy rounds started (CheckTrie of the root).",
            counters.get("rounds", 0),
        )
        yield counter_family(
            "pubsub_antientropy_repairs",
            "Publications received through anti-entropy (Publish) that were missing here.",
            counters.get("repairs", 0),
        )
        rejected = {
            key.removeprefix("rejected_"): value
            for key, value in counters.items()
            if key.startswith("rejected_") and key != "rejected_malformed"
        }
        yield by_label(
            CounterMetricFamily(
                "pubsub_publications_rejected",
                "Malformed publication messages rejected, by reason.",
                labels=["reason"],
            ),
            rejected,
            REJECTION_REASONS,
        )
        signing = getattr(app, "signing", None)
        if signing is not None:  # with TLS (`pubsub.node.signing`)
            yield by_label(
                CounterMetricFamily(
                    "pubsub_signature_rejections",
                    "Publications refused because their signature does not hold, by reason.",
                    labels=["reason"],
                ),
                signing.status()["rejected"],
            )
        yield by_label(
            CounterMetricFamily(
                "pubsub_publications_delivered",
                "Publications this node stored for the first time (durably), by arrival path.",
                labels=["via"],
            ),
            self.deliveries.delivered,
            VIAS,
        )
        yield self.deliveries.latency.family(
            "pubsub_delivery_latency_seconds",
            "Seconds from a publication's acceptance by its first node (published_ms) to "
            "its commit at this node, by arrival path.",
            VIAS,
        )
        yield counter_family(
            "pubsub_client_deliveries", "Delivery frames written to client streams.",
            app.deliveries.delivered,
        )
        yield gauge_family(
            "pubsub_client_streams", "Open client streams (Follow).",
            sum(app.deliveries.counts().values()),
        )
        yield counter_family("pubsub_store_commits", "Store commits since the start (under sync normal each "
                       "is one write to the store's journal).", app.store.commits)
        yield counter_family("pubsub_store_settles", "Transactions that moved the journal's commits into "
                       "SQLite since the start.", app.store.settles)
        yield from overlay_families(getattr(app.core.overlay, "measures", list)())


#: How `Stored.via` / `Arrival.via` values are named in delivery events.
VIA_NAMES = {"anti-entropy": "antientropy"}


def node_snapshot(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state fields of a ``snapshot`` event from one topic of ``status --node``
    (None: the node does not run the topic)."""
    if entry is None:
        return {
            "member": False,
            "leaving": False,
            "label": None,
            "left": None,
            "right": None,
            "ring": None,
            "shortcuts": {},
            "neighbours": [],
            "trie_root": "",
            "trie_size": 0,
        }
    pubs = entry.get("publications") or {}
    size = int(pubs.get("count", 0) or 0)
    root = pubs.get("root")
    root_hex = str(root[1]) if size and isinstance(root, (list, tuple)) and len(root) == 2 else ""
    shortcuts = entry.get("shortcuts") or {}
    return {
        "member": True,
        "leaving": bool(entry.get("leaving", False)),
        "label": entry.get("label"),
        "left": as_pair(entry.get("left")),
        "right": as_pair(entry.get("right")),
        "ring": as_pair(entry.get("ring")),
        "shortcuts": {str(k): v for k, v in sorted(shortcuts.items())},
        "neighbours": [str(u) for u in entry.get("neighbours") or []],  # an overlay without a ring's pointers (tco)
        "trie_root": root_hex,
        "trie_size": size,
    }


class NodeEvents(SnapshotObserver):
    """``snapshot``, ``messages`` and ``delivery`` events of a node daemon (`NodeApp`)."""

    kind = "snapshot"

    def touched(self) -> None:
        self._schedule()

    def _states(self, topics: Iterable[str] | None) -> dict[str, dict[str, Any]]:
        running = self.app.core.status().get("topics") or {}
        names = (set(running) | set(self._last)) if topics is None else set(topics)
        return {t: node_snapshot(running.get(t)) for t in sorted(names)}

    def _gone(self, state: dict[str, Any]) -> bool:
        return not state["member"]

    def stored(self, rows: Sequence[Any]) -> None:
        for row in rows:
            p = row.publication
            self.writer.emit(
                "delivery",
                topic=row.topic,
                key=p.key.hex(),
                publisher=p.publisher,
                seq=p.seq,
                published_ts=p.published_ms / 1000 if p.published_ms else None,
                delivered_ts=row.stored_at_ms / 1000,
                via=VIA_NAMES.get(row.via, row.via),
                hops=row.hops,
            )
        self._schedule()


def node_instrument(app: Any, stats: Any, kinds: tuple[str, ...]) -> Instrument:
    """The node's `Instrument` for the daemon host: its collector and its observers, and the
    message kinds its runtime's counters report from the start (the overlay's, `Overlay.kinds`)."""

    def make(topics: TopicLabels, events: EventWriter | None, settings: TelemetrySettings) -> Instruments:
        deliveries = DeliveryMetrics()
        observers: list[Observer] = [deliveries]
        if events is not None:
            observers.append(NodeEvents(events, app, stats, settings.events_snapshot_every))
        return Instruments([NodeCollector(app, topics, deliveries)], observers, kinds)

    return make
