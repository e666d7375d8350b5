"""The status body of the node daemon (``StatusRequest``, README: `status --node`): the
core's status with per-topic publication details, the node's publication section -- its
store, group commit, streams, hand-overs, ordering, retention and signatures -- and the
runtime's counters under "stats".

It reads the parts of the node's application (`pubsub.node.app.NodeApp`) that `StatusSource`
names, and changes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pubsub.kernel.executor import Executor
from pubsub.node.commits import GroupCommit
from pubsub.node.delivery import Deliveries
from pubsub.node.retention import RetentionKeeper
from pubsub.node.store import PublicationStore
from pubsub.publications.hosted import HostedNode
from pubsub.runtime.stats import Stats

if TYPE_CHECKING:
    from pubsub.node.signing import Signing

#: The counters of a node's status that are always there, 0 until counted (the README's
#: "Status JSON" names them; others, such as ``publish_failed_<code>``, appear once counted).
HANDOVER_COUNTERS = ("started", "succeeded", "failed", "retries", "refused", "step_timeouts", "stale_replies")
NODE_COUNTERS = ("published_local", "handovers_started", "handovers_succeeded", "handovers_received", "spreads_held")
ORDER_COUNTERS = ("in_order", "waited", "released_late", "admitted")


def _counters(counted: Mapping[str, int], always: tuple[str, ...]) -> dict[str, int]:
    """`always` (0 when not counted) and every other counter above 0, sorted by name."""
    return {k: counted.get(k, 0) for k in sorted({*always, *(k for k, v in counted.items() if v)})}


class StatusSource(Protocol):
    """What the status reads of the node's application (`pubsub.node.app.NodeApp`)."""

    core: HostedNode
    store: PublicationStore
    commits: GroupCommit
    deliveries: Deliveries
    executor: Executor
    retention: RetentionKeeper
    signing: Signing | None
    stats: Stats
    #: The daemon's own counters (``published_local``, ``publish_failed_<code>``, ...).
    counters: Counter[str]


def node_status(node: StatusSource) -> dict[str, Any]:
    """The core's status with per-topic publication details, the node's publication
    section and the runtime counters (README: `status --node`)."""
    body: dict[str, Any] = dict(node.core.status())
    streams = node.deliveries.counts()
    totals: Counter[str] = Counter()
    by_topic: dict[str, dict[str, int]] = {}
    for topic, entry in (body.get("topics") or {}).items():
        topic_counters = node.core.topic_counters(topic)
        if topic_counters is None or not isinstance(entry, dict):
            continue
        counters = {k: v for k, v in sorted(topic_counters.items()) if v}
        # Only values that change with the publications held (not with every round),
        # so that two looks at a quiet node compare equal.
        section = dict(entry.get("publications") or {})
        section["latest_local_seq"] = node.store.latest(topic)
        section["rejected_malformed"] = counters.get("rejected_malformed", 0)
        entry["publications"] = section
        by_topic[topic] = counters
        totals.update(counters)
    layer: dict[str, Any] = node.core.layer_status()
    body["publications"] = {
        "store": node.store.location,
        "durable": node.store.durable,
        "sync": node.store.sync,
        "flooding": bool(node.core.flooding),
        "dissemination": node.core.dissemination,
        "max_payload_bytes": node.core.max_payload_bytes,
        "next_seq": node.core.next_seq,
        "seq_reserved": node.store.seq_reserved,
        "stored": {t: n for t, n in sorted(node.store.topics().items())},
        "unwritten": node.commits.unwritten,
        "commits": node.store.commits,
        "group_commits": {"batches": node.commits.batches, "rows": node.commits.rows_written},
        "streams": sum(streams.values()),
        "streams_by_topic": {t: n for t, n in sorted(streams.items())},
        "streams_opened": node.deliveries.opened,
        "delivered": node.deliveries.delivered,
        "handovers_pending": layer["handovers_pending"],
        "handover": _counters(layer["handover_counters"], HANDOVER_COUNTERS),
        "node": _counters(
            node.counters + layer["publishing_counters"] + Counter(spreads_held=node.executor.holds),
            NODE_COUNTERS,
        ),
        "message_ids": layer["message_ids"],
        "order": {
            "waiting": layer["order_waiting"],
            **_counters(layer["order_counters"], ORDER_COUNTERS),
        },
        "rejected_malformed": totals.get("rejected_malformed", 0),
        "retention": node.retention.status(),
        "counters": dict(sorted(totals.items())),
        "topic_counters": by_topic,
    }
    if node.signing is not None:
        body["publications"]["signatures"] = node.signing.status()
    body["stats"] = node.stats.snapshot()
    return body
