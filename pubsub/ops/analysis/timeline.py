"""Legitimacy of one topic over time, from its snapshot events (pure Python, no Spark).

How time is handled.  A `snapshot` event (docs/events.md) is a state change: the node held
that state from the event's ``ts`` until its next snapshot for the topic.  The state of a
topic at time t is therefore, for every node, its latest snapshot with ``ts <= t``; the
members at t are the nodes whose latest snapshot has ``member = true``.  A `marker` whose
action is in `REMOVING_ACTIONS` (a crash) also ends the state of each node it targets at
the marker's ``ts`` (on every topic: a dead node keeps no edges), until the node writes a
new snapshot (after a restart).  All daemons of a run share one machine clock (Unix time).

The scan turns the time-ordered events of one topic into a step function: one `Step` per
instant at which any measured value changes, each valid until the next one.  From it:

* a timeline over fixed buckets [t0 + b*w, t0 + (b+1)*w): the values at each bucket's end
  (state at or before it) and the fraction of the bucket during which the topic was
  legitimate (exact, from the steps);
* the time to legitimacy after a marker at time m: the first t >= m from which the topic
  is legitimate for at least ``stable`` seconds without interruption, or until the end of
  the data; ``stable = 0`` is simply the first legitimate instant at or after m.  The
  stability window skips a legitimacy that lasts only until the marker's perturbation
  shows up in the next snapshots (a marker is written a moment before its effect).
* the degree distribution of the members at the end of the data.

What is measured, and what legitimate means, is the overlay's: its `TopicTracker`
(`pubsub.kernel.contracts.Overlay.topic_tracker`, looked up by the overlay's name; the
default overlay's unless told otherwise) is handed each node's snapshots in time order and
gives the measures of a `Step` after every instant.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pubsub.kernel import registry
from pubsub.kernel.contracts import Snapshot, TopicTracker

#: Marker actions after which the targeted nodes hold no state until their next snapshot.
REMOVING_ACTIONS = frozenset({"crash", "kill"})


@dataclass(frozen=True)
class Step:
    """The measured values of one topic, valid from ``ts`` until the next step."""

    ts: float
    members: int
    legitimate: bool
    labels_ok: bool
    roots_equal: bool
    exact_nodes: int
    correct_edges: int
    compared_edges: int
    mean_degree: float
    max_degree: int

    @property
    def correct_fraction(self) -> float | None:
        """Correct edge slots / compared slots; None without members, 1.0 with no edges."""
        if self.members == 0:
            return None
        return self.correct_edges / self.compared_edges if self.compared_edges else 1.0

    def values(self) -> tuple[object, ...]:
        """Every measured value (all fields but ``ts``)."""
        return (
            self.members,
            self.legitimate,
            self.labels_ok,
            self.roots_equal,
            self.exact_nodes,
            self.correct_edges,
            self.compared_edges,
            self.mean_degree,
            self.max_degree,
        )


@dataclass(frozen=True)
class Marker:
    """A perturbation or scenario step (a `marker` event)."""

    id: str
    action: str
    ts: float
    topic: str | None
    targets: tuple[str, ...] = ()


#: One input row of the scan: (ts, node ref, its new snapshot (the overlay's fields, see
#: `SNAPSHOT_FIELDS`), or None when it left / died).
Change = tuple[float, str, Snapshot | None]


class NotMeasured(ValueError):
    """The overlay has no `TopicTracker`: the analysis does not measure it (yet)."""


def tracker_factory(overlay: str = registry.DEFAULT_OVERLAY) -> Callable[[], TopicTracker]:
    """The registered overlay's `Overlay.topic_tracker`; `NotMeasured` when it has none,
    UnknownMode (`pubsub.kernel.registry`) when there is no such overlay."""
    factory = registry.overlay(overlay).topic_tracker
    if factory is None:
        raise NotMeasured(
            f"the convergence analysis does not measure the {overlay!r} overlay yet "
            "(its Overlay.topic_tracker is None)"
        )
    return factory


def scan(
    changes: Iterable[Change], tracker: TopicTracker | None = None
) -> tuple[list[Step], TopicTracker]:
    """Apply time-ordered changes to `tracker` (default: a new one of the default
    overlay's); one step per instant at which a value changes."""
    state = tracker if tracker is not None else tracker_factory()()
    steps: list[Step] = []
    pending_ts: float | None = None
    for ts, ref, snapshot in sorted(changes, key=lambda c: c[0]):
        if pending_ts is not None and ts != pending_ts:
            _record(steps, Step(ts=pending_ts, **state.measures()))
        state.apply(ref, snapshot)
        pending_ts = ts
    if pending_ts is not None:
        _record(steps, Step(ts=pending_ts, **state.measures()))
    return steps, state


def _record(steps: list[Step], step: Step) -> None:
    if not steps or steps[-1].values() != step.values():
        steps.append(step)


def step_at(steps: Sequence[Step], ts: float) -> Step | None:
    """The step in force at ``ts`` (latest with step.ts <= ts), or None before the first."""
    lo, hi = 0, len(steps)
    while lo < hi:
        mid = (lo + hi) // 2
        if steps[mid].ts <= ts:
            lo = mid + 1
        else:
            hi = mid
    return steps[lo - 1] if lo else None


def legitimate_runs(steps: Sequence[Step], t_end: float) -> list[tuple[float, float, bool]]:
    """Maximal runs of legitimacy: (start, end, reaches_end_of_data)."""
    runs: list[tuple[float, float, bool]] = []
    start: float | None = None
    for step in steps:
        if step.legitimate and start is None:
            start = step.ts
        elif not step.legitimate and start is not None:
            runs.append((start, step.ts, False))
            start = None
    if start is not None:
        runs.append((start, max(start, t_end), True))
    return runs


def time_to_legitimacy(
    runs: Sequence[tuple[float, float, bool]], marker_ts: float, stable: float
) -> float | None:
    """Absolute time at which the topic is legitimate again after ``marker_ts`` (see module
    docstring), or None if it never is within the data."""
    for start, end, to_end in runs:
        if end < marker_ts or (end == marker_ts and not to_end):
            continue
        begin = max(start, marker_ts)
        if to_end or end - begin >= stable:
            return begin
    return None


def legitimate_time(steps: Sequence[Step], start: float, end: float) -> float:
    """Seconds within [start, end) during which the topic was legitimate."""
    if end <= start or not steps:
        return 0.0
    total = 0.0
    for i, step in enumerate(steps):
        seg_start = step.ts
        seg_end = steps[i + 1].ts if i + 1 < len(steps) else math.inf
        if seg_end <= start or seg_start >= end:
            continue
        if step.legitimate:
            total += min(seg_end, end) - max(seg_start, start)
    return total


@dataclass(frozen=True)
class Grid:
    """The time buckets shared by every topic of a run."""

    t0: float
    t_end: float
    width: float

    @property
    def count(self) -> int:
        return max(1, math.ceil((self.t_end - self.t0) / self.width - 1e-9))

    def index(self, ts: float) -> int:
        return min(self.count - 1, max(0, math.floor((ts - self.t0) / self.width)))

    def bounds(self, b: int) -> tuple[float, float]:
        return (self.t0 + b * self.width, self.t0 + (b + 1) * self.width)


def bucket_rows(topic: str, steps: Sequence[Step], grid: Grid) -> list[dict[str, Any]]:
    """The convergence timeline of one topic: one row per bucket from its first event."""
    if not steps:
        return []
    rows: list[dict[str, Any]] = []
    k = 0  # index of the step in force at the current bucket's end
    first = grid.index(steps[0].ts)
    for b in range(first, grid.count):
        start, end = grid.bounds(b)
        while k + 1 < len(steps) and steps[k + 1].ts <= end:
            k += 1
        step = steps[k] if steps[k].ts <= end else None
        observed_end = min(end, max(grid.t_end, start))
        span = observed_end - start
        if span > 0:
            # Only the steps overlapping this bucket matter; walk back from k.
            j = k
            while j > 0 and steps[j].ts > start:
                j -= 1
            fraction = legitimate_time(steps[j : k + 1], start, observed_end) / span
        else:
            fraction = 1.0 if step is not None and step.legitimate else 0.0
        rows.append(
            {
                "topic": topic,
                "bucket": b,
                "t_start": start - grid.t0,
                "t_end": end - grid.t0,
                "ts_end": end,
                "members": step.members if step else 0,
                "legitimate": bool(step and step.legitimate),
                "legitimate_fraction": round(min(1.0, max(0.0, fraction)), 9),
                "correct_fraction": step.correct_fraction if step else None,
                "correct_edges": step.correct_edges if step else 0,
                "compared_edges": step.compared_edges if step else 0,
                "exact_nodes": step.exact_nodes if step else 0,
                "labels_ok": bool(step and step.labels_ok),
                "roots_equal": bool(step and step.roots_equal),
                "mean_degree": step.mean_degree if step else 0.0,
                "max_degree": step.max_degree if step else 0,
            }
        )
    return rows


def analyse_topic(
    topic: str,
    changes: Iterable[Change],
    markers: Sequence[Marker],
    status_checks: Sequence[tuple[float, bool | None, int | None]],
    grid: Grid,
    stable: float,
    overlay: str = registry.DEFAULT_OVERLAY,
) -> dict[str, Any]:
    """Everything the job reports about one topic, as plain picklable values.

    ``changes`` are the topic's snapshot changes; removals by crash markers are added here
    (for the nodes the topic has seen).  ``markers`` are all markers of the run; those
    without a topic or with this topic get a convergence row.  ``status_checks`` are the
    experiment runner's (ts, legitimate, members) observations for this topic.  The
    measures are those of the `overlay`'s `TopicTracker` (`NotMeasured` if it has none).
    """
    tracker = tracker_factory(overlay)()
    changes = list(changes)
    seen = {ref for _, ref, _ in changes}
    for m in markers:
        if m.action in REMOVING_ACTIONS:
            changes.extend((m.ts, ref, None) for ref in m.targets if ref in seen)
    steps, final = scan(changes, tracker)
    runs = legitimate_runs(steps, grid.t_end)

    convergence: list[dict[str, Any]] = []
    for m in sorted(markers, key=lambda m: m.ts):
        if m.topic is not None and m.topic != topic:
            continue
        reached = time_to_legitimacy(runs, m.ts, stable) if steps else None
        convergence.append(
            {
                "marker_id": m.id,
                "action": m.action,
                "topic": topic,
                "marker_ts": m.ts,
                "marker_t": m.ts - grid.t0,
                "reached": reached is not None,
                "legitimate_ts": reached,
                "time_to_legitimacy": None if reached is None else reached - m.ts,
            }
        )

    observed = [
        {
            "topic": topic,
            "ts": ts,
            "t": ts - grid.t0,
            "runner_legitimate": legit,
            "runner_members": members,
            "analysis_legitimate": bool((s := step_at(steps, ts)) and s.legitimate),
            "analysis_members": s.members if s else 0,
        }
        for ts, legit, members in status_checks
    ]
    for row in observed:
        row["agree"] = row["runner_legitimate"] is None or (
            row["runner_legitimate"] == row["analysis_legitimate"]
        )

    degrees = Counter(final.degrees())
    ideal_degrees = Counter(final.ideal_degrees())
    degree_rows = [
        {
            "topic": topic,
            "degree": d,
            "nodes": degrees.get(d, 0),
            "ideal_nodes": ideal_degrees.get(d, 0),
        }
        for d in sorted(set(degrees) | set(ideal_degrees))
    ]
    begin = steps[0].ts if steps else grid.t_end
    span = grid.t_end - begin
    legit_time = legitimate_time(steps, begin, grid.t_end)
    last = steps[-1] if steps else None
    return {
        "topic": topic,
        "steps": [asdict(s) | {"t": s.ts - grid.t0, "topic": topic} for s in steps],
        "timeline": bucket_rows(topic, steps, grid),
        "convergence": convergence,
        "status_checks": observed,
        "degrees": degree_rows,
        "summary": {
            "first_ts": begin,
            "observed_seconds": span,
            "legitimate_seconds": legit_time,
            "legitimate_fraction": (legit_time / span)
            if span > 0
            else float(bool(last and last.legitimate)),
            "legitimate_at_end": bool(last and last.legitimate),
            "members_at_end": last.members if last else 0,
            "correct_fraction_at_end": last.correct_fraction if last else None,
            "legitimate_runs": [[a - grid.t0, b - grid.t0] for a, b, _ in runs],
        },
    }


def markers_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Marker]:
    """Markers from event rows (id, action, ts, topic, targets), skipping unusable ones."""
    out: list[Marker] = []
    for i, row in enumerate(rows):
        ts = row.get("ts")
        if not isinstance(ts, (int, float)) or not math.isfinite(ts):
            continue
        targets = row.get("targets") or ()
        out.append(
            Marker(
                id=str(row.get("id") or f"marker-{i}"),
                action=str(row.get("action") or "unknown"),
                ts=float(ts),
                topic=row.get("topic") if isinstance(row.get("topic"), str) else None,
                targets=tuple(t for t in targets if isinstance(t, str)),
            )
        )
    return out


