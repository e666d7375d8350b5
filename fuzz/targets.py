"""The fuzz targets: ``target(data) -> messages handled``; raising means a crash or a broken
invariant (`fuzz.checks.Broken`).

=============  ==============================================================================
target         what one input is, and what must hold
=============  ==============================================================================
``framing``    a byte stream (raw, or built from frames) cut into chunks and fed to
               `FrameDecoder`: the frames, `error`, `pending`, `in_frame` and `expected`
               equal those of a plain reference parser of the whole stream.
``codec``      one frame payload (raw bytes, or a body of any registered kind):
               `wire.decode` accepts it or raises `WireError`, nothing else; what it
               accepts re-encodes and decodes to the same bytes; the fast decoders
               (`pubsub.publications.hotpath` and their compiled twins) accept nothing the
               generic decoder refuses and decode what they accept identically, every
               field; a Bundle's payloads decode the same way.
``node``       a `NodeCore` (BuildSR per topic, anti-entropy, publishing, hand-over) driven
               by decoded messages from arbitrary senders, client publish requests, write
               outcomes, timeouts, joins and leaves, unreachable peers.
``supervisor`` a `SupervisorCore`, from an empty or a corrupted database, driven by
               decoded subscriber messages, timeouts and unreachable peers.
``octopia``    an `OctopiaBroker` (static or dynamic routing) of the Figure 3 SCOT, and
``padres``     a `PadresBroker`, each driven by broker messages from neighbours and
               strangers, client operations and link reports.
``broker-sessions``  a broker's client side with its sessions (`fuzz.sessiontarget`): one
               answer per request, numbered deliveries rising on each connection from a
               resume's `after`, the core's subscriptions those of the live connections and
               sessions.
``NAME-node``  for every other registered overlay (`pubsub.kernel.registry`, e.g. the
               clique), its node core and its supervisor core, built by the registry's
``NAME-supervisor``  factories and driven by decoded messages of the overlay's kinds from
               arbitrary senders, client publish requests, write outcomes, timeouts, joins,
               leaves and unreachable peers: every effect well-formed, the status JSON-able,
               and the supervisor's stored changes rebuild the same membership.
=============  ==============================================================================

After every step the core targets check the effects (`fuzz.checks.check_effects`: each
message survives the codec, each destination is valid) and the core's state invariants
(`check_node`, `check_supervisor`, `check_broker`).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgpack

from fuzz import shapes
from fuzz.checks import Broken, check_effects, check_trie, every_field, require, roundtrip
from fuzz.sessiontarget import broker_sessions
from fuzz.shapes import NODE_REFS, SUPERVISOR, TOPICS, World, decoded
from fuzz.source import Source
from pubsub.kernel import registry, wire
from pubsub.kernel.control import Bundle
from pubsub.kernel.effects import Batch, Batched, Committed, Persist
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import MESSAGE_TYPES, Message, Ref, Topic
from pubsub.kernel.wire import HEADER, WireError
from pubsub.publications import hotpath
from pubsub.publications.messages import PublishRequest
from pubsub.publications.trie import publication_key
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.labels import MAX_LABEL_BITS, Label
from pubsub.skipring.nodecore import NodeCore
from pubsub.skipring.supervisor.core import SupervisorCore
from pubsub.skipring.supervisor.database import TopicDatabase

Target = Callable[[bytes], int]


# --- framing ---------------------------------------------------------------------------------
def _reference_frames(stream: bytes, max_frame: int) -> tuple[list[bytes], bool, int]:
    """(frames, oversize seen, bytes left over) of a whole stream, the obvious way."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        (length,) = HEADER.unpack_from(stream, pos)
        if length > max_frame:
            return frames, True, 0
        if len(stream) - pos - 4 < length:
            break
        frames.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return frames, False, len(stream) - pos


