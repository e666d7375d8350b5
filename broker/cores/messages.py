"""The messages of the SCOT broker mode: OctopiA (§6-§9), the PADRES-style baseline, clients.

Like `pubsub.skipring.messages`, every message is a slotted dataclass registered under its wire name
with `pubsub.kernel.message.message`; the wire codec (`pubsub.kernel.wire`) validates every field from the
annotations.  Two field types are taught to the codec here (`pubsub.kernel.wire.register_field_type`):

- `Filter` (advertisements and subscriptions) travels as ``[[attr, op, value], ...]``
  (`Filter.to_wire`), checked by `Filter.from_wire`;
- `Attrs` (a publication's attributes) travels as a map, checked by
  `broker.cores.language.values.validate_publication`.

Broker references inside the cores are SCOT broker ids ``"x,i"`` (`broker.cores.topology`), plain
strings on the wire (``sender``); the cores check that a sender is a neighbour of the right
kind.  Client references are opaque strings chosen by the runtime.

OctopiA, broker <-> broker (kinds ``scot_*``):

=================  ===========================================================================
ScotAdvertise      scotAFP (Alg. 1): host broker -> its secondary neighbours (the host region),
                   with CIV_a^i (only the host's bit set).
ScotUnadvertise    host broker -> the host region: remove the advertisement from the CLTs.
CivSet             CIV_SET: a secondary broker of C_j -> the advertisements' host broker:
                   C_j now holds a subscription overlapping them (Alg. 1 l.14-20, Alg. 2
                   l.6-10).  Names the advertisements (see `broker.cores.octopia` for why).
CivUnset           CIV_UNSET: the last overlapping subscription of C_j left (§8).
ScotSubscribe      scotSBP (Alg. 2): cluster-level broadcast over aLinks.
ScotUnsubscribe    the same broadcast, removing the subscription from the PRTs.
ScotPublish        a publication copy; ``civp`` is CIV_p^i (0 = static, else CIV_p^i-D, §9.2).
ScotDetour         a publication or (un)subscription walking around a suspected broker
                   through a parallel cluster (`broker.cores.detours`; not in the paper).
PrtSync            a neighbour's side of the cluster's PRT, after a restart or a suspicion
                   (`broker.cores.resync`; not in the paper).
CltSync            a region neighbour's hosted advertisements and CIV bits, likewise.
=================  ===========================================================================

PADRES-style baseline (kinds ``padres_*``): PadresAdvertise / PadresUnadvertise flood with the
advertisement-tree id (TID); PadresSubscribe / PadresUnsubscribe follow the reverse paths of
the TIDs they name; PadresPublish carries the TID of the advertisement tree it follows and,
once TID-D has re-stamped it onto another tree, the subscriptions it still serves
(``targets``; empty: every matching subscription bound to that tree, as in TID-S).

Client <-> broker (kinds ``broker_*``): the client operations (advertise, unadvertise,
subscribe, unsubscribe, publish), the delivery of a publication to a subscribing client, and
a refusal.  ``client`` names the client; the runtime sets it from the connection.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, NewType

from broker.cores.language.filters import Filter
from broker.cores.language.values import FilterError, Value, validate_publication
from pubsub.kernel import wire
from pubsub.kernel.message import Message, message
from pubsub.kernel.wire import WireError

#: A publication's attributes: 1..64 named str/int/float values (`broker.cores.language.values`).
Attrs = NewType("Attrs", dict[str, Value])


def _check_filter(value: object) -> Filter:
    try:
        return Filter.from_wire(value)
    except (FilterError, TypeError) as exc:
        raise WireError("bad_field", f"not a filter: {exc}"[:200]) from None


def _encode_filter(value: Filter) -> Any:
    return value.to_wire()


def _check_attrs(value: object) -> Attrs:
    try:
        return Attrs(validate_publication(value))
    except (FilterError, TypeError) as exc:
        raise WireError("bad_field", f"not a publication: {exc}"[:200]) from None


def _encode_attrs(value: Attrs) -> Any:
    return dict(value)


wire.register_field_type(Filter, _check_filter, _encode_filter)
wire.register_field_type(list[Filter], wire.bounded_list(_check_filter, wire.MAX_STRINGS, "filters"),
                         wire.list_encoder(_encode_filter))
wire.register_field_type(Attrs, _check_attrs, _encode_attrs)


# --- OctopiA: broker <-> broker -------------------------------------------------------------
@message("scot_adv")
class ScotAdvertise(Message):
    """scotAFP (Alg. 1 l.2-8): advertisement `uid` with CIV_a^i, to the host region."""

    uid: str
    adv: Filter
    civ: int
    sender: str


@message("scot_unadv")
class ScotUnadvertise(Message):
    """Host broker -> host region: drop advertisement `uid` from the CLT (§6)."""

    uid: str
    sender: str


@message("scot_civ_set")
class CivSet(Message):
    """CIV_SET (§8): the sender's cluster now has a subscription overlapping `uids`."""

    uids: list[str]
    sender: str