#: The fields of a `snapshot` event (docs/events.md) the Spark job hands over, after ts,
#: source and member: what the overlays' trackers read.
SNAPSHOT_FIELDS = ("label", "left", "right", "ring", "shortcuts", "neighbours", "trie_root")

#: One snapshot as the Spark job hands it over: (ts, source, member, *SNAPSHOT_FIELDS).
Record = tuple[Any, ...]


def changes_from_records(records: Iterable[Record]) -> list[Change]:
    """Snapshot records to scan changes (a non-member snapshot removes the node)."""
    changes: list[Change] = []
    for ts, source, member, *fields in records:
        snapshot = dict(zip(SNAPSHOT_FIELDS, fields, strict=True)) if member else None
        changes.append((float(ts), source, snapshot))
    return changes


def topic_task(
    item: tuple[str, Iterable[Record]],
    markers: Sequence[Marker],
    status: Mapping[str, Sequence[tuple[float, bool | None, int | None]]],
    grid: Grid,
    stable: float,
    overlay: str = registry.DEFAULT_OVERLAY,
) -> dict[str, Any]:
    """The per-topic work of the Spark job: (topic, its snapshot records) -> results."""
    topic, records = item
    return analyse_topic(
        topic, changes_from_records(records), markers, status.get(topic, ()), grid, stable, overlay
    )
