"""A seeded discrete-event simulator for broker networks (issue 4, item 6).

It runs one broker core per SCOT broker -- `OctopiaBroker` (SPR or IDR) or `PadresBroker` --
in one process and carries their messages over the SCOT's links the way a network would:

- every directed link (u, v) has a FIFO *output queue* at u, a *bandwidth* (messages per
  second, or bytes per second of the encoded frame with ``units="bytes"``) and a
  *propagation delay* (plus optional jitter that never reorders a link);
- a message waits in the queue, is transmitted (size / bandwidth), then propagates; the
  queue length Q_l counts the waiting messages and the one being transmitted;
- every t_w the simulator reports each link's Q_l and the numbers of messages that entered
  and left its queue in the window to the sending broker's core (`BrokerCore.link_status`,
  the LST of §9.2), so IDR sees real congestion;
- brokers may take a service time per message (a constant or a function of the core and the
  message) and then handle their input one message at a time, in arrival order;
- clients are attached to brokers with no delay; their operations can be scheduled at any
  time (``at=``).

Failures (issue 46): `crash` (the broker drops whatever arrives, and what it had not sent
yet), `hang` (it keeps what
arrives, unhandled, until `resume`), `detect` (its neighbours' failure detectors suspect it:
`BrokerCore.neighbour_changed`; the copies it had not acknowledged go around it), `heartbeat`
(one instant round of acknowledgements between running brokers), `clear` (they hear it
again) and `restart` (a fresh core with empty tables and a new epoch; its neighbours notice
the new incarnation).  What reached a
crashed broker is counted in `lost_at_crashed` by kind.

Congestion on purpose: `set_link` (a slow link), `background_load` (filler messages at a
given rate into one link's queue for a while -- they occupy the link and are dropped on
arrival) and `pin_link` (report a fixed LST row for one link, whatever its real queue).

Measurements: inter-broker messages by kind (`traffic`) and by the client operation that
caused them (`traffic_by_op`, `ops`: start, end and message count of every operation -- an
operation ends when the last message it caused has been handled); deliveries and their
delays (`deliveries`, `publication_delays`); how often each broker received each
publication (`pub_visits`, for loop and duplicate checks); per-link queue maxima and, with
``record_queues=True``, a sample of every non-empty queue at every tick (`queue_samples`);
routing-table sizes (`table_sizes`); with ``trace=True`` every inter-broker message
(`trace`).  Everything is deterministic for a seed.

For the §10 comparison: advertisement / subscription / publication messages are
``traffic_by_op["advertise" | "subscribe" | "publish"]`` (or per operation in `op_stats`);
CLT vs SRT and PRT sizes are `table_sizes`; subscription delay is `OpStat.duration` of the
subscribe operations (OctopiA: until the last broker of the cluster and the last CIV_SET are
handled; PADRES: until the subscription reached every advertisement's root); publication
delays are `publication_delays`; queue lengths over time are `queue_samples`; matching cost
can be modelled with a ``service_time`` function of the core and the message.  Attribution
follows causality: a PADRES subscription bound to an advertisement that arrives later
travels on behalf of that advertise operation, so issue advertisements first (and let them
settle) when subscription messages are to be counted separately.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW, BrokerCore
from broker.cores.factory import make_core
from broker.cores.failures import Change, ChangeKind
from broker.cores.language.filters import Filter
from broker.cores.language.values import Value
from broker.cores.messages import (
    BROKER_TO_BROKER,
    Attrs,
    ClientAdvertise,
    ClientPublish,
    ClientRefused,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Deliver,
    PadresPublish,
    ScotDetour,
    ScotPublish,
)
from broker.cores.topology import BrokerId, Scot
from broker.simrecords import Delivery, Link, OpStat, SimError
from pubsub.kernel.message import Message, Send
from pubsub.kernel.wire import decode
from pubsub.sim.engine import EventQueue

_PUBLICATIONS = (ScotPublish, PadresPublish)
_BROKER_KINDS = frozenset(cls.kind for cls in BROKER_TO_BROKER)

# event kinds (ties at equal times are broken by insertion order)
_CLIENT, _TX_DONE, _ARRIVE, _PROCESS, _TICK, _FILL = range(6)


class _Filler(Message):
    """Background traffic: occupies a link, dropped on arrival, never counted as a message."""

    __slots__ = ()
    kind = "filler"


_FILLER = _Filler()
_KEEP = object()  # set_link: leave the bandwidth as it is


def _core(protocol: str, topo: Scot, bid: BrokerId, dynamic: bool, tau: float, t_w: float,
          epoch: str = "") -> BrokerCore:
    try:
        return make_core(protocol, topo, bid, dynamic=dynamic, tau=tau, t_w=t_w, epoch=epoch)
    except ValueError as exc:
        raise SimError(str(exc)) from None


class BrokerSim:
    """Broker cores on a SCOT, on a virtual clock (seconds)."""

    def __init__(
        self,
        topo: Scot,
        *,
        protocol: str = "octopia",
        dynamic: bool = False,
        seed: int = 0,
        bandwidth: float | None = None,
        units: str = "messages",
        propagation: float = 0.0,
        jitter: float = 0.0,
        tau: float = DEFAULT_TAU,
        t_w: float = DEFAULT_TW,
        service_time: float | Callable[[BrokerCore, Message], float] = 0.0,
        record_queues: bool = False,
        trace: bool = False,
    ) -> None:
        if units not in ("messages", "bytes"):
            raise SimError(f"units must be 'messages' or 'bytes', not {units!r}")
        self.topo = topo
        self.protocol = protocol
        self._core_args = (protocol, dynamic, tau, t_w)
        self.rng = random.Random(seed)
        self.units = units
        self.jitter = jitter
        self.t_w = t_w
        self.service_time = service_time
        self.record_queues = record_queues
        self.events = EventQueue()
        self.cores: dict[BrokerId, BrokerCore] = {
            b: _core(protocol, topo, b, dynamic, tau, t_w) for b in topo.brokers
        }
        self.links: dict[tuple[BrokerId, BrokerId], Link] = {}
        for a, b in topo.links():
            self.links[(a, b)] = Link(a, b, bandwidth, propagation)
            self.links[(b, a)] = Link(b, a, bandwidth, propagation)
        self.clients: dict[str, BrokerId] = {}
        self.pinned: dict[tuple[BrokerId, BrokerId], tuple[int, int, int]] = {}
        #: crashed brokers (drop what arrives) and hung ones (keep it for `resume`)
        self.crashed: set[BrokerId] = set()
        self.hung: dict[BrokerId, list[tuple[Message, int]]] = {}
        self.restarts: Counter[BrokerId] = Counter()
        self.lost_at_crashed: Counter[str] = Counter()
        # measurements
        self.traffic: Counter[str] = Counter()
        self.traffic_by_op: Counter[str] = Counter()
        self.ops: list[OpStat] = []
        self.published: dict[str, tuple[float, str, dict[str, Value]]] = {}
        self.deliveries: dict[str, list[Delivery]] = {}
        self.refusals: list[tuple[float, str, str, str]] = []
        self.pub_visits: dict[str, Counter[BrokerId]] = {}
        self.pub_max_hops: dict[str, int] = {}
        self.copies_with_civp = 0
        self.background_sent = 0
        self.queue_samples: list[tuple[float, dict[tuple[BrokerId, BrokerId], int]]] = []
        #: With ``trace=True``: every inter-broker message as (time sent, src, dst, message).
        self.trace: list[tuple[float, BrokerId, BrokerId, Message]] | None = [] if trace else None
        # scheduler
        self._work = 0
        self._tick_pending = False
        self._broker_free: dict[BrokerId, float] = dict.fromkeys(topo.brokers, 0.0)
        self._pid_seq = 0

    @property
    def now(self) -> float:
        """The virtual clock, seconds (`pubsub.sim.engine.EventQueue`)."""
        return self.events.now

    @now.setter
    def now(self, when: float) -> None:
        self.events.now = when

    # --- configuration ---------------------------------------------------------------------
    def link(self, src: BrokerId, dst: BrokerId) -> Link:
        try:
            return self.links[(src, dst)]
        except KeyError:
            raise SimError(f"no link {src} -> {dst}") from None

    def set_link(
        self,
        src: BrokerId,
        dst: BrokerId,
        *,
        bandwidth: float | None | object = _KEEP,
        propagation: float | None = None,
    ) -> None:
        """Change one directed link's bandwidth (None: infinite) and/or propagation delay."""
        link = self.link(src, dst)
        if bandwidth is not _KEEP:
            link.bandwidth = bandwidth  # type: ignore[assignment]
        if propagation is not None:
            link.propagation = propagation

    def pin_link(
        self, src: BrokerId, dst: BrokerId, queue_len: int, q_in: int = 0, q_out: int = 0
    ) -> None:
        """Report this LST row for link src -> dst from now on (and right now)."""
        self.link(src, dst)
        self.pinned[(src, dst)] = (queue_len, q_in, q_out)
        self.cores[src].link_status(dst, queue_len, q_in, q_out, self.now)

    def unpin_link(self, src: BrokerId, dst: BrokerId) -> None:
        self.pinned.pop((src, dst), None)
        link = self.link(src, dst)
        self.cores[src].link_status(dst, link.queue_len, 0, 0, self.now)

    def background_load(
        self, src: BrokerId, dst: BrokerId, rate: float, start: float, stop: float
    ) -> None:
        """Filler messages into the queue of src -> dst at `rate` per second in [start, stop)."""
        self.link(src, dst)
        if rate <= 0 or stop <= start:
            return
        step = 1.0 / rate
        t = max(start, self.now)
        while t < stop:
            self._schedule(t, _FILL, (src, dst))
            self._work += 1
            t += step

    def attach(self, client: str, broker: BrokerId) -> None:
        """Attach a client to its host broker."""
        if broker not in self.cores:
            raise SimError(f"no broker {broker}")
        self.clients[client] = broker

    # --- failures --------------------------------------------------------------------------------
    def crash(self, broker: BrokerId) -> None:
        """The broker stops: what arrives from now on is dropped, and so is what waits in its
        output queues (both counted in `lost_at_crashed`)."""
        self.core(broker)
        self.crashed.add(broker)

    def hang(self, broker: BrokerId) -> None:
        """The broker stops handling input (SIGSTOP): what arrives waits for `resume`."""
        self.core(broker)
        self.hung.setdefault(broker, [])

    def resume(self, broker: BrokerId) -> None:
        """A hung broker handles what arrived meanwhile, in order."""
        for msg, origin in self.hung.pop(broker, []):
            self._handle(broker, msg, origin)

    def detect(self, broker: BrokerId) -> None:
        """The broker's live neighbours suspect it (their failure detectors fired)."""
        self._tell_neighbours(broker, "suspected")

    def clear(self, broker: BrokerId) -> None:
        """The broker's live neighbours hear it again."""
        self._tell_neighbours(broker, "cleared")

    def restart(self, broker: BrokerId) -> None:
        """A crashed (or running) broker starts again with empty tables and a new epoch; its
        neighbours notice the new incarnation and hear it again."""
        self.restarts[broker] += 1
        protocol, dynamic, tau, t_w = self._core_args
        self.cores[broker] = _core(protocol, self.topo, broker, dynamic, tau, t_w, f"{self.restarts[broker]}.")
        self.crashed.discard(broker)
        self.hung.pop(broker, None)
        self._emit(broker, self.cores[broker].start(self.now), -1)
        self._tell_neighbours(broker, "restarted")
        self._tell_neighbours(broker, "cleared")

    def heartbeat(self) -> None:
        """One round of heartbeats, at once: every running broker acknowledges to each
        running neighbour the publication copies it has handled from it."""
        running = [b for b in self.topo.brokers if b not in self.crashed and b not in self.hung]
        for b in running:
            for n in self.topo.neighbours(b):
                if n not in self.crashed and n not in self.hung:
                    self.cores[n].acknowledged(b, self.cores[b].received_from(n))

    def _tell_neighbours(self, broker: BrokerId, kind: ChangeKind) -> None:
        for n in self.topo.neighbours(broker):
            if n not in self.crashed and n not in self.hung:
                self._emit(n, self.cores[n].neighbour_changed(Change(broker, kind), self.now), -1)

    # --- client operations -------------------------------------------------------------------
    def advertise(self, client: str, adv_id: str, adv: Filter, at: float | None = None) -> None:
        self._client_op(client, ClientAdvertise(client, adv_id, adv), at)

    def unadvertise(self, client: str, adv_id: str, at: float | None = None) -> None:
        self._client_op(client, ClientUnadvertise(client, adv_id), at)

    def subscribe(self, client: str, sub_id: str, sub: Filter, at: float | None = None) -> None:
        self._client_op(client, ClientSubscribe(client, sub_id, sub), at)

    def unsubscribe(self, client: str, sub_id: str, at: float | None = None) -> None:
        self._client_op(client, ClientUnsubscribe(client, sub_id), at)

    def publish(
        self,
        client: str,
        attrs: Mapping[str, Value],
        at: float | None = None,
        pid: str | None = None,
    ) -> str:
        """Schedule a publication; returns its id."""
        if pid is None:
            self._pid_seq += 1
            pid = f"{client}#{self._pid_seq}"
        self._client_op(client, ClientPublish(client, pid, Attrs(dict(attrs))), at)
        return pid

    def _client_op(self, client: str, msg: Message, at: float | None) -> None:
        if client not in self.clients:
            raise SimError(f"client {client!r} is not attached (call attach first)")
        when = self.now if at is None else max(at, self.now)
        self._schedule(when, _CLIENT, msg)
        self._work += 1

    # --- running -------------------------------------------------------------------------------
    def run(self, until: float | None = None, *, max_events: int | None = None) -> bool:
        """Process events until there is no work left (True) or until time `until` (False
        if work remains then).  Periodic LST ticks alone do not count as work."""
        handled = 0
        while (when := self.events.next_time()) is not None and self._work > 0:
            if until is not None and when > until:
                self.now = until
                return False
            kind, payload = self.events.pop()  # a tick left over from an idle spell may be late
            self._dispatch(kind, payload)
            handled += 1
            if max_events is not None and handled >= max_events:
                return self._work == 0
        if until is not None and until > self.now:
            self.now = until
        return self._work == 0

    def run_for(self, duration: float) -> bool:
        return self.run(self.now + duration)

    def idle(self) -> bool:
        return self._work == 0

    # --- events ----------------------------------------------------------------------------------
    def _schedule(self, when: float, kind: int, payload: Any) -> None:
        self.events.schedule(when, kind, payload)
        if not self._tick_pending and kind != _TICK:
            self._tick_pending = True
            k = int(self.now / self.t_w) + 1
            self.events.schedule(k * self.t_w, _TICK, None, first=True)

    def _dispatch(self, kind: int, payload: Any) -> None:
        if kind == _ARRIVE:
            self._arrive(*payload)
        elif kind == _PROCESS:
            self._work -= 1
            self._process(*payload)
        elif kind == _TX_DONE:
            self._tx_done(payload)
        elif kind == _CLIENT:
            self._work -= 1
            self._client(payload)
        elif kind == _TICK:
            self._tick()
        elif kind == _FILL:
            self._work -= 1
            self._enqueue(self.links[payload], _FILLER, -1)

    def _client(self, msg: Message) -> None:
        client = msg.client  # type: ignore[attr-defined]
        broker = self.clients[client]
        op = len(self.ops)
        self.ops.append(OpStat(msg.kind.removeprefix("broker_"), client, self.now, self.now))
        if isinstance(msg, ClientPublish):
            self.published[msg.pid] = (self.now, client, dict(msg.attrs))
            self.deliveries.setdefault(msg.pid, [])
        self._handle(broker, msg, op)

    def _arrive(self, link_key: tuple[BrokerId, BrokerId], msg: Message, origin: int) -> None:
        dst = link_key[1]
        if msg is _FILLER:
            self._work -= 1
            return
        service = self.service_time
        if callable(service):
            service = service(self.cores[dst], msg)
        if service <= 0:
            self._work -= 1
            self._process(dst, msg, origin)
            return
        start = max(self.now, self._broker_free[dst])
        self._broker_free[dst] = start + service
        self._schedule(start + service, _PROCESS, (dst, msg, origin))

    def _process(self, dst: BrokerId, msg: Message, origin: int) -> None:
        visited = msg
        if isinstance(msg, ScotDetour) and msg.exit == dst:  # the exit handles what it carries
            visited = decode(msg.inner)
        if isinstance(visited, _PUBLICATIONS):
            visits = self.pub_visits.setdefault(visited.pid, Counter())
            visits[dst] += 1
            hops = max(visited.hops, getattr(msg, "hops", 0))
            self.pub_max_hops[visited.pid] = max(self.pub_max_hops.get(visited.pid, 0), hops)
        if origin >= 0:
            self.ops[origin].end = self.now
        self._handle(dst, msg, origin)

    def _handle(self, broker: BrokerId, msg: Message, origin: int) -> None:
        if broker in self.crashed:
            self.lost_at_crashed[msg.kind] += 1
            return
        if broker in self.hung:
            self.hung[broker].append((msg, origin))
            return
        sends = self.cores[broker].handle(msg, self.now)
        self._emit(broker, sends, origin)

    def _emit(self, broker: BrokerId, sends: Iterable[Send], origin: int) -> None:
        for dest, out in sends:
            if isinstance(out, Deliver):
                delivery = Delivery(out.client, self.now, tuple(out.sub_ids))
                self.deliveries.setdefault(out.pid, []).append(delivery)
                continue
            if isinstance(out, ClientRefused):
                self.refusals.append((self.now, out.client, out.code, out.detail))
                continue
            link = self.links.get((broker, dest))
            if link is None or out.kind not in _BROKER_KINDS:
                raise SimError(f"{broker} sent {out.kind} to {dest}, which is no neighbour")
            self.traffic[out.kind] += 1
            if origin >= 0:
                op = self.ops[origin]
                op.messages += 1
                self.traffic_by_op[op.kind] += 1
            if getattr(out, "civp", 0):
                self.copies_with_civp += 1
            if self.trace is not None:
                self.trace.append((self.now, broker, dest, out))
            self._enqueue(link, out, origin)

    def _enqueue(self, link: Link, msg: Message, origin: int) -> None:
        size = self._size(msg)
        link.queue.append((msg, size, origin))
        link.window_in += 1
        link.total_in += 1
        if msg is _FILLER:
            self.background_sent += 1
        self._work += 1  # until it is handled (or dropped) at the far end
        if not link.busy:
            self._start(link)
        link.max_len = max(link.max_len, link.queue_len)

    def _size(self, msg: Message) -> float:
        if self.units == "messages" or msg is _FILLER:
            return 1.0
        from pubsub.kernel.wire import encode_payload

        return float(len(encode_payload(msg)) + 4)

    def _start(self, link: Link) -> None:
        msg, size, origin = link.queue[0]
        link.busy = True
        tx = 0.0 if link.bandwidth is None else size / link.bandwidth
        self._schedule(self.now + tx, _TX_DONE, link)

    def _tx_done(self, link: Link) -> None:
        msg, _, origin = link.queue.popleft()
        link.busy = False
        link.window_out += 1
        link.total_out += 1
        if link.src in self.crashed:  # what a crashed broker had not written dies with it
            self._work -= 1
            if msg is not _FILLER:
                self.lost_at_crashed[msg.kind] += 1
            if link.queue:
                self._start(link)
            return
        arrival = self.now + link.propagation
        if self.jitter > 0:
            arrival += self.rng.uniform(0.0, self.jitter)
        arrival = max(arrival, link.last_arrival)  # a link never reorders
        link.last_arrival = arrival
        self._schedule(arrival, _ARRIVE, ((link.src, link.dst), msg, origin))
        if link.queue:
            self._start(link)

    def _tick(self) -> None:
        """Every t_w: report the LST rows to the cores; sample the queues."""
        sample: dict[tuple[BrokerId, BrokerId], int] = {}
        for key, link in self.links.items():
            pinned = self.pinned.get(key)
            if pinned is not None:
                self.cores[link.src].link_status(link.dst, *pinned, self.now)
            else:
                self.cores[link.src].link_status(
                    link.dst, link.queue_len, link.window_in, link.window_out, self.now
                )
            if self.record_queues and link.queue_len:
                sample[key] = link.queue_len
            link.window_in = link.window_out = 0
        if self.record_queues:
            self.queue_samples.append((self.now, sample))
        if self._work > 0:
            k = round(self.now / self.t_w) + 1
            self.events.schedule(k * self.t_w, _TICK, None)
        else:
            self._tick_pending = False

    # --- measurements -----------------------------------------------------------------------------
    def core(self, bid: BrokerId) -> BrokerCore:
        return self.cores[bid]

    def recipients(self, pid: str) -> Counter[str]:
        """How many `Deliver`s each client got for publication `pid`."""
        return Counter(d.client for d in self.deliveries.get(pid, []))

    def publication_delays(self) -> list[float]:
        """Every delivery's delay (delivery time minus publish time)."""
        out: list[float] = []
        for pid, ds in self.deliveries.items():
            start = self.published.get(pid)
            if start is not None:
                out.extend(d.time - start[0] for d in ds)
        return out

    def op_stats(self, kind: str) -> list[OpStat]:
        """The operations of one kind: advertise, unadvertise, subscribe, unsubscribe, publish."""
        return [op for op in self.ops if op.kind == kind]

    def table_sizes(self) -> dict[str, dict[BrokerId, int]]:
        """Per broker: CLT (OctopiA) or SRT (PADRES) size, and PRT size."""
        out: dict[str, dict[BrokerId, int]] = {"prt": {}}
        adv_table = "clt" if self.protocol == "octopia" else "srt"
        out[adv_table] = {}
        for bid, core in self.cores.items():
            out["prt"][bid] = core.prt_size  # type: ignore[attr-defined]
            out[adv_table][bid] = getattr(core, f"{adv_table}_size")
        return out

    def counters(self) -> Counter[str]:
        """The cores' counters, summed over brokers."""
        total: Counter[str] = Counter()
        for core in self.cores.values():
            total.update(core.counters)
        return total

    def queue_lengths(self) -> dict[tuple[BrokerId, BrokerId], int]:
        return {key: link.queue_len for key, link in self.links.items() if link.queue_len}
