"""When a broker owes its neighbours a copy of its tables (issue 46 item 4) -- no I/O.

A restarted broker starts with empty tables, and a broker that was suspected (hung, or cut
off) missed the control messages that went around it.  Neither is rebuilt from disk: every
PRT entry is held by every broker of its cluster and every CLT entry by its host, so the
neighbours hold what is needed (`broker.cores.octopia` sends and applies `PrtSync` and
`CltSync`; the broker's own clients' state is the daemon's to keep).

* A **CltSync** to a secondary neighbour needs nothing from anybody: it is what this broker
  hosts.  It is owed at the start, and to a neighbour that restarted or was cleared.
* A **PrtSync** to a primary neighbour n carries this broker's side of the cluster tree away
  from n.  It is exact only once this broker holds its own side, that is, once it has the
  PrtSync of every other primary neighbour that is not suspected -- the saturation rule of a
  tree (leaves first), so a restarted inner broker never hands out the half-empty tables it
  started with.  Owed at the start, and to a neighbour that restarted or was cleared; a
  restarted neighbour's earlier PrtSync no longer counts.

`SyncDuty` keeps, per neighbour, whether a sync is owed and whether its PrtSync arrived, and
says which syncs are due now (`due`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TypeVar

from broker.cores.topology import BrokerId

#: Entries per PrtSync / CltSync part (a part stays far below the frame limit).
SYNC_PART = 256

T = TypeVar("T")


def parts(items: Sequence[T]) -> Iterator[tuple[Sequence[T], bool, bool]]:
    """`items` in parts of at most SYNC_PART, each with (start, final); one empty part for
    no items."""
    if not items:
        yield items, True, True
        return
    for k in range(0, len(items), SYNC_PART):
        yield items[k:k + SYNC_PART], k == 0, k + SYNC_PART >= len(items)


class SyncDuty:
    """The syncs one broker owes its primary and secondary neighbours."""

    def __init__(self, primary: Iterable[BrokerId], secondary: Iterable[BrokerId]) -> None:
        self.primary = tuple(primary)
        self.secondary = tuple(secondary)
        #: neighbours owed a sync (primary: a PrtSync; secondary: a CltSync)
        self.owed: set[BrokerId] = set()
        #: primary neighbours whose PrtSync arrived (since their last restart); all of them
        #: for a core that is never started (a fresh network's empty tables agree)
        self.synced_from: set[BrokerId] = set(self.primary)

    def start(self) -> None:
        """A (re)started broker owes every neighbour its tables and holds nobody's yet."""
        self.owed = set(self.primary) | set(self.secondary)
        self.synced_from = set()

    def restarted(self, neighbour: BrokerId) -> None:
        self.owed.add(neighbour)
        self.synced_from.discard(neighbour)

    def cleared(self, neighbour: BrokerId) -> None:
        self.owed.add(neighbour)

    def received(self, neighbour: BrokerId) -> None:
        self.synced_from.add(neighbour)

    def due(self, suspects: Collection[BrokerId]) -> list[BrokerId]:
        """The owed neighbours whose sync can be sent now (and no longer owed): not suspected,
        and for a primary neighbour, the PrtSyncs of the other unsuspected ones are in."""
        out = []
        for n in sorted(self.owed):
            if n in suspects:
                continue
            if n in self.primary and any(
                p != n and p not in suspects and p not in self.synced_from for p in self.primary
            ):
                continue
            out.append(n)
        self.owed.difference_update(out)
        return out