def framing(data: bytes) -> int:
    """The frame decoder against a reference parser (module docstring)."""
    src = Source(data)
    max_frame = src.choice((1, 3, 16, 255, 4096, wire.DEFAULT_MAX_FRAME))
    if src.flag():
        stream = bytearray()
        for _ in range(src.below(12)):
            body = src.raw(24)
            length = len(body) if src.flag(90) else src.choice((max_frame, max_frame + 1, 1 << 32 - 1))
            stream += HEADER.pack(length) + body
        if src.flag(30):
            stream = stream[: src.below(len(stream) + 1)]
        stream_bytes = bytes(stream)
    else:
        stream_bytes = src.raw(4096)
    cuts = sorted({src.below(len(stream_bytes) + 1) for _ in range(src.below(10))})
    decoder = FrameDecoder(max_frame)
    got: list[bytes] = []
    start = 0
    for end in [*cuts, len(stream_bytes)]:
        chunk = stream_bytes[start:end]
        kind = src.below(3)
        piece: bytes | bytearray | memoryview = (
            chunk if kind == 0 else bytearray(chunk) if kind == 1 else memoryview(chunk)
        )
        got.extend(decoder.feed(piece))
        start = end
    frames, oversize, left = _reference_frames(stream_bytes, max_frame)
    require(got == frames, f"frames differ: {len(got)} decoded, {len(frames)} expected")
    require((decoder.error is not None) == oversize, f"error {decoder.error!r}, oversize {oversize}")
    if oversize:
        require(decoder.error is not None and decoder.error.code == "frame_too_large", "wrong error code")
        require(decoder.pending == 0 and decoder.feed(b"\0\0\0\0") == [], "input accepted after an error")
    else:
        require(decoder.pending == left, f"pending {decoder.pending}, {left} bytes left over")
        require(decoder.in_frame == (left > 0), "in_frame wrong")
        tail = stream_bytes[len(stream_bytes) - left :]
        expected = HEADER.unpack_from(tail)[0] if left >= 4 else None
        require(decoder.expected == expected, f"expected {decoder.expected}, should be {expected}")
    return len(got)


# --- codec -----------------------------------------------------------------------------------
def _generic_decode(payload: bytes) -> Message:
    """`wire.decode` without its fast decoders (the generic path alone)."""
    saved = wire._FAST[:]  # noqa: SLF001 - the harness compares the two paths
    wire._FAST.clear()  # noqa: SLF001
    try:
        return wire.decode(payload)
    finally:
        wire._FAST[:] = saved  # noqa: SLF001


#: Every fast decoder: `pubsub.publications.hotpath`'s Python ones, and the ones it gives the
#: codec (their compiled twins where built).
FAST_DECODERS: list[Callable[[bytes], Message | None]] = [
    hotpath.decode_spread, hotpath.decode_delivery, hotpath.decode_publish_request, hotpath.decode_publish_ack,
    *(decoder for decoder in hotpath.DECODERS.values() if hotpath.COMPILED),
]


def _one_payload(payload: bytes) -> Message | None:
    """Decode one payload as the runtime does, checking the codec's promises."""
    fast = [found for found in (decoder(payload) for decoder in FAST_DECODERS) if found is not None]
    try:
        msg = wire.decode(payload)
    except WireError as exc:
        require(exc.code in wire.ERROR_CODES, f"unknown error code {exc.code!r}")
        if fast:
            raise Broken(f"the {fast[0].kind} fast path accepts what the codec refuses: {exc}") from None
        return None
    if fast:
        # every field compared: a batch keeps the bytes it arrived as, so its encoding may
        # differ where its content does not
        generic = every_field(_generic_decode(payload))
        for found in fast:
            require(every_field(found) == generic, f"the {found.kind} fast path and the generic decoder disagree")
    roundtrip(msg)
    return msg


