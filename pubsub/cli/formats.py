"""How the client commands print deliveries, acknowledgements and daemons' status."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

from pubsub.client.library import Ack
from pubsub.kernel import registry
from pubsub.publications.messages import Delivery
from pubsub.skipring.labels import Label, LabelError

#: How a text line marks a payload shown in base64 (`format_delivery`).
BASE64_PREFIX = "base64:"


def _payload_fields(payload: bytes) -> dict[str, Any]:
    try:
        return {"payload": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"payload": None, "payload_base64": base64.b64encode(payload).decode("ascii")}


def format_delivery(delivery: Delivery, as_json: bool = False, incarnation: str | None = None) -> str:
    """One delivery as a line: ``#LOCAL PUBLISHER#SEQ PAYLOAD`` or a JSON object.

    In text, a payload that is not UTF-8, or whose text begins with ``base64:`` itself, is
    shown as ``base64:`` and its bytes in base64, so that such a line always decodes to the
    exact payload; other text is shown with ``\\``, line feeds and carriage returns escaped
    (``\\\\``, ``\\n``, ``\\r``).  JSON carries the text as "payload", or "payload_base64" when it is not UTF-8,
    the publisher's "msg_id", and the "cursor" to resume after this delivery
    (``--since INCARNATION:LOCAL``; null when the node named no store incarnation).
    """
    if as_json:
        return json.dumps(
            {
                "topic": delivery.topic,
                "local_seq": delivery.local_seq,
                "cursor": f"{incarnation}:{delivery.local_seq}" if incarnation else None,
                "msg_id": delivery.msg_id or None,
                "publisher": delivery.publisher,
                "seq": delivery.seq,
                "key": delivery.key.hex(),
                "stored_at_ms": delivery.stored_at_ms,
                "published_ms": delivery.published_ms or None,
                **_payload_fields(delivery.payload),
            },
            ensure_ascii=False,
        )
    try:
        text: str | None = delivery.payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or text.startswith(BASE64_PREFIX):
        text = BASE64_PREFIX + base64.b64encode(delivery.payload).decode("ascii")
    else:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"#{delivery.local_seq} {delivery.publisher}#{delivery.seq} {text}"


def format_ack(ack: Ack, as_json: bool = False) -> str:
    """One acknowledgement as a line of text or a JSON object."""
    if as_json:
        return json.dumps(ack.as_dict())
    if ack.local_seq is not None:  # noqa: SIM108 - nested, the two cases read better apart
        where = f"local #{ack.local_seq}; "
    else:  # a duplicate names an earlier publication, whose local number the answer lacks
        where = "" if ack.duplicate else "handed over; "
    durable = "durable" if ack.durable else "NOT durable: the member keeps no store"
    again = ", a duplicate of an earlier request" if ack.duplicate else ""
    return (
        f"ack {ack.topic} {ack.publisher}#{ack.seq} key {ack.key.hex()[:16]} "
        f"stored by {ack.stored_by} ({where}{durable}{again})"
    )


# --- text rendering ----------------------------------------------------------------------------
def _label_key(bits: object) -> tuple[int, Any]:
    try:
        return (0, Label(str(bits)))
    except LabelError:
        return (1, str(bits))


def _contact(value: object) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"{value[0]} @ {value[1]}"
    return "-" if value is None else str(value)


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(indent + "  ".join(cells).rstrip())
    return lines


def format_stats(stats: object) -> str:
    """One line summarizing the runtime counters of a status reply."""
    if not isinstance(stats, dict):
        return "stats: -"
    frames_in = sum(stats.get("frames_in", {}).values())
    frames_out = sum(stats.get("frames_out", {}).values())
    errors = stats.get("errors", {})
    err = ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "none"
    return (
        f"stats: frames in {frames_in}, out {frames_out}; errors: {err}; "
        f"dropped sends {stats.get('dropped_sends', 0)}; "
        f"peers unreachable {stats.get('peers_unreachable', 0)}; "
        f"connections open {stats.get('connections_open', 0)}"
    )


def format_supervisor_status(body: dict[str, Any]) -> str:
    """The supervisor's status as text: per topic, its members ordered by label."""
    lines = [f"supervisor {body.get('ref', '?')}"]
    topics = body.get("topics") or {}
    if not topics:
        lines.append("no topics")
    for topic, entry in sorted(topics.items()):
        members = entry.get("members", []) if isinstance(entry, dict) else []
        extra = ""
        if isinstance(entry, dict) and "legitimate_database" in entry:
            extra = (
                ", database legitimate" if entry["legitimate_database"] else ", database repairing"
            )
        lines.append(
            f"topic {topic}: {len(members)} member{'s' if len(members) != 1 else ''}{extra}"
        )
        if members:
            rows = [["LABEL", "REF"]] + [
                [str(m.get("label")), str(m.get("ref"))]
                for m in sorted(members, key=lambda m: _label_key(m.get("label")))
            ]
            lines.extend(_table(rows))
    lines.append(format_stats(body.get("stats")))
    return "\n".join(lines)


