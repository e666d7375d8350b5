"""One frame per peer per Timeout: bundling the maintenance messages of one round (issue 11).

A daemon's periodic action sends several messages to the same peer -- per topic they share,
a node sends its ring neighbours BuildSR checks and shortcut introductions and one of them
its trie root (paper 000, Alg. 1-2, 4 and 5), so a node in 50 topics would send about 150
frames per peer per interval.  The runtime puts everything one Timeout sends to one peer
into one `pubsub.kernel.control.Bundle` frame (`bundle`), however many topics; the receiving
runtime unpacks it and handles each message exactly as if it had arrived alone (decoded and
checked one by one, operator requests refused, faults applied).  Messages to our own
reference, and a peer that gets a single message, are sent as they are.

A bundle never exceeds the frame limit nor `wire.MAX_PAYLOADS` messages: a peer with more
than fits gets several.
"""

from __future__ import annotations

from collections.abc import Iterable

from pubsub.kernel import wire
from pubsub.kernel.control import Bundle
from pubsub.kernel.message import Message, Ref, Send

#: Bytes a bundle frame needs besides its payloads (map, field names, array and bin headers).
_ENVELOPE = 64
_PER_PAYLOAD = 5


def bundle(sends: Iterable[Send], me: Ref, max_frame: int) -> tuple[list[Send], list[Send]]:
    """(what to send, the messages that went into bundles): per destination other than `me`
    with two or more messages, Bundles in their place, at the position of the first."""
    by_dest: dict[Ref, list[Message]] = {}
    order: list[Ref | Send] = []
    for send in sends:
        dest, msg = send
        if dest == me:
            order.append(send)
            continue
        found = by_dest.get(dest)
        if found is None:
            by_dest[dest] = [msg]
            order.append(dest)
        else:
            found.append(msg)
    out: list[Send] = []
    bundled: list[Send] = []
    for item in order:
        if isinstance(item, Send):
            out.append(item)
            continue
        msgs = by_dest[item]
        if len(msgs) == 1:
            out.append(Send(item, msgs[0]))
            continue
        out.extend(_bundles(item, msgs, max_frame, bundled))
    return out, bundled


def _bundles(dest: Ref, msgs: list[Message], max_frame: int, bundled: list[Send]) -> list[Send]:
    """Bundles of `msgs` for `dest`, each within `max_frame`; a message that cannot be
    encoded, or fills a frame by itself, is sent on its own (the runtime counts its error)."""
    out: list[Send] = []
    group: list[tuple[Message, bytes]] = []
    size = _ENVELOPE

    def close() -> None:
        if len(group) == 1:
            out.append(Send(dest, group[0][0]))
        elif group:
            out.append(Send(dest, Bundle([payload for _, payload in group])))
            bundled.extend(Send(dest, msg) for msg, _ in group)
        group.clear()

    for msg in msgs:
        try:
            payload = wire.encode_payload(msg)
        except wire.WireError:
            out.append(Send(dest, msg))
            continue
        cost = len(payload) + _PER_PAYLOAD
        if _ENVELOPE + cost > max_frame:
            out.append(Send(dest, msg))
            continue
        if group and (size + cost > max_frame or len(group) >= wire.MAX_PAYLOADS):
            close()
            size = _ENVELOPE
        group.append((msg, payload))
        size += cost
    close()
    return out