def codec(data: bytes) -> int:
    """The codec on one payload (module docstring)."""
    src = Source(data)
    if src.flag(50):
        payload = data[1:]
    else:
        world = World()
        kind = src.choice(sorted(MESSAGE_TYPES))
        body = shapes.body(src, world, kind)
        if kind == "bundle" and src.flag(80):
            inner = [shapes.body(src, world, src.choice(sorted(MESSAGE_TYPES))) for _ in range(src.below(4))]
            body["payloads"] = [msgpack.packb(b, use_bin_type=True) for b in inner]
        payload = msgpack.packb(body, use_bin_type=True)
    msg = _one_payload(payload)
    if msg is None:
        return 0
    count = 1
    if isinstance(msg, Bundle):
        for inner_payload in msg.payloads:
            count += _one_payload(inner_payload) is not None
    return count


# --- node ------------------------------------------------------------------------------------
#: Every skip-ring message a node may receive from a peer (others are ignored by the core).
NODE_KINDS = tuple(
    kind for kind, cls in sorted(MESSAGE_TYPES.items()) if cls.__module__ == "pubsub.skipring.messages"
)


def _check_instance(inst: SkipRingNode, me: Ref, ordered: bool) -> None:
    where = f"{inst.topic}@{me}"
    require(not inst._out and not inst._self_queue, f"{where}: sends left behind")  # noqa: SLF001
    contacts = [c for c in (inst.left, inst.right, inst.ring) if c is not None]
    if inst.label is None:
        require(not contacts, f"{where}: a node without a label holds contacts {contacts}")
        require(all(h is None for h in inst.shortcuts.values()), f"{where}: shortcuts without a label")
    elif ordered:  # a SetData may install any pred/succ; BuildList sorts them at Timeout
        if inst.left is not None:
            require(inst.left.label < inst.label, f"{where}: left {inst.left} not below {inst.label}")
        if inst.right is not None:
            require(inst.label < inst.right.label, f"{where}: right {inst.right} not above {inst.label}")
    for c in contacts:
        require(c.ref != me, f"{where}: holds itself as a neighbour")
        require(isinstance(c.label, Label), f"{where}: a contact without a label")
    for lab, holder in inst.shortcuts.items():
        require(isinstance(lab, Label), f"{where}: shortcut key {lab!r}")
        require(holder != me, f"{where}: holds itself as a shortcut")
    require(len(inst.shortcuts) <= 2 * (MAX_LABEL_BITS + 1), f"{where}: {len(inst.shortcuts)} shortcuts")


def check_node(core: NodeCore, limit: int, ordered: bool) -> None:
    """NodeCore's invariants: topic bookkeeping, every instance well-formed (after a Timeout
    with left < label < right: `ordered`), every trie
    consistent and holding only publications whose key matches their content, the message
    id window within its limit."""
    topics = set(core.instances)
    require(not core.wanted_topics & core.leaving, "a topic both wanted and being left")
    require(core.wanted_topics | core.leaving == topics, "instances differ from wanted + leaving topics")
    require(set(core.publications) <= topics, "a publication core without its instance")
    for inst in core.instances.values():
        _check_instance(inst, core.ref, ordered)
    for topic, ae in core.publications.items():
        check_trie(ae.trie, f"trie of {topic}")
        require(not ae._out, f"{topic}: anti-entropy sends left behind")  # noqa: SLF001
        for key, pub in ae.trie.items():
            require(int.from_bytes(pub.key, "big") == key, f"{topic}: {pub} stored under another key")
            require(pub.key == publication_key(pub.publisher, pub.seq, pub.payload), f"{topic}: {pub} has a forged key")
    require(core.publishing.remembered() <= limit, f"{core.publishing.remembered()} message ids kept, limit {limit}")
    require(core.next_seq >= 0, "negative sequence number")


