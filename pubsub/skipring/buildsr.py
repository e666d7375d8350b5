"""One BuildSR instance at one subscriber: the subscriber side of paper 000 (Alg. 1, 2, 4).

`SkipRingNode` holds the variables of §3.2 for one topic -- label, left, right, ring and
shortcuts -- and reacts to the messages of the extended BuildRing protocol (§2.2, Alg. 1-2),
to configurations from the supervisor (SetData, Alg. 4) and to shortcut introductions
(§3.2.2, Alg. 4).  It never touches a socket, clock or random source: every entry point
returns the list of `Send`s it wants delivered, and randomness comes in as an argument.

State layout (the same one `pubsub status --json` reports):

* ``left`` / ``right``: the closest known nodes below / above our label in the *linear*
  order by r; the minimum has no left and the maximum has no right.
* ``ring``: the cyclic closure -- at the minimum it holds the maximum and vice versa.
* ``shortcuts``: label -> reference (or None while the partner is still unknown); the labels
  are computed locally from the ring neighbours (§3.2.2), the references arrive through
  IntroduceShortcut.

Two places where the code fixes a slip in the paper, each explained where it happens:
the configuration-request probability for labels of length 1 (`config_request_probability`)
and when a node "believes its label is minimal" (`believes_minimal`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache

from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.skipring.labels import MAX_LABEL_BITS, Label, cyclic_distance, from_dyadic
from pubsub.skipring.messages import (
    CYC,
    LIN,
    Check,
    Contact,
    Delegate,
    Flag,
    GetConfiguration,
    Introduce,
    IntroduceShortcut,
    Linearize,
    RemoveConnections,
    SetData,
    Subscribe,
)

LABEL_ZERO = Label("0")

#: Timeouts during which a node that lost a list neighbour (RemoveConnections, or a crash
#: the runtime reported) does not yet take itself for an end of the list (`forget`).
GRACE_TIMEOUTS = 8


def config_request_probability(label: Label) -> float:
    """Probability of configuration request (ii) per Timeout (§3.2.1).

    The paper uses 1/(2^k k^2) for a label of length k and argues (Theorem 3.1) that
    2^(k-1) subscribers hold labels of length k, so that the expected number of requests
    per timeout interval is sum_k 1/(2k^2) < 1.  Length 1 is the exception: two
    subscribers ("0" and "1") hold labels of length 1 (Lemma 2.2's f(1) = 2), which would
    put the sum at about 1.27.  We keep the paper's intent -- each length class contributes
    1/(2k^2) -- by halving the probability for k = 1, i.e. 1/(2 * f(k) * k^2) for all k.
    """
    k = label.length
    return 1.0 / (4 if k == 1 else (1 << k) * k * k)


def reflect(near: Label, me: Label) -> Label:
    """The label at 2 r(near) - r(me) (mod 1): the point `near` was inserted in front of.

    §3.2.2: if our ring neighbour w has a longer label than ours, w was placed halfway
    between us and the node at 2 r(w) - r(v); that node is our shortcut on that side.
    The formula holds on both sides and across the wrap at 0, since it is taken mod 1.
    """
    exponent = max(near.length, me.length)
    numerator = (2 * near.numerator << (exponent - near.length)) - (
        me.numerator << (exponent - me.length)
    )
    return from_dyadic(numerator, exponent)


@lru_cache(maxsize=1 << 16)
def shortcut_chain(me: Label, neighbour: Label | None) -> tuple[Label, ...]:
    """Shortcut labels on one side, from the ring neighbour on that side (§3.2.2).

    Starting at the neighbour, reflect as long as the current label is longer than ours;
    the last label returned has length <= ours (it is our neighbour on level |me|).
    Lengths strictly decrease, so the loop ends; the bound guards corrupted labels.
    Labels are immutable, so results are memoized (they are recomputed every Timeout).
    """
    chain: list[Label] = []
    current = neighbour
    for _ in range(MAX_LABEL_BITS + 1):
        if current is None or current.length <= me.length:
            break
        nxt = reflect(current, me)
        if nxt.numerator << me.length == me.numerator << nxt.length:  # r(nxt) = r(me)
            break
        chain.append(nxt)
        current = nxt
    return tuple(chain)


class SkipRingNode:
    """The BuildSR variables and actions of one subscriber for one topic (§3.2)."""

    def __init__(self, ref: Ref, topic: Topic, supervisor: Ref) -> None:
        self.ref = ref
        self.topic = topic
        self.supervisor = supervisor
        self.label: Label | None = None
        self.left: Contact | None = None
        self.right: Contact | None = None
        self.ring: Contact | None = None
        self.shortcuts: dict[Label, Ref | None] = {}
        self._out: list[Send] = []
        self._self_queue: list[tuple[Contact, Flag]] = []
        #: Shortcut entries already offered to our own linearization (`_adopt_shortcuts`).
        self._adopted: set[tuple[Label, Ref]] = set()
        #: Timeouts left before a node that lost a list neighbour may act as an end (`forget`).
        self._grace = 0

    # ------------------------------------------------------------------ entry points
    def handle(self, msg: Message) -> list[Send]:
        """React to one BuildSR message addressed to this topic."""
        match msg:
            case Linearize():
                self.linearize(msg.contact)
            case Delegate():
                hops = max(msg.hops, 0)
                if msg.flag == LIN:
                    self.linearize(msg.contact, hops)
                else:
                    self.introduce(msg.contact, msg.flag, hops)
            case Check():
                self.check(msg.sender, msg.label, msg.flag)
            case Introduce():
                self.introduce(msg.contact, msg.flag)
            case IntroduceShortcut():
                self.introduce_shortcut(msg.contact)
            case RemoveConnections():
                self.forget(msg.ref)
            case SetData():
                self.set_data(msg.pred, msg.label, msg.succ)
        return self._flush()

    def timeout(self, rng: random.Random) -> list[Send]:
        """Timeout of Alg. 4: BuildRing, shortcuts, configuration requests, introductions."""
        if self.label is None:
            # Alg. 2 l.5-7 and Alg. 1 l.30: without a label we may hold no one; ask to join.
            self._drop_everyone()
            self._send(self.supervisor, Subscribe(self.topic, self.ref))
            return self._flush()
        self._build_ring_timeout()
        self._update_shortcuts()
        self._request_configuration(rng)
        self._introduce_shortcut_partners()
        return self._flush()

    def forget(self, ref: Ref) -> list[Send]:
        """RemoveConnections(ref): drop every reference to `ref` (also used for crashed peers).

        A list neighbour that goes this way left a gap that is about to be filled: by the
        holder of l(n-1), whom the supervisor moves into a leaver's or crashed node's place
        (§3.3, §4.1) and who Checks us as soon as it gets its configuration.  For
        `GRACE_TIMEOUTS` Timeouts we therefore do not take ourselves for an end of the list
        (Alg. 2 l.2-4, configuration request (iv)): the ring-closing introduction would
        travel to the far end and back, only for its answer to be delegated away again.
        This delays those two actions by a bounded number of Timeouts, so convergence
        (Lemmas 5.5-5.9) still follows; closure is untouched (nothing is removed in SR(n)).
        """
        lost = False
        if self.left is not None and self.left.ref == ref:
            self.left = None
            lost = True
        if self.right is not None and self.right.ref == ref:
            self.right = None
            lost = True
        if self.ring is not None and self.ring.ref == ref:
            self.ring = None
            lost = True
        if lost and self.label is not None:
            self._grace = GRACE_TIMEOUTS
        for label, holder in self.shortcuts.items():
            if holder == ref:
                self.shortcuts[label] = None
        return self._flush()

    def release(self) -> list[Send]:
        """Ask everyone we reference to drop us, and forget them (label becomes ⊥)."""
        self.label = None
        self._drop_everyone()
        self.shortcuts.clear()
        return self._flush()

    # ------------------------------------------------------------------ views
    def me(self) -> Contact:
        assert self.label is not None
        return Contact(self.label, self.ref)

    def cyclic_left(self) -> Contact | None:
        """Our predecessor on the ring: left, or the ring contact when we are the minimum."""
        if self.left is not None:
            return self.left
        if self.ring is not None and self.label is not None and self.label < self.ring.label:
            return self.ring
        return None

    def cyclic_right(self) -> Contact | None:
        """Our successor on the ring: right, or the ring contact when we are the maximum."""
        if self.right is not None:
            return self.right
        if self.ring is not None and self.label is not None and self.ring.label < self.label:
            return self.ring
        return None

    def believes_minimal(self) -> bool:
        """Trigger of configuration request (iv) (§3.2.1).

        The node sees nobody below it, yet its label is not l(0) = "0".  The paper fires (iv)
        whenever the node merely thinks it is the minimum; in a legitimate ring the true
        minimum holds "0" and would then ask every other interval, contradicting
        Theorem 3.1.  A minimum whose label is not "0" can never be legitimate, which is
        exactly the case (iv) exists for (a component of unrecorded subscribers).
        """
        return self.label is not None and self.label != LABEL_ZERO and self.left is None

    def labelled_contacts(self) -> Iterator[tuple[Label, Ref]]:
        """Every (label, reference) this instance stores: ring neighbours, then shortcuts
        whose holder is known."""
        for contact in (self.left, self.right, self.ring):
            if contact is not None:
                yield contact.label, contact.ref
        for label, holder in self.shortcuts.items():
            if holder is not None:
                yield label, holder

    def contacts(self) -> Iterator[Ref]:
        """Every reference this instance stores (explicit edges)."""
        for contact in (self.left, self.right, self.ring):
            if contact is not None:
                yield contact.ref
        for holder in self.shortcuts.values():
            if holder is not None:
                yield holder

    def status(self) -> dict[str, object]:
        """The per-topic state in the stable JSON layout documented in the README."""

        def pair(contact: Contact | None) -> list[str] | None:
            return None if contact is None else [contact.label.bits, contact.ref]

        return {
            "label": None if self.label is None else self.label.bits,
            "left": pair(self.left),
            "right": pair(self.right),
            "ring": pair(self.ring),
            "shortcuts": {label.bits: ref for label, ref in sorted(self.shortcuts.items())},
        }

    # ------------------------------------------------------------------ Alg. 1 (BuildList)
    def _build_list_timeout(self) -> None:
        """BuildListTimeout (Alg. 1 l.1-6): check list neighbours, or move misplaced ones."""
        assert self.label is not None
        if self.left is not None:
            if self.left.label < self.label:
                self._send(self.left.ref, Check(self.topic, self.me(), self.left.label, LIN))
            else:
                misplaced, self.left = self.left, None
                self.linearize(misplaced)
        if self.right is not None:
            if self.label < self.right.label:
                self._send(self.right.ref, Check(self.topic, self.me(), self.right.label, LIN))
            else:
                misplaced, self.right = self.right, None
                self.linearize(misplaced)

    def check(self, sender: Contact, label: Label, flag: Flag) -> None:
        """Check (Alg. 1 l.8-12): correct the sender's view of our label, or accept it."""
        if self._unusable(sender.ref):
            return
        if self.label != label:
            self._send(sender.ref, Introduce(self.topic, self.me(), flag))
        else:
            self.introduce(sender, flag)

    def linearize(self, c: Contact, hops: int = 0) -> None:
        """Linearize (Alg. 1 l.14-30): keep the closest node on each side, delegate others.

        Delegation (l.25) goes to the known node closest to c on c's side -- the list
        neighbour of the paper, or a shortcut beyond it (`_delegate`); `hops` is how far
        c has travelled so far.
        """
        me = self._own_label(c.ref)
        if me is None:
            return
        if c.label == me:
            self._label_conflict(c.ref)
            return
        if self.left is not None and c.ref == self.left.ref:
            if c.label != self.left.label:  # l.17-22: a corrected label for our left
                if c.label < me:
                    self.left = c
                else:
                    self.left = None
                    self.linearize(c)
            return
        if self.right is not None and c.ref == self.right.ref:
            if c.label != self.right.label:
                if me < c.label:
                    self.right = c
                else:
                    self.right = None
                    self.linearize(c)
            return
        if c.label < me:  # l.24-28 on the left side
            if self.left is not None and c.label <= self.left.label:
                self._delegate(c, LIN, hops, toward_left=True)
            else:
                if self.left is not None:
                    self._send(c.ref, Linearize(self.topic, self.left))
                self.left = c
        else:
            if self.right is not None and self.right.label <= c.label:
                self._delegate(c, LIN, hops, toward_left=False)
            else:
                if self.right is not None:
                    self._send(c.ref, Linearize(self.topic, self.right))
                self.right = c

    # ------------------------------------------------------------------ Alg. 2 (BuildRing)
    def _build_ring_timeout(self) -> None:
        """BuildRingTimeout (Alg. 2 l.1-14), after offering closer shortcuts to our own
        linearization (`_adopt_shortcuts`)."""
        assert self.label is not None
        self._adopt_shortcuts()
        me = self.label
        if self._grace:
            self._grace -= 1
        if self.ring is None:
            # l.2-4: an end of the list sends itself towards the other end to close the ring.
            if self._grace:
                pass  # a gap that is about to be filled (`forget`)
            elif self.left is None and self.right is not None:
                self._delegate(self.me(), CYC, 0, toward_left=False)
            elif self.right is None and self.left is not None:
                self._delegate(self.me(), CYC, 0, toward_left=True)
        else:
            ring = self.ring
            if ring.label == me:  # a belief that cannot be right (see linearize)
                self.ring = None
                self.linearize(ring)
            elif self.left is not None and me < ring.label:  # l.9-11: we are not the minimum
                self.ring = None
                self._delegate(ring, CYC, 0, toward_left=True)
            elif self.right is not None and ring.label < me:
                self.ring = None
                self._delegate(ring, CYC, 0, toward_left=False)
            elif (self.left is None and me < ring.label) or (self.right is None and ring.label < me):
                self._send(ring.ref, Check(self.topic, self.me(), ring.label, CYC))  # l.12-13
        self._build_list_timeout()

    def introduce(self, c: Contact, flag: Flag, hops: int = 0) -> None:
        """Introduce (Alg. 2 l.16-42), including the ring-closing CYC branch; `hops` is
        how far a delegated contact has travelled (`_delegate`)."""
        self._introduce(c, flag, hops)
        # "u <- Introduce(...)": messages a node addresses to itself, handled after this one.
        while self._self_queue:
            contact, queued_flag = self._self_queue.pop(0)
            self._introduce(contact, queued_flag)

    def _introduce(self, c: Contact, flag: Flag, hops: int = 0) -> None:
        me = self._own_label(c.ref)
        if me is None:
            return
        ring = self.ring
        if ring is not None and ring.ref == c.ref and ring.label != c.label:  # l.18-23
            if (c.label < me and ring.label < me) or (me < c.label and me < ring.label):
                self.ring = c
            else:
                self.ring = None
                self._self_queue.append((c, LIN))
        if flag == LIN:
            self.linearize(c, hops)  # l.40
            return
        ring = self.ring
        if c.label == me:  # a duplicate label can close nothing; sort it linearly
            self.linearize(c)
        elif ring is None:  # l.25-29: pass the candidate towards the far end of the list
            if c.label < me:
                if self.right is None:
                    self.ring = c
                else:
                    self._delegate(c, CYC, hops, toward_left=False)
            else:
                if self.left is None:
                    self.ring = c
                else:
                    self._delegate(c, CYC, hops, toward_left=True)
        elif (ring.label < me) == (c.label < me):  # l.30-34: keep the farther candidate
            if ring.ref == c.ref:
                return
            farther_is_new = c.label < ring.label if c.label < me else ring.label < c.label
            far, near = (c, ring) if farther_is_new else (ring, c)
            self.ring = far
            self._self_queue.append((near, LIN))
            self._send(near.ref, Introduce(self.topic, far, LIN))
        else:  # l.35-38: candidates on both sides -- we are no end of the list
            self._self_queue.append((c, LIN))
            self._self_queue.append((ring, LIN))
            self.ring = None

    # ------------------------------------------------------------------ Alg. 4 (BuildSR)
    def set_data(self, pred: Contact | None, label: Label | None, succ: Contact | None) -> None:
        """SetData (Alg. 4 l.16-20): adopt the supervisor's configuration.

        All-⊥ means "you are not (or no longer) a member": we release every contact.
        Otherwise, any stored neighbour that lies at least as close as the configured one
        is unknown to the supervisor or wrongly labelled there, so we ask the supervisor to
        configure it (request (iii)); then pred/succ are installed and the old contacts are
        handed to Linearize, so that no reference is lost.

        Two departures when the configuration *moves* us (a label other than the one we
        held; the common case is the holder of l(n-1) filling a leaver's place, §4.1):

        * the old list neighbours are not linearized from our new place, where they
          would travel across the ring to where they came from; we hand them back
          instead (`_hand_back`: Introduce(us, LIN) with our new label).  Each keeps an
          edge to us with a label that is certainly right -- the graph stays weakly
          connected -- and, knowing we moved away, closes the gap we left with the
          contacts it has there (`_adopt_shortcuts`: in SR(n) our two old neighbours
          are each other's shortcut on the level below ours);
        * we Check our new pred and succ at once, as BuildListTimeout would at our next
          Timeout, so that they hear of us before they miss us.
        """
        if label is None:
            self.release()
            return
        moved = self.label != label
        self.label = label
        self._report_closer_neighbours(pred, succ)
        previous = [c for c in (self.left, self.right, self.ring) if c is not None]
        self.left = self.right = self.ring = None
        for contact, is_pred in ((pred, True), (succ, False)):
            if contact is None or contact.ref == self.ref:
                continue
            below = contact.label < label
            if is_pred:
                if below:
                    self.left = contact
                else:
                    self.ring = contact  # our predecessor wraps around: we are the minimum
            else:
                if below:
                    self.ring = contact  # our successor wraps around: we are the maximum
                else:
                    self.right = contact
        installed = {c.ref for c in (pred, succ) if c is not None}
        for old in previous:
            if old.ref not in installed:
                if moved:
                    self._hand_back(old.ref)
                else:
                    self.linearize(old)
        if moved:
            checked: set[Ref] = set()
            for contact in (pred, succ):
                if contact is not None and contact.ref != self.ref and contact.ref not in checked:
                    checked.add(contact.ref)
                    self._send(contact.ref, Check(self.topic, self.me(), contact.label, LIN))

    def _report_closer_neighbours(self, pred: Contact | None, succ: Contact | None) -> None:
        """Configuration request (iii) of §3.2.1 (Alg. 4 l.18-19)."""
        assert self.label is not None
        me = self.label
        asked: set[Ref] = set()
        ring_on_left = self.ring is not None and me < self.ring.label  # we are the minimum
        for contact, on_left in ((self.left, True), (self.right, False), (self.ring, ring_on_left)):
            if contact is None or contact.ref in asked:
                continue
            configured = pred if on_left else succ
            if configured is not None and configured.ref == contact.ref:
                continue
            if configured is None or _gap(me, contact.label, on_left) <= _gap(
                me, configured.label, on_left
            ):
                asked.add(contact.ref)
                self._send(self.supervisor, GetConfiguration(self.topic, contact.ref))

    def _request_configuration(self, rng: random.Random) -> None:
        """Configuration requests (ii) and (iv) of §3.2.1 (Alg. 4 l.6-11)."""
        assert self.label is not None
        minimal = self.believes_minimal() and not self._grace  # a gap, see `forget`
        chance = 0.5 if minimal else config_request_probability(self.label)
        if rng.random() < chance:
            self._send(self.supervisor, GetConfiguration(self.topic, self.ref))

    def _side_chains(self) -> tuple[tuple[Label, ...], tuple[Label, ...]]:
        assert self.label is not None
        left, right = self.cyclic_left(), self.cyclic_right()
        return (
            shortcut_chain(self.label, None if left is None else left.label),
            shortcut_chain(self.label, None if right is None else right.label),
        )

    def _update_shortcuts(self) -> None:
        """Alg. 4 l.3: make `shortcuts` hold exactly the labels computed in §3.2.2.

        While a ring neighbour is missing (it left or crashed and its successor has not
        reached us yet), that side's chain cannot be computed; we keep the entries we have
        rather than dropping (and handing back) a whole side of shortcuts that the next
        neighbour will most likely want again.  With both neighbours known -- always, in
        SR(n) with n >= 2 -- the table is exactly the paper's.
        """
        left_chain, right_chain = self._side_chains()
        wanted = dict.fromkeys(left_chain + right_chain)
        complete = self.cyclic_left() is not None and self.cyclic_right() is not None
        released: list[Ref] = []
        for label in [lab for lab in self.shortcuts if lab not in wanted and complete]:
            holder = self.shortcuts.pop(label)
            if holder is not None:
                released.append(holder)
        for label in wanted:
            self.shortcuts.setdefault(label, None)
        self._let_go(released)
        if self._adopted:
            self._adopted = {
                (label, ref) for label, ref in self._adopted if self.shortcuts.get(label) == ref
            }

    def _level_partner(
        self, chain: tuple[Label, ...], neighbour: Contact | None
    ) -> Contact | None:
        """Our neighbour on level |label| on one side: the chain's end, or the ring neighbour."""
        if not chain:
            return neighbour
        holder = self.shortcuts.get(chain[-1])
        return None if holder is None else Contact(chain[-1], holder)

    def level_partners(self) -> tuple[Contact | None, Contact | None]:
        """Our two neighbours on level |label| (left, right), as far as we know them: the
        nodes Alg. 4 l.12-14 introduces to each other -- the last shortcut of each side's
        chain, or the ring neighbour where the chain is empty.  In SR(n) they are the
        neighbours of a node with a k-bit label in the sorted ring of K_k (Definition
        2.1), both with shorter labels unless k = 1."""
        if self.label is None:
            return None, None
        left_chain, right_chain = self._side_chains()
        return (
            self._level_partner(left_chain, self.cyclic_left()),
            self._level_partner(right_chain, self.cyclic_right()),
        )

    def next_level_neighbours(self) -> tuple[Contact | None, Contact | None]:
        """Our neighbours on level |label| + 1 (left, right), as far as we know them: on
        each side the nearest node whose label has at most |label| + 1 bits -- the ring
        neighbour or the first such link of the shortcut chain.  In SR(n) this is the
        nearest node on that side that has us as a level partner, or, where level
        |label| + 1 holds no node on that side, our level partner itself."""
        if self.label is None:
            return None, None
        limit = self.label.length + 1
        left_chain, right_chain = self._side_chains()
        return (
            self._nearest_within(limit, left_chain, self.cyclic_left()),
            self._nearest_within(limit, right_chain, self.cyclic_right()),
        )

    def _nearest_within(
        self, limit: int, chain: tuple[Label, ...], neighbour: Contact | None
    ) -> Contact | None:
        """On one side, the nearest node with a label of at most `limit` bits we know."""
        if neighbour is None or neighbour.label.length <= limit:
            return neighbour
        for label in chain:  # lengths strictly decrease along the chain
            if label.length <= limit:
                holder = self.shortcuts.get(label)
                return None if holder is None else Contact(label, holder)
        return None

    def _introduce_shortcut_partners(self) -> None:
        """Alg. 4 l.12-14: introduce our two level-|label| neighbours to each other."""
        a, b = self.level_partners()
        if a is None or b is None or a.ref == b.ref:
            return
        self._send(a.ref, IntroduceShortcut(self.topic, b))
        self._send(b.ref, IntroduceShortcut(self.topic, a))

    def introduce_shortcut(self, c: Contact) -> None:
        """IntroduceShortcut (Alg. 4 l.22-30)."""
        if self._unusable(c.ref):
            return
        if c.label not in self.shortcuts:
            return  # not a shortcut of ours; the introducer still holds c, so nothing is lost
        old = self.shortcuts[c.label]
        if old != c.ref:
            self.shortcuts[c.label] = c.ref
            if old is not None:
                self._let_go([old])

    # ------------------------------------------------------------------ beyond the paper
    def _adopt_shortcuts(self) -> None:
        """Offer shortcut holders that lie closer than a list neighbour to Linearize.

        The paper's linearization knows only left, right and ring; a shortcut is a node we
        know as well, and when it lies strictly between us and a list neighbour (or on a
        side where we have none) the sorted list needs it there.  This is the case right
        after a neighbour left or moved: in SR(n) the holder of l(n-1) sits between two
        nodes that are each other's shortcut one level down, so when it moves away (§4.1)
        they find each other here, without a message; and a node whose neighbour left does
        not take itself for an end of the list (Alg. 2 l.3-4, whose ring-closing
        introduction would travel to the other end).

        It is Linearize(c) sent to ourselves, so the linearization argument (Lemma 2.4) is
        unchanged; the shortcut entry stays where it is.  In SR(n) no shortcut lies closer
        than a ring neighbour, so a legitimate state never triggers it (closure, Theorem
        5.11).  Each (label, holder) entry is offered once: if its label was a wrong
        belief, the Check that follows corrects the list neighbour, and offering the same
        entry again every Timeout would repeat that exchange forever.
        """
        assert self.label is not None
        me = self.label
        below: Contact | None = None  # the closest shortcut on each side, if closer
        above: Contact | None = None  # than the list neighbour there
        for label, holder in self.shortcuts.items():
            if holder is None or holder == self.ref or (label, holder) in self._adopted:
                continue
            if label < me:
                if (self.left is None or self.left.label < label) and (
                    below is None or below.label < label
                ):
                    below = Contact(label, holder)
            elif me < label and (self.right is None or label < self.right.label) and (
                above is None or label < above.label
            ):
                above = Contact(label, holder)
        for contact in (below, above):
            if contact is not None:
                self._adopted.add((contact.label, contact.ref))
                self.linearize(contact)
        ring = self.ring
        if ring is None:
            return
        beyond: Contact | None = None  # a shortcut farther out than the ring contact
        for label, holder in self.shortcuts.items():
            if holder is None or holder in (self.ref, ring.ref) or (label, holder) in self._adopted:
                continue
            if ((me < ring.label < label) or (label < ring.label < me)) and (
                beyond is None or (label < beyond.label) == (label < ring.label)
            ):
                beyond = Contact(label, holder)
        if beyond is not None:
            self._adopted.add((beyond.label, beyond.ref))
            self.introduce(beyond, CYC)  # Alg. 2 l.30-34: keep the farther candidate

    def _hop_budget(self) -> int:
        """How many hops a delegated contact may take before we hand it back to its owner:
        twice the longest label we know plus slack (greedy routing in SR(n) takes at most
        about two hops per level)."""
        assert self.label is not None
        longest = self.label.length
        for label, _ in self.labelled_contacts():
            if label.length > longest:
                longest = label.length
        return 2 * longest + 4

    def _delegate(self, c: Contact, flag: Flag, hops: int, *, toward_left: bool) -> None:
        """Pass c on towards its place: Linearize (LIN, Alg. 1 l.25) or the ring-closing
        Introduce (CYC, Alg. 2 l.9-11 and l.25-29).

        The paper hands c to the list neighbour on that side, one hop per node, so a
        contact that belongs across the ring walks there in O(n) messages (a leave, a
        crash repair, a stale belief).  We hand it to the known node -- list neighbour,
        ring contact or shortcut -- that lies furthest that way without passing c's label
        (LIN), or furthest that way at all (CYC: the far end of the list is the goal).
        In SR(n) that is greedy routing on the skip ring: O(log n) hops.

        Why the self-stabilization argument still holds: a delegation to a node between
        us and c replaces the edge (us, c) by a shorter one, as the paper's delegation to
        the neighbour does (the linearization potential of Lemma 2.4 only falls faster);
        a CYC candidate still travels away from us towards the end it is meant for.
        Beliefs in shortcuts can be wrong in arbitrary states, so routing could circle,
        and a contact whose label its owner no longer holds (a stale belief) has no place
        to reach: walking it one list neighbour per message took hundreds of intervals
        after the labels were right (docs/measurements/issue14.md, (b)).  `hops` counts
        every hop; once it reaches `_hop_budget` we drop c and hand the edge back to its
        owner instead (`_hand_back`: Introduce(us, LIN) with our own, certainly right,
        label), and the owner places us from its side.

        Why this still converges.  The graph stays weakly connected (the edge is only
        reversed).  Once the supervisor has given every node its label -- which happens
        in finite time whatever contacts do (§3.2.1) -- stale beliefs only decrease: a
        hand-back carries the sender's true label, delegation moves a contact without
        copying it, a stored stale belief is corrected by the next Check to its owner
        (Alg. 1 l.8-12) before it can be copied for long (introductions copy stored
        beliefs), and each hand-back of a travelling stale contact removes one.
        A hand-back of a true contact follows `_hop_budget` >= 1 delegations, each of
        which replaced the edge by a strictly shorter one between true positions (the
        linearization potential of Lemma 2.4 falls), and the reversal leaves the edge's
        length unchanged: the potential falls between hand-backs, so they are finitely
        many too, and after the last one every journey is a delegation chain as above.
        """
        assert self.label is not None
        if hops >= self._hop_budget():
            self._hand_back(c.ref)
            return
        me = self.label
        best = self.left if toward_left else self.right
        bound = c.label if flag == LIN else None
        for label, ref in self.labelled_contacts():
            if ref == c.ref or ref == self.ref:
                continue
            if toward_left:
                if label < me and (bound is None or bound <= label) and (best is None or label < best.label):
                    best = Contact(label, ref)
            elif me < label and (bound is None or label <= bound) and (best is None or best.label < label):
                best = Contact(label, ref)
        if best is None:
            return
        neighbour = self.left if toward_left else self.right
        if hops == 0 and neighbour is not None and best.ref == neighbour.ref:
            # the paper's own step: its own message, so that nothing changes where
            # shortcuts do not help (a contact's hop count starts with its first Delegate)
            msg: Message = Linearize(self.topic, c) if flag == LIN else Introduce(self.topic, c, CYC)
            self._send(best.ref, msg)
            return
        self._send(best.ref, Delegate(self.topic, c, flag, hops + 1))

    # ------------------------------------------------------------------ plumbing
    def _unusable(self, ref: Ref) -> bool:
        """A contact we cannot act on: ourselves, or anyone while we have no label.

        Without a label we may hold nobody, so we ask the contact to drop us (Alg. 1 l.30,
        Alg. 2 l.42) -- this is also how an unsubscribed node sheds its last edges.
        """
        if ref == self.ref:
            return True
        if self.label is None:
            self._send(ref, RemoveConnections(self.topic, self.ref))
            return True
        return False

    def _own_label(self, ref: Ref) -> Label | None:
        """Our label, if a contact `ref` is usable (`_unusable`), else None."""
        return None if self._unusable(ref) else self.label

    def _label_conflict(self, ref: Ref) -> None:
        """Someone claims our label for `ref`: two nodes never legitimately share a label.

        Either the belief is stale or one of us holds a wrong label; only the supervisor can
        tell.  This is request (iii) of §3.2.1 at distance 0 (a stored node at least as
        close as any configured one): ask it to configure both of us, and drop the contact
        rather than echo it (echoing would ping-pong between two holders of one label).
        """
        self.forget(ref)
        self._send(self.supervisor, GetConfiguration(self.topic, ref))
        self._send(self.supervisor, GetConfiguration(self.topic, self.ref))

    def _let_go(self, refs: list[Ref]) -> None:
        """Hand back (`_hand_back`) the shortcut holders we no longer hold -- unless we still
        hold them elsewhere (as a list neighbour, ring contact or another shortcut): then
        no edge is lost and there is nothing to hand back.  (In SR(n) a shortcut becomes a
        ring edge whenever the node between its ends leaves.)"""
        if not refs:
            return
        kept = set(self.contacts())
        for ref in dict.fromkeys(refs):
            if ref not in kept:
                self._hand_back(ref)

    def _hand_back(self, ref: Ref) -> None:
        """Let go of `ref` without losing connectivity: introduce ourselves to it instead.

        Where the paper re-linearizes a displaced reference under the label we filed it
        under (Alg. 4 l.27), that label may not be the node's own; passing it on would
        seed a wrong belief that travels and returns.  Reversing the edge keeps the graph
        weakly connected and carries only a label that is certainly right: ours.
        """
        if ref == self.ref:
            return
        if self.label is None:
            self._send(ref, RemoveConnections(self.topic, self.ref))
        else:
            self._send(ref, Introduce(self.topic, self.me(), LIN))

    def _drop_everyone(self) -> None:
        for ref in dict.fromkeys(self.contacts()):
            self._send(ref, RemoveConnections(self.topic, self.ref))
        self.left = self.right = self.ring = None
        for label in self.shortcuts:
            self.shortcuts[label] = None

    def _send(self, dest: Ref, msg: Message) -> None:
        self._out.append(Send(dest, msg))

    def _flush(self) -> list[Send]:
        out, self._out = self._out, []
        return out


def _gap(me: Label, other: Label, on_left: bool) -> Fraction:
    """How far `other` lies from `me`, walking left (on_left) or right around the ring."""
    return cyclic_distance(other, me) if on_left else cyclic_distance(me, other)
