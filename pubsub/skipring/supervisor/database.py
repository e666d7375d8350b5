"""The supervisor's per-topic database ⊂ {0,1}* × V (paper 000, §3.1), kept sorted by label.

A legitimate database holds exactly the labels l(0), ..., l(n-1), each with a distinct
subscriber.  Initial states may break that in the four ways of §3.1:

  (i)   a tuple whose subscriber is ⊥,
  (ii)  one subscriber under several labels,
  (iii) a label l(i), i < n, that nobody holds,
  (iv)  a label that is not among l(0..n-1) at all.

The repairs live here as `check_labels` (i, iii, iv) and `check_multiple_copies` (ii), named
after Alg. 3.  Whether the database is legitimate is decided in O(1) from two counters and
the largest label index, so the supervisor only walks the table when something is wrong.
Every change is appended to `changes` (when journaling) so the daemon can persist it.
"""

from __future__ import annotations

from sortedcontainers import SortedDict, SortedKeyList

from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.labels import Label, l
from pubsub.skipring.messages import Contact

#: Sort position of a label that is not an image of l: above every real index.
NOT_AN_INDEX = 1 << 80


def _index_key(label: Label) -> int:
    index = label.index()
    return NOT_AN_INDEX if index is None else index


class TopicDatabase:
    """database for one topic: label -> subscriber, sorted by r(label)."""

    def __init__(self, topic: Topic, changes: list[tuple[str, str, str | None]] | None) -> None:
        self.topic = topic
        self.by_label: SortedDict = SortedDict()  # Label -> Ref | None, in ring order
        self.by_index: SortedKeyList = SortedKeyList(key=_index_key)
        self.labels_of: dict[Ref, set[Label]] = {}
        self.without_subscriber = 0
        self.next = 0  # the round-robin pointer of Alg. 3 l.3
        self._changes = changes

    # ------------------------------------------------------------------ basic table
    def __len__(self) -> int:
        return len(self.by_label)

    def __contains__(self, ref: Ref) -> bool:
        return ref in self.labels_of

    def put(self, label: Label, ref: Ref | None) -> None:
        """Store (label, ref), replacing whatever held `label`."""
        if label in self.by_label:
            self.remove(label)
        self.by_label[label] = ref
        self.by_index.add(label)
        if ref is None:
            self.without_subscriber += 1
        else:
            self.labels_of.setdefault(ref, set()).add(label)
        if self._changes is not None:
            self._changes.append((self.topic, label.bits, ref))

    def remove(self, label: Label) -> None:
        """Delete the tuple with `label`."""
        ref = self.by_label.pop(label)
        self.by_index.remove(label)
        if ref is None:
            self.without_subscriber -= 1
        else:
            held = self.labels_of[ref]
            held.discard(label)
            if not held:
                del self.labels_of[ref]
        if self._changes is not None:
            self._changes.append((self.topic, label.bits, None))

    def label_of(self, ref: Ref) -> Label | None:
        """The (lowest) label stored for `ref`."""
        held = self.labels_of.get(ref)
        return min(held) if held else None

    def holder(self, label: Label) -> Ref | None:
        """The subscriber stored under `label`, if any."""
        held: Ref | None = self.by_label.get(label)
        return held

    def neighbours(self, label: Label) -> tuple[Contact | None, Contact | None]:
        """pred and succ of `label` on the ring of the database (⊥ when alone)."""
        n = len(self.by_label)
        if n < 2:
            return None, None
        position = self.by_label.index(label)
        pred_label, pred_ref = self.by_label.peekitem((position - 1) % n)
        succ_label, succ_ref = self.by_label.peekitem((position + 1) % n)
        pred = None if pred_ref is None else Contact(pred_label, pred_ref)
        succ = None if succ_ref is None else Contact(succ_label, succ_ref)
        return pred, succ

    def members(self) -> list[tuple[Label, Ref | None]]:
        """All tuples in ring order."""
        return list(self.by_label.items())

    # ------------------------------------------------------------------ §3.1 repairs
    def is_legitimate(self) -> bool:
        """Exactly l(0..n-1), each with a distinct, non-⊥ subscriber."""
        n = len(self.by_label)
        if n == 0:
            return True
        return (
            self.without_subscriber == 0
            and len(self.labels_of) == n
            and _index_key(self.by_index[-1]) == n - 1
        )

    def check_multiple_copies(self, ref: Ref) -> None:
        """CheckMultipleCopies (Alg. 3 l.31-37): keep only the lowest of ref's labels."""
        held = self.labels_of.get(ref)
        if held is None or len(held) < 2:
            return
        keep = min(held)
        for label in sorted(held - {keep}):
            self.remove(label)

    def check_labels(self) -> list[Ref]:
        """CheckLabels (Alg. 3 l.38-45): repairs (i), (iii) and (iv) of §3.1.

        Returns the subscribers whose label changed, so their configuration can be sent
        promptly (the paper leaves that to the round robin).
        """
        if self.is_legitimate():
            return []
        for label in [lab for lab, ref in self.by_label.items() if ref is None]:
            self.remove(label)  # (i)
        relabelled: list[Ref] = []
        n = len(self.by_label)
        for i in range(n):  # (iii), which also settles (iv)
            wanted = l(i)
            if wanted in self.by_label:
                continue
            highest = self.by_index[-1]  # the tuple (l(j), w) with maximum j > i
            ref = self.by_label[highest]
            self.remove(highest)
            self.put(wanted, ref)
            relabelled.append(ref)
        return relabelled