class _NodeInputs:
    """What a node core is given, step by step, as the runtime and the executor would give
    it: decoded messages of `kinds` from arbitrary senders, Timeouts, joins and leaves,
    client publish requests, write outcomes, unreachable peers, time passing.  Shared by
    the skip ring's node target and every other overlay's."""

    def __init__(self, core: Any, src: Source, world: World, kinds: Sequence[str]) -> None:
        self.core, self.src, self.world, self.kinds = core, src, world, kinds
        self.now = 0.0
        self.handled = 0
        self.tokens: list[int] = []  # Persists whose outcome the core waits to hear

    def steps(self) -> Iterator[int]:
        """Up to 48 inputs while the data lasts, each carried out; yields which input it was
        (those the codec refused are skipped)."""
        for _ in range(self.src.between(1, 48)):
            if not self.src.left:
                return
            step = self.step()
            if step is not None:
                self.carry_out(step[1])
                yield step[0]

    def step(self) -> tuple[int, list[Any]] | None:
        """One input: (which, the effects); None when the codec refused the message."""
        core, src, now = self.core, self.src, self.now
        action = src.below(20)
        effects: list[Any] = []
        if action < 12:
            msg = decoded(src, self.world, self.kinds)
            if msg is None:
                return None
            effects = list(core.handle(msg, now))
            self.handled += 1
        elif action < 14:
            self.now += src.choice((0.1, 1.0, 5.0, 200.0))
            effects = list(core.timeout(self.now))
        elif action == 14:
            t = Topic(src.choice(TOPICS))
            effects = core.leave(t) if src.flag() else core.join(t)
        elif action < 17:
            req = decoded(src, self.world, ("publish_request",))
            if isinstance(req, PublishRequest):
                effects = core.publish_request(src.below(4), req, src.below(10), now)
                self.handled += 1
        elif action == 17 and self.tokens:
            token = self.tokens.pop(src.below(len(self.tokens)))
            effects = list(core.handle(Committed((token,), src.flag(80), {}), now))
        elif action == 18:
            effects = core.peer_unreachable(Ref(src.choice(self.world.refs)), now)
        else:
            self.now += src.choice((0.5, 3.0, 130.0))
        return action, effects

    def carry_out(self, effects: list[Any]) -> None:
        """Check the effects and do what an executor would: remember the Persists' tokens,
        hand each Batched item back alone, and let the stored rows feed later messages."""
        check_effects(effects)
        batched: list[Batched] = []
        for effect in effects:
            if isinstance(effect, Persist):
                if effect.token is not None:
                    self.tokens.append(effect.token)
                batched += [e for e in (*effect.then, *effect.otherwise) if isinstance(e, Batched)]
                for row in effect.rows:
                    self.world.publications.append(shapes.wire_publication(row.publication))
                    del self.world.publications[:-64]
            elif isinstance(effect, Batched):
                batched.append(effect)
        for item in batched:
            check_effects(self.core.handle(Batch(item.work, item.topic, (item.item,)), self.now))


def node(data: bytes) -> int:
    """A NodeCore under a sequence of inputs (module docstring)."""
    src = Source(data)
    world = World()
    limit = src.choice((2, 8, 100))
    core = NodeCore(
        Ref(NODE_REFS[0]),
        Ref(SUPERVISOR),
        rng=random.Random(src.byte()),
        dissemination=src.choice(("tree", "flood", "off")),
        dedupe_limit=limit,
        handover_attempts=src.choice((1, 2, 3)),
    )
    inputs = _NodeInputs(core, src, world, NODE_KINDS)
    for t in TOPICS[:2]:
        check_effects(core.join(Topic(t)))
    for action in inputs.steps():
        for ae in core.publications.values():
            root = ae.trie.root_node()
            if root is not None and len(world.digests) < 256:
                world.digests.append([root.label.bits, root.hash])
                for child in root.children or ():
                    world.digests.append([child.label.bits, child.hash])
        check_node(core, limit, ordered=12 <= action < 14)
    return inputs.handled


# --- supervisor ------------------------------------------------------------------------------
SUPERVISOR_KINDS = ("subscribe", "unsubscribe", "get_configuration", "suspect", "get_member", "pong", "ping", "join")


