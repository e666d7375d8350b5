"""The messages of the skip-ring overlay: BuildSR (paper 000, Appendix A).

Cores exchange these plain dataclasses (`pubsub.kernel.message`); the network runtime turns
them into msgpack frames (`pubsub.kernel.wire`).  `Label` and `Contact` fields are taught to
the codec by `pubsub.skipring.fields`.

Names follow the paper: Introduce, Check, Linearize, RemoveConnections (Alg. 1-2),
IntroduceShortcut and SetData (Alg. 4), Subscribe, Unsubscribe, GetConfiguration (Alg. 3),
Ping, Pong and SuspectCrash for the supervisor's crash detection (§3.3), and Delegate for
the shortcut delegation beyond the paper.  The publications these rings carry, and the
clients' messages, are the shared layer's (`pubsub.publications.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pubsub.kernel.message import Message, Ref, Topic, message
from pubsub.skipring.labels import Label

#: The BuildRing flag: CYC for messages that close the ring, LIN for linearization.
Flag = Literal["CYC", "LIN"]
CYC: Flag = "CYC"
LIN: Flag = "LIN"


@dataclass(slots=True)
class Contact:
    """A tuple (label_v, v): what one node believes about another (§2.2)."""

    label: Label
    ref: Ref

    def __repr__(self) -> str:
        return f"({self.label.bits},{self.ref})"


# --- subscriber <-> subscriber (Alg. 1, 2, 4) -------------------------------------------------
@message("introduce")
class Introduce(Message):
    """Introduce(c, flag): the receiver learns contact c (Alg. 2, Introduce)."""

    topic: Topic
    contact: Contact
    flag: Flag


@message("check")
class Check(Message):
    """Check(sender, label, flag): "am I right that your label is `label`?" (Alg. 1, Check)."""

    topic: Topic
    sender: Contact
    label: Label
    flag: Flag


@message("linearize")
class Linearize(Message):
    """Linearize(v): a contact delegated along the sorted list (Alg. 1, Linearize)."""

    topic: Topic
    contact: Contact


@message("remove_connections")
class RemoveConnections(Message):
    """RemoveConnections(u): the receiver deletes every reference to u (Alg. 1 l.30)."""

    topic: Topic
    ref: Ref


@message("introduce_shortcut")
class IntroduceShortcut(Message):
    """IntroduceShortcut(l, v): a shortcut partner for label l (Alg. 4, IntroduceShortcut)."""

    topic: Topic
    contact: Contact


# --- supervisor -> subscriber ------------------------------------------------------------------
@message("set_data")
class SetData(Message):
    """SetData(pred, label, succ): a configuration; all None means "you are not a member"."""

    topic: Topic
    pred: Contact | None
    label: Label | None
    succ: Contact | None


@message("ping")
class Ping(Message):
    """The supervisor's liveness probe of a suspected subscriber (§3.3)."""

    nonce: int


# --- subscriber -> supervisor ------------------------------------------------------------------
@message("subscribe")
class Subscribe(Message):
    """Subscribe(v) (Alg. 3)."""

    topic: Topic
    ref: Ref


@message("unsubscribe")
class Unsubscribe(Message):
    """Unsubscribe(v) (Alg. 3)."""

    topic: Topic
    ref: Ref


@message("get_configuration")
class GetConfiguration(Message):
    """GetConfiguration(v): send v its configuration (Alg. 3); v may be a third party."""

    topic: Topic
    ref: Ref


@message("suspect")
class SuspectCrash(Message):
    """A hint that `ref` stopped answering; the supervisor verifies before acting (§3.3)."""

    ref: Ref


@message("pong")
class Pong(Message):
    """The answer to Ping, naming the node that answers."""

    nonce: int
    ref: Ref


#: Messages that only subscribers receive from other subscribers or the supervisor.
TOPIC_MESSAGES = (Introduce, Check, Linearize, RemoveConnections, IntroduceShortcut, SetData)


# --- BuildSR beyond the paper: delegation over shortcuts (`pubsub.skipring.buildsr`) ------------
@message("delegate")
class Delegate(Message):
    """A contact on its way to its place in the sorted ring: Linearize(contact) (flag LIN,
    Alg. 1 l.25) or a ring-closing Introduce(contact, CYC) (Alg. 2 l.29), forwarded to the
    known node -- ring neighbour *or shortcut* -- closest to where it belongs, so that it
    travels O(log n) hops instead of walking the list.  `hops` counts the hops taken; past
    a bound the receiver uses its list neighbours only, as the paper does."""

    topic: Topic
    contact: Contact
    flag: Flag
    hops: int
