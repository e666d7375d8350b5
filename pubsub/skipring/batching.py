"""Many publications per frame: coalescing the Spread messages of one batch (issue 11).

A node releases the sends of a whole group commit at once (`pubsub.node.app`): for a
publisher under load that is one Spread per publication and neighbour, all on the same arcs.
`coalesce` merges the Spreads that agree on everything but their publications -- same
destination, topic, sender, arc, resolution and hop count -- into one Spread per group
carrying them all, at most `MAX_PUBLICATIONS` and about `max_bytes` of payload each, so that
a batch of k publications costs each link one frame instead of k.  Receivers treat a merged
Spread exactly like k separate ones (`pubsub.skipring.antientropy.AntiEntropy.spread`).

Other sends pass through unchanged, in their order; a merged Spread takes the place of the
first Spread of its group.  Spreads that end up carrying the same publications share one
`PublicationList`, which is encoded once for all of them.
"""

from __future__ import annotations

from pubsub.kernel.message import Send
from pubsub.skipring.antientropy import PUBLICATION_OVERHEAD
from pubsub.skipring.fields import MAX_PUBLICATIONS
from pubsub.skipring.messages import PublicationList, Spread


def coalesce(sends: list[Send], max_bytes: int) -> list[Send]:
    """`sends` with the Spreads of each group merged (see the module docstring)."""
    if len(sends) < 2:
        return sends
    out: list[Send] = []
    open_groups: dict[tuple[object, ...], tuple[int, int]] = {}  # key -> (slot in out, bytes)
    # A publisher's Spreads to its neighbours share one list of publications: sized once.
    sizes: dict[int, int] = {}
    for send in sends:
        msg = send.msg
        if not isinstance(msg, Spread):
            out.append(send)
            continue
        key = (send.dest, msg.topic, msg.sender, msg.start, msg.end, msg.levels, msg.hops)
        size = sizes.get(id(msg.publications))
        if size is None:
            size = sizes[id(msg.publications)] = sum(len(p.payload) + PUBLICATION_OVERHEAD for p in msg.publications)
        found = open_groups.get(key)
        if found is not None:
            slot, batch_size = found
            merged = out[slot].msg
            assert isinstance(merged, Spread)
            if (
                len(merged.publications) + len(msg.publications) <= MAX_PUBLICATIONS
                and batch_size + size <= max_bytes
            ):
                merged.publications.extend(msg.publications)
                open_groups[key] = (slot, batch_size + size)
                continue
        copy = Spread(msg.topic, msg.sender, msg.start, msg.end, msg.levels, msg.hops, list(msg.publications))
        open_groups[key] = (len(out), size)
        out.append(Send(send.dest, copy))
    return _shared(out)


def _shared(sends: list[Send]) -> list[Send]:
    """Give Spreads that carry the same publications (a publisher's batch, one Spread per
    neighbour) one shared `PublicationList`, so the batch is encoded once, not per neighbour."""
    batches: dict[tuple[int, ...], PublicationList] = {}
    out: list[Send] = []
    for send in sends:
        msg = send.msg
        if isinstance(msg, Spread) and type(msg.publications) is not PublicationList:
            ids = tuple(id(p) for p in msg.publications)
            batch = batches.get(ids)
            if batch is None:
                batch = batches[ids] = PublicationList(msg.publications)
            msg = Spread(msg.topic, msg.sender, msg.start, msg.end, msg.levels, msg.hops, batch)
            send = Send(send.dest, msg)
        out.append(send)
    return out