def _check_database(db: TopicDatabase) -> None:
    where = f"database of {db.topic}"
    labels = list(db.by_label)
    require(all(a < b for a, b in zip(labels, labels[1:], strict=False)), f"{where}: not in ring order")
    require(set(db.by_index) == set(labels) and len(db.by_index) == len(labels), f"{where}: index differs")
    inverse: dict[Ref, set[Label]] = {}
    for lab, ref in db.by_label.items():
        if ref is not None:
            inverse.setdefault(ref, set()).add(lab)
    require(inverse == db.labels_of, f"{where}: labels_of differs from the table")
    nulls = sum(1 for ref in db.by_label.values() if ref is None)
    counted = db.without_subscriber
    require(nulls == counted, f"{where}: {nulls} tuples without subscriber, counted {counted}")


def check_supervisor(core: SupervisorCore, clean: bool, journal: dict[tuple[str, str], str]) -> None:
    """SupervisorCore's invariants: every database consistent (and legitimate when it
    started empty), the journal replays to the databases, boosts within their bounds."""
    require(not core._out, "sends left behind")  # noqa: SLF001
    actual: dict[tuple[str, str], str] = {}
    for topic, db in core.topics.items():
        _check_database(db)
        if clean:
            require(db.is_legitimate(), f"database of {topic} not legitimate: {db.members()}")
        for lab, ref in db.by_label.items():
            if ref is not None:
                actual[(topic, lab.bits)] = ref
    require(actual == journal, "the journal does not replay to the databases")
    cap = max(core.config_budget, core.max_config_budget or 0)
    for topic, boost in core._boosts.items():  # noqa: SLF001
        require(topic in core.topics, f"a boost for {topic}, which has no database")
        require(core.config_budget <= boost.budget <= cap, f"budget {boost.budget} outside its bounds")
    for urgent in core._urgent.values():  # noqa: SLF001
        require(len(urgent) == len(set(urgent)), "a subscriber queued twice")


class _SupervisorInputs:
    """What a supervisor core is given, step by step: decoded messages of `kinds` from
    subscribers, Timeouts, unreachable peers; its effects are checked and its reported
    changes applied to `journal` (what its daemon would have stored).  Shared by the skip
    ring's supervisor target and every other overlay's."""

    def __init__(
        self, core: Any, src: Source, world: World, kinds: Sequence[str], journal: dict[tuple[str, str], str]
    ) -> None:
        self.core, self.src, self.world, self.kinds, self.journal = core, src, world, kinds, journal
        self.now = 0.0
        self.handled = 0

    def steps(self) -> Iterator[None]:
        """Up to 48 inputs while the data lasts, each carried out (those the codec refused
        are skipped)."""
        for _ in range(self.src.between(1, 48)):
            if not self.src.left:
                return
            if self.step():
                yield None

    def step(self) -> bool:
        """One input, carried out; False when the codec refused the message."""
        core, src = self.core, self.src
        action = src.below(16)
        if action < 11:
            msg = decoded(src, self.world, self.kinds)
            if msg is None:
                return False
            effects = core.handle(msg, self.now)
            self.handled += 1
        elif action < 14:
            self.now += src.choice((0.1, 1.0, 3.0))
            effects = core.timeout(self.now)
        else:
            effects = core.peer_unreachable(Ref(src.choice(self.world.refs)), self.now)
        check_effects(effects)
        for topic, key, ref in core.drain_changes():
            if ref is None:
                self.journal.pop((topic, key), None)
            else:
                self.journal[(topic, key)] = ref
        return True


def supervisor(data: bytes) -> int:
    """A SupervisorCore under a sequence of inputs (module docstring)."""
    src = Source(data)
    world = World()
    core = SupervisorCore(
        Ref(SUPERVISOR),
        rng=random.Random(src.byte()),
        config_budget=src.choice((1, 2)),
        max_config_budget=src.choice((None, 4, 1024)),
    )
    clean = src.flag(60)
    if not clean:
        rows = []
        for _ in range(src.below(12)):
            bits = "".join("01"[src.byte() & 1] for _ in range(src.between(1, 5)))
            rows.append((src.choice(TOPICS), bits, src.choice(NODE_REFS)))
        core.load(rows)
    journal: dict[tuple[str, str], str] = {}
    for topic, db in core.topics.items():
        for lab, ref in db.by_label.items():
            if ref is not None:
                journal[(topic, lab.bits)] = ref
    inputs = _SupervisorInputs(core, src, world, SUPERVISOR_KINDS, journal)
    for _ in inputs.steps():
        check_supervisor(core, clean, journal)
    return inputs.handled