def format_node_status(body: dict[str, Any]) -> str:
    """A node's status as text: per topic, label, left, right, ring and shortcuts."""
    lines = [f"node {body.get('ref', '?')}  supervisor {body.get('supervisor', '?')}"]
    name = str(body.get("overlay") or registry.DEFAULT_OVERLAY)
    overlay = registry.overlay(name) if name in registry.overlay_names() else None
    if overlay is not None and overlay.status_lines is not None:
        lines.extend(overlay.status_lines(body))
    topics = body.get("topics") or {}
    if not topics:
        lines.append("no topics")
    for topic, entry in sorted(topics.items()):
        if not isinstance(entry, dict):
            lines.append(f"topic {topic}: {entry}")
            continue
        state = " (leaving)" if entry.get("leaving") else ""
        lines.append(f"topic {topic}{state}")
        rows = []
        if "label" in entry:  # the skip ring's pointers (paper 000, Struct 1)
            rows.append(["label", str(entry.get("label") or "-")])
            for key in ("left", "right", "ring"):
                rows.append([key, _contact(entry.get(key))])
            shortcuts = entry.get("shortcuts") or {}
            if isinstance(shortcuts, dict) and shortcuts:
                for i, (label, ref) in enumerate(
                    sorted(shortcuts.items(), key=lambda kv: _label_key(kv[0]))
                ):
                    rows.append(["shortcuts" if i == 0 else "", f"{label} @ {ref or '?'}"])
            else:
                rows.append(["shortcuts", "-"])
        publications = entry.get("publications")
        if isinstance(publications, dict):
            rows.append(["publications", _topic_publications(publications)])
        retention = entry.get("retention")
        if isinstance(retention, dict):
            rows.append(["retention", _retention_row(retention)])
        known = {"label", "left", "right", "ring", "shortcuts", "leaving", "publications", "retention"}
        rows.extend([k, json.dumps(v)] for k, v in sorted(entry.items()) if k not in known)
        lines.extend(_table(rows))
    section = body.get("publications")
    if isinstance(section, dict):
        lines.append(format_publications(section))
    lines.append(format_stats(body.get("stats")))
    return "\n".join(lines)


#: Milliseconds per unit of the durations retention prints (and `retention set` reads).
DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
#: Sizes printed exactly in the largest unit that divides them, binary units first.
_SIZE_UNITS = (
    ("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024),
    ("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("kB", 1000),
)


def duration_text(ms: int) -> str:
    """`ms` in the largest unit that divides it exactly, as `retention set` reads it: 1d, 90s."""
    for unit in ("w", "d", "h", "m", "s"):
        if ms % DURATION_MS[unit] == 0:
            return f"{ms // DURATION_MS[unit]}{unit}"
    return f"{ms}ms"


def size_text(size: int) -> str:
    """`size` bytes in the largest unit that divides it exactly, as `retention set` reads
    it: 10MiB, 64kB, 1500B."""
    for unit, scale in _SIZE_UNITS:
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def utc_ms_text(ms: int) -> str:
    """A Unix time in ms as an operator reads it: ``2026-11-28 20:22:11.764 UTC``."""
    stamp = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def retention_limits_text(settings: dict[str, Any]) -> str:
    """A topic's retention limits (`pubsub.publications.retention.Policy` as a status or the
    supervisor reports it) in one line: ``max-age 1d, max-count 2, max-bytes 10MiB``."""
    age, count, size = settings.get("max_age_ms"), settings.get("max_count"), settings.get("max_bytes")
    parts = [
        f"max-age {duration_text(age)}" if age else "max-age none",
        f"max-count {count}" if count else "max-count none",
        f"max-bytes {size_text(size)}" if size else "max-bytes none",
    ]
    purged = settings.get("purged_ms")
    if purged:
        parts.append(f"purged at {utc_ms_text(purged)}")
    return ", ".join(parts)


def _retention_row(settings: dict[str, Any]) -> str:
    """A node's retention entry of a topic: its limits and how far it has removed."""
    text = retention_limits_text(settings)
    through = settings.get("through_ms")
    if through:
        key = str(settings.get("through_key") or "")[:8]
        text += f"; removed through {utc_ms_text(through)} (key {key}...)"
    return text


def _topic_publications(section: dict[str, Any]) -> str:
    root = section.get("root")
    root_text = (
        f"{root[0] or '⊥'}:{str(root[1])[:8]}" if isinstance(root, list) and len(root) == 2 else "-"
    )
    return (
        f"{section.get('count', 0)} held, local #{section.get('latest_local_seq', 0)}, "
        f"root {root_text}, rejected {section.get('rejected_malformed', 0)}"
    )


def format_publications(section: dict[str, Any]) -> str:
    """One line summarizing the publication section of a node's status."""
    store = section.get("store", "?")
    durability = f"sync {section.get('sync')}" if section.get("durable") else "in memory only"
    return (
        f"publications: store {store} ({durability}); dissemination "
        f"{section.get('dissemination') or ('flood' if section.get('flooding') else 'off')}; max payload "
        f"{section.get('max_payload_bytes')} B; next seq {section.get('next_seq')}; "
        f"streams {section.get('streams', 0)}; delivered {section.get('delivered', 0)}; "
        f"hand-overs pending {section.get('handovers_pending', 0)}; "
        f"unwritten {section.get('unwritten', 0)}; "
        f"rejected malformed {section.get('rejected_malformed', 0)}"
    )