@message("scot_civ_unset")
class CivUnset(Message):
    """CIV_UNSET (§8): the sender's cluster no longer has one overlapping `uids`."""

    uids: list[str]
    sender: str


@message("scot_sub")
class ScotSubscribe(Message):
    """scotSBP (Alg. 2 l.1-4): subscription `uid`, broadcast in the host cluster."""

    uid: str
    sub: Filter
    sender: str


@message("scot_unsub")
class ScotUnsubscribe(Message):
    """Unsubscribe: subscription `uid` leaves the PRTs of the host cluster (§7)."""

    uid: str
    sender: str


@message("scot_pub")
class ScotPublish(Message):
    """A publication copy (scotSPR Alg. 3 / scotIDR Alg. 4); `civp` is CIV_p^i, 0 if static.

    `publisher` is the publishing client and `pid` the publication's id (unique per
    publisher); `hops` counts the inter-broker hops so far; `origin` is the publisher's host
    broker (with `publisher` and `pid`, the key a broker suppresses a duplicate by,
    `broker.cores.inflight`).
    """

    pid: str
    publisher: str
    attrs: Attrs
    civp: int
    hops: int
    sender: str
    origin: str = ""


@message("scot_detour")
class ScotDetour(Message):
    """A broker message walking around the suspected broker `around` to `exit`, a primary
    neighbour of `around`, which handles `inner` (an encoded ScotPublish, ScotSubscribe or
    ScotUnsubscribe whose sender is `around`) as if `around` had sent it
    (`broker.cores.detours`).  `avoid` lists the brokers the walk must not cross, `around`
    first; `hops` counts the walk's hops and those of the message before it."""

    around: str
    exit: str
    avoid: list[str]
    hops: int
    inner: bytes
    sender: str


@message("scot_prt_sync")
class PrtSync(Message):
    """The sender's side of the cluster, to a primary neighbour (issue 46 item 4): every
    subscription whose last hop at the sender is not the receiver, in parts of at most
    `broker.cores.resync.SYNC_PART` (`start` on the first, `final` on the last).  The
    receiver's subscriptions with the sender as last hop become exactly these."""

    uids: list[str]
    subs: list[Filter]
    start: bool
    final: bool
    sender: str


@message("scot_clt_sync")
class CltSync(Message):
    """To a secondary neighbour (issue 46 item 4): the advertisements the sender hosts (the
    receiver's CLT entries with the sender as last hop become exactly these) and, in
    `overlapped`, the receiver's hosted advertisements that the sender's cluster holds an
    overlapping subscription for (the receiver's CIV bit of the sender's cluster).  In parts
    like `PrtSync`."""

    uids: list[str]
    advs: list[Filter]
    overlapped: list[str]
    start: bool
    final: bool
    sender: str


# --- PADRES-style baseline: broker <-> broker ----------------------------------------------
@message("padres_adv")
class PadresAdvertise(Message):
    """Advertisement flooding with the advertisement-tree id `tid` (duplicates dropped)."""

    tid: str
    adv: Filter
    sender: str