# --- brokers ---------------------------------------------------------------------------------
def _broker(protocol: str) -> Target:
    from broker import topologyfile
    from broker.cores.corebase import BrokerCore
    from broker.cores.factory import make_core
    from broker.cores.messages import BROKER_TO_BROKER, CLIENT_OPERATIONS, TO_CLIENT

    topo = topologyfile.figure3()
    brokers = topo.brokers
    prefix = "scot_" if protocol == "octopia" else "padres_"
    peer_kinds = tuple(cls.kind for cls in BROKER_TO_BROKER if cls.kind.startswith(prefix))
    other_kinds = tuple(cls.kind for cls in BROKER_TO_BROKER if not cls.kind.startswith(prefix))
    client_kinds = tuple(cls.kind for cls in CLIENT_OPERATIONS)
    clients = ("c1", "c2", "c3")

    def check_broker(core: BrokerCore, effects: list[Any], adverts: int, subs: int) -> None:
        for effect in effects:
            msg = effect.msg
            if isinstance(msg, TO_CLIENT):
                require(effect.dest == msg.client, f"{msg.kind} for {msg.client} sent to {effect.dest}")
            else:
                require(effect.dest in core.neighbours, f"{msg.kind} sent to non-neighbour {effect.dest}")
                require(getattr(msg, "sender", None) == core.me, f"{msg.kind} not sent as {core.me}")
            hops = getattr(msg, "hops", 0)
            require(0 <= hops <= core.max_hops + 1, f"{msg.kind} with {hops} hops")
        owners = {uid: key for key, uid in core.local_subs.items()}
        require(owners == core.sub_owner, "local subscriptions and their owners differ")
        require(len(set(core.local_advs.values())) == len(core.local_advs), "two advertisements share an id")
        table = getattr(core, "clt", None)
        if table is None:
            table = getattr(core, "srt", {})
        require(len(table) <= adverts, f"{len(table)} advertisements held after {adverts} were made")
        held = len(core.prt)  # type: ignore[attr-defined]  # both broker cores have a PRT
        require(held <= subs, f"{held} subscriptions held after {subs} were made")

    def target(data: bytes) -> int:
        src = Source(data)
        me = src.choice(brokers)
        if protocol == "octopia":
            core = make_core(protocol, topo, me, dynamic=src.flag())
        else:
            core = make_core(protocol, topo, me)
        strangers = tuple(b for b in brokers if b not in core.neighbours and b != me)
        world = World(senders=(*core.neighbours, *core.neighbours, *strangers[:2], me, *clients))
        now = 0.0
        handled = adverts = subs = 0
        for _ in range(src.between(1, 40)):
            if not src.left:
                break
            action = src.below(16)
            effects: list[Any] = []
            if action < 13:
                pick = src.below(16)
                kinds = client_kinds if pick < 6 else other_kinds if pick == 6 else peer_kinds
                msg = decoded(src, world, kinds)
                if msg is None:
                    continue
                adverts += msg.kind.endswith(("adv", "advertise"))
                subs += msg.kind.endswith(("sub", "subscribe", "detour"))  # a detour may carry one
                if msg.kind in ("scot_prt_sync", "scot_clt_sync"):  # a sync brings many
                    subs += len(msg.uids) if msg.kind == "scot_prt_sync" else 0  # type: ignore[attr-defined]
                    adverts += len(msg.uids) if msg.kind == "scot_clt_sync" else 0  # type: ignore[attr-defined]
                effects = core.handle(msg, now)
                handled += 1
            elif action < 15:
                link = src.choice((*core.neighbours, src.choice(brokers)))
                core.link_status(link, src.below(200), src.below(50), src.below(50), now)
            else:
                now += src.choice((0.01, 0.05, 1.0))
                effects = core.timeout(now)
            check_effects(effects, refs=False)
            for effect in effects:
                for name in ("uid", "tid"):
                    value = getattr(effect.msg, name, None)
                    if isinstance(value, str) and len(world.ids) < 64:
                        world.ids.append(value)
            check_broker(core, effects, adverts, subs)
        return handled

    target.__name__ = protocol
    target.__doc__ = f"A {protocol} broker core under a sequence of inputs (module docstring)."
    return target


