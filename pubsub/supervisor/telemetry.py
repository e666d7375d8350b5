"""The supervisor daemon's telemetry (handed to the daemon host, `pubsub.runtime.host`):
its Prometheus collector (topics, members, legitimacy of the databases, configuration
requests) and its ``supervisor`` events (each topic's membership as it changes)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from pubsub.runtime.host import Instrument, Instruments
from pubsub.runtime.settings import TelemetrySettings
from pubsub.telemetry.events import EventWriter, Observer, SnapshotObserver
from pubsub.telemetry.metrics import TopicLabels, by_label, counter_family, gauge_family, overlay_families


class SupervisorCollector:
    """The supervisor's databases and its configuration traffic."""

    def __init__(self, app: Any, topics: TopicLabels) -> None:
        self.app = app
        self.topics = topics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        app = self.app
        status = app.core.status()
        running: Mapping[str, Any] = status.get("topics") or {}
        members: Counter[str] = Counter()
        legit: dict[str, int] = {}
        for topic, entry in sorted(running.items()):
            value = self.topics(topic)
            members[value] += int(entry.get("n", 0))
            ok = 1 if entry.get("legitimate_database") else 0
            legit[value] = min(legit.get(value, 1), ok)
        yield gauge_family("pubsub_supervisor_topics", "Topics in the supervisor's database.",
                     len(running))
        yield by_label(
            GaugeMetricFamily(
                "pubsub_topic_members", "Subscribers in the topic's database (n).",
                labels=["topic"],
            ),
            members,
        )
        yield by_label(
            GaugeMetricFamily(
                "pubsub_topic_legitimate_database",
                "1 when the topic's labels are exactly l(0..n-1), each with its own subscriber.",
                labels=["topic"],
            ),
            legit,
        )
        counters = app.core.config_counters
        yield counter_family(
            "pubsub_supervisor_configuration_requests",
            "GetConfiguration requests received.",
            counters.get("configuration_requests", 0),
        )
        sent = CounterMetricFamily(
            "pubsub_supervisor_configurations_sent",
            "SetData sent: kind=configuration (a label and neighbours) or kind=none (⊥: not "
            "a member, or permission to leave).",
            labels=["kind"],
        )
        sent.add_metric(["configuration"], counters.get("configurations_sent", 0))
        sent.add_metric(["none"], counters.get("configurations_none", 0))
        yield sent
        yield counter_family(
            "pubsub_supervisor_crashes_detected", "Subscribers removed as crashed.",
            int(status.get("crashes_detected", 0)),
        )
        yield gauge_family(
            "pubsub_supervisor_suspects", "Subscribers being probed after a crash hint.",
            len(status.get("suspects") or ()),
        )
        yield from overlay_families(getattr(app.core, "measures", list)())


class SupervisorEvents(SnapshotObserver):
    """``supervisor`` and ``messages`` events of the supervisor daemon (`SupervisorApp`).

    Changes are learnt from the database journal (`changed`), so a check looks only at
    the topics that changed; `start` reports every topic of the loaded database.
    """

    kind = "supervisor"

    def __init__(self, writer: EventWriter, app: Any, stats: Any, snapshot_every: int) -> None:
        super().__init__(writer, app, stats, snapshot_every)
        self._dirty: set[str] = set()

    def start(self) -> None:
        self._check(None)

    def _pending_topics(self) -> Iterable[str] | None:
        dirty, self._dirty = self._dirty, set()
        return dirty

    def _states(self, topics: Iterable[str] | None) -> dict[str, dict[str, Any]]:
        running = self.app.core.status().get("topics") or {}
        names = (set(running) | set(self._last)) if topics is None else set(topics)
        out: dict[str, dict[str, Any]] = {}
        for topic in sorted(names):
            entry = running.get(topic) or {}
            out[topic] = {
                "n": int(entry.get("n", 0)),
                "legitimate_database": bool(entry.get("legitimate_database", True)),
                "members": [[m.get("label"), m.get("ref")] for m in entry.get("members", [])],
            }
            if "edges" in entry:  # an overlay whose record holds edges (tco)
                out[topic]["edges"] = entry["edges"]
        return out

    def _repairs(self) -> None:
        """One ``repair`` event per repair the core ran since the last call (tco)."""
        for repair in getattr(self.app.core, "drain_repairs", list)():
            self.writer.emit("repair", **repair, interval=self.interval)

    def changed(self, topics: Iterable[str]) -> None:
        self._repairs()
        self._dirty.update(topics)
        if self._dirty:
            self._schedule()

    def ticked(self) -> None:
        self._repairs()
        super().ticked()

    def _gone(self, state: dict[str, Any]) -> bool:
        return state["n"] == 0


def supervisor_instrument(app: Any, stats: Any, kinds: tuple[str, ...]) -> Instrument:
    """The supervisor's `Instrument` for the daemon host: its collector and its events, and
    the message kinds its runtime's counters report from the start (`Overlay.kinds`)."""

    def make(topics: TopicLabels, events: EventWriter | None, settings: TelemetrySettings) -> Instruments:
        observers: list[Observer] = []
        if events is not None:
            observer = SupervisorEvents(events, app, stats, settings.events_snapshot_every)
            observer.start()
            observers.append(observer)
        return Instruments([SupervisorCollector(app, topics)], observers, kinds)

    return make