@message("padres_unadv")
class PadresUnadvertise(Message):
    """Flooded removal of advertisement tree `tid` (and the subscription paths bound to it)."""

    tid: str
    sender: str


@message("padres_sub")
class PadresSubscribe(Message):
    """Subscription `uid` bound to `tids`, travelling up those advertisement trees."""

    uid: str
    sub: Filter
    tids: list[str]
    sender: str


@message("padres_unsub")
class PadresUnsubscribe(Message):
    """Removal of subscription `uid` along the paths of `tids`."""

    uid: str
    tids: list[str]
    sender: str


@message("padres_pub")
class PadresPublish(Message):
    """A publication routed down advertisement tree `tid`.

    `targets` empty (TID-S, and TID-D before any re-stamping): the receiver serves every
    matching subscription bound to `tid` below it.  Otherwise (a copy TID-D re-stamped, or
    split off a re-stamped group, `broker.cores.padres`): the receiver serves exactly these
    subscription ids -- delivers to its own, forwards each other one along its route on
    `tid` -- and no other; every subscription is in one copy's targets only, so each
    subscriber gets the publication once.
    """

    pid: str
    publisher: str
    attrs: Attrs
    tid: str
    hops: int
    sender: str
    targets: list[str] = field(default_factory=list)


# --- client <-> broker ----------------------------------------------------------------------
@message("broker_advertise")
class ClientAdvertise(Message):
    """Client -> host broker: advertise `adv` under the client's id `adv_id`."""

    client: str
    adv_id: str
    adv: Filter


@message("broker_unadvertise")
class ClientUnadvertise(Message):
    client: str
    adv_id: str


@message("broker_subscribe")
class ClientSubscribe(Message):
    """Client -> host broker: subscribe with `sub` under the client's id `sub_id`."""

    client: str
    sub_id: str
    sub: Filter


@message("broker_unsubscribe")
class ClientUnsubscribe(Message):
    client: str
    sub_id: str


@message("broker_publish")
class ClientPublish(Message):
    """Client -> host broker: publish `attrs`; `pid` names it (unique per client)."""

    client: str
    pid: str
    attrs: Attrs


@message("broker_deliver")
class Deliver(Message):
    """Host broker -> subscribing client: a publication matching the client's `sub_ids`."""

    client: str
    pid: str
    publisher: str
    attrs: Attrs
    sub_ids: list[str]
    #: the delivery's number in the client's session (`broker.sessions`; 0 outside a session)
    seq: int = 0


@message("broker_session")
class ClientSessionRequest(Message):
    """Client -> broker: open a session (`token` "") or resume session `token`, handing over
    what was delivered in it after number `after` (`broker.sessions`)."""

    client: str
    token: str
    after: int


@message("broker_gap")
class DeliveryGap(Message):
    """Broker -> client in a session: `missed` deliveries of subscriptions `sub_ids` are lost
    (-1: unknown how many) because of `reason` (``overflow``: more than the session keeps
    while disconnected; ``slow_client``: the connection did not read; ``broker_restarted``;
    ``expired``: the session is gone and its subscriptions were made again)."""

    client: str
    missed: int
    reason: str
    sub_ids: list[str]


@message("broker_refused")
class ClientRefused(Message):
    """Host broker -> client: an operation was refused (`code`, human-readable `detail`)."""

    client: str
    code: str
    detail: str


BROKER_TO_BROKER = (
    ScotAdvertise,
    ScotUnadvertise,
    CivSet,
    CivUnset,
    ScotSubscribe,
    ScotUnsubscribe,
    ScotPublish,
    ScotDetour,
    PrtSync,
    CltSync,
    PadresAdvertise,
    PadresUnadvertise,
    PadresSubscribe,
    PadresUnsubscribe,
    PadresPublish,
)
CLIENT_OPERATIONS = (
    ClientAdvertise,
    ClientUnadvertise,
    ClientSubscribe,
    ClientUnsubscribe,
    ClientPublish,
)
TO_CLIENT = (Deliver, ClientRefused, DeliveryGap)