octopia = _broker("octopia")
padres = _broker("padres")

#: name -> target, in the order `make fuzz` runs them.
# --- the other registered overlays ------------------------------------------------------------
def _overlay_node(name: str, data: bytes) -> int:
    """An overlay's node core under a sequence of inputs (module docstring)."""
    overlay = registry.overlay(name)
    src = Source(data)
    world = World()
    kinds = overlay.kinds()
    core = overlay.node_core(
        Ref(NODE_REFS[0]),
        Ref(SUPERVISOR),
        rng=random.Random(src.byte()),
        dissemination=src.choice((*overlay.disseminations, "off")),
        handover_attempts=src.choice((1, 2, 3)),
    )
    inputs = _NodeInputs(core, src, world, kinds)
    for t in TOPICS[:2]:
        check_effects(core.join(Topic(t)))
    for _ in inputs.steps():
        json.dumps(core.status())
    return inputs.handled


def _overlay_supervisor(name: str, data: bytes) -> int:
    """An overlay's supervisor core under a sequence of inputs (module docstring)."""
    overlay = registry.overlay(name)
    src = Source(data)
    world = World()
    kinds = overlay.kinds()
    core = overlay.supervisor_core(Ref(SUPERVISOR), rng=random.Random(src.byte()), config_budget=src.choice((1, 2)))
    stored: dict[tuple[str, str], str] = {}
    inputs = _SupervisorInputs(core, src, world, kinds, stored)
    for _ in inputs.steps():
        json.dumps(core.status())
    again = overlay.supervisor_core(Ref(SUPERVISOR), rng=random.Random(0))
    again.load([(topic, key, ref) for (topic, key), ref in stored.items()])
    require(_memberships(again.status()) == _memberships(core.status()),
            "the stored changes do not rebuild the supervisor's membership")
    return inputs.handled


def _memberships(status: dict[str, Any]) -> dict[str, list[str]]:
    return {
        topic: sorted(str(m.get("ref")) for m in entry.get("members", []))
        for topic, entry in (status.get("topics") or {}).items()
        if entry.get("members")
    }


def _overlay_targets() -> dict[str, Target]:
    """A node and a supervisor target for every registered overlay but the skip ring (whose
    own targets above check its state in depth)."""
    out: dict[str, Target] = {}
    for name in registry.overlay_names():
        if name != registry.DEFAULT_OVERLAY:
            out[f"{name}-node"] = functools.partial(_overlay_node, name)
            out[f"{name}-supervisor"] = functools.partial(_overlay_supervisor, name)
    return out


TARGETS: dict[str, Target] = {
    "framing": framing,
    "codec": codec,
    "node": node,
    "supervisor": supervisor,
    "octopia": octopia,
    "padres": padres,
    "broker-sessions": broker_sessions,
    **_overlay_targets(),
}


def seeds(name: str, count: int = 64) -> list[bytes]:
    """Starting inputs for a target: for ``codec``, valid payloads of every kind (raw mode,
    so mutations start from real frames); for the others, random bytes."""
    rng = random.Random(name)
    out = []
    for i in range(count):
        if name == "codec":
            src = Source(bytes(rng.randrange(256) for _ in range(512)))
            kind = sorted(MESSAGE_TYPES)[i % len(MESSAGE_TYPES)]
            out.append(b"\x00" + msgpack.packb(shapes.body(src, World(), kind), use_bin_type=True))
        else:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(16, 512))))
    return out


__all__ = ["TARGETS", "Broken", "seeds", "check_node", "check_supervisor"]
