"""Fault injection on running daemons: the admin listener and the injections (`pubsub chaos`).

Who may inject.  Only an operator who knows a daemon's *admin address*.  Every daemon can
open a second listener (``--admin-listen HOST:PORT``, ``PUBSUB_ADMIN_LISTEN``; off by
default; a host that is not loopback is refused unless ``--admin-allow-remote`` is given,
`pubsub.runtime.settings.AdminSettings`).  `ChaosRequest` frames are served there and nowhere else:
on the peer/client port the runtime counts them as ``forbidden`` errors, answers with an
ErrorReply and never passes them on (`pubsub.runtime.net`).  Nothing else is served on the admin
listener, so it exposes no more than the injections below.  The protocol is the client one
of `pubsub.runtime.net.request`: ``Hello(ref=None, role="client")``, then requests, each answered
by one Reply (body: what was done) or ErrorReply (code and a one-line reason).

The injections (`ChaosRequest.action`; every request is validated first and a bad one is
refused with code ``bad_params``, ``unsupported``, ``unknown_topic`` or
``nothing_to_corrupt``, never half applied):

``info``
    who this is: reference, role, pid, the faults in force (no marker).
``crash``
    write the marker, move the event file into place (so the marker survives), answer, then
    SIGKILL this process: a real crash, nothing else is cleaned up, closed or flushed.
``corrupt_node`` (nodes; params ``topic``, ``seed``, ``pool``, ``junk``)
    replace the BuildSR variables of one topic (or of every topic the node runs) by an
    arbitrary state -- a random label or ⊥, and random left/right/ring/shortcut pointers
    with wrong label beliefs to references drawn from ``pool`` (default: every node this
    node references now, in any topic) -- then send ``junk`` (default 3) random but
    well-formed BuildSR messages to random nodes of the pool or to the supervisor.
    The state is redrawn (a bounded number of times) if it came out unchanged.
``corrupt_supervisor`` (the supervisor; params ``topic``, ``seed``)
    give one topic's database (or every topic's) the four corruptions of §3.1; the changes
    are written to the durable database like any other.
``partition`` (params ``members``, ``duration``)
    this daemon, one of the references in ``members``, drops every peer frame to or from
    a reference outside ``members`` for ``duration`` seconds, then heals by itself.  The
    CLI asks every member of the set.
``drop`` (params ``fraction``, ``duration``)
    drop that fraction of the outgoing peer frames for ``duration`` seconds, then stop.

The corruptions are `pubsub.skipring.corruption`'s, the same ones the simulator starts from
(`pubsub.sim.scenarios.corrupted_start`); the network faults are `pubsub.runtime.net.NetworkFaults`
(frames are discarded inside the runtime, TCP connections stay up, so a partition is not
seen as a crash by the failure detector).  A new partition (drop) replaces the one in force.

Markers.  Each injection writes a ``marker`` event (docs/events.md: ``id``, ``action``,
``targets``, ``params``, ``topic``) through the daemon's event writer when it has one, and
answers with the marker's id (given by the request as ``marker_id`` or made up here).  A
partition or drop that ends writes a second marker, action ``heal``, id ``<id>-heal``,
params ``{"after": <action>, "of": <id>}``.  A partition involves several daemons but is
one perturbation: the CLI sets ``record`` only in its request to the first member, so one
marker (and one heal) is written per injection and ids stay unique within a run.

Common params: ``marker_id`` (letters, digits, ``.``, ``_``, ``:``, ``-``; at most 100),
``record`` (bool, default true), ``targets`` (the references the marker names, default this
daemon; the CLI lists every daemon of a multi-daemon injection).  Unknown params are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import signal
import socket
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pubsub.kernel import wire
from pubsub.skipring.corruption import belief, corrupt_instance, junk
from supervisor.corruption import corrupt_database
from pubsub.skipring.labels import Label
from pubsub.kernel.control import ChaosRequest, ErrorReply, Hello, Reply
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.runtime.net import LogLimiter, Runtime, split_ref
from pubsub.runtime.settings import AdminSettings

log = logging.getLogger(__name__)

ACTIONS = ("info", "crash", "corrupt_node", "corrupt_supervisor", "partition", "drop")
#: Longest partition or drop accepted, seconds.
MAX_DURATION = 24 * 3600.0
#: Most junk messages one corrupt_node may send.
MAX_JUNK = 1000
#: Most references in a pool or a partition.
MAX_REFS = 4096
#: How often corrupt_node redraws a state that came out unchanged.
REDRAWS = 8
#: Seconds the answer to a crash request may take to leave before the process is killed.
CRASH_REPLY_GRACE = 1.0
_MARKER_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


class ChaosError(Exception):
    """A request that is refused; `code` is machine-readable, `detail` one line."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class AdminError(RuntimeError):
    """The admin listener cannot be opened; the message is one line for the operator."""


class EventSink(Protocol):
    """The part of the daemon's event writer (`pubsub.telemetry.events.EventWriter`) used here."""

    def emit(self, kind: str, **fields: Any) -> None: ...
    def rotate(self) -> None: ...


class NodeTarget(Protocol):
    """What corrupt_node needs of a node daemon (`pubsub.node.app.NodeApp`)."""

    ref: Ref
    core: Any  # pubsub.skipring.nodecore.NodeCore


class SupervisorTarget(Protocol):
    """What corrupt_supervisor needs of the supervisor (`supervisor.app.SupervisorApp`)."""

    ref: Ref
    core: Any  # supervisor.core.SupervisorCore

    def flush(self) -> None: ...


@dataclass
class Outcome:
    """A successful injection: the reply body, and whether to crash after answering."""

    body: dict[str, Any]
    crash: bool = False


def new_marker_id(action: str) -> str:
    """A marker id unique within any practical run: the action and 48 random bits."""
    return f"{action}-{uuid.uuid4().hex[:12]}"


# --- parameter validation ---------------------------------------------------------------------
class Params:
    """The params of one request, taken one by one; whatever is left over is refused."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = dict(raw)

    def _take(self, name: str) -> Any:
        return self._raw.pop(name, None)

    def done(self) -> None:
        if self._raw:
            raise ChaosError("bad_params", f"unknown parameter(s): {', '.join(sorted(self._raw))}")

    def topic(self) -> Topic | None:
        value = self._take("topic")
        if value is None:
            return None
        try:
            return wire.validate_topic(value)
        except wire.WireError as exc:
            raise ChaosError("bad_params", f"topic: {exc.detail}") from None

    def seed(self) -> int | None:
        value = self._take("seed")
        if value is None:
            return None
        if type(value) is not int:
            raise ChaosError("bad_params", f"seed must be an integer, got {value!r}"[:200])
        return value

    def number(self, name: str, low: float, high: float, *, low_open: bool) -> float:
        value = self._take(name)
        if value is None:
            raise ChaosError("bad_params", f"{name} is required")
        if type(value) not in (int, float) or value != value:  # bools and NaN are not numbers
            raise ChaosError("bad_params", f"{name} must be a number, got {value!r}"[:200])
        if (value <= low if low_open else value < low) or value > high:
            bracket = "(" if low_open else "["
            raise ChaosError(
                "bad_params", f"{name} must be in {bracket}{low:g}, {high:g}], got {value:g}"
            )
        return float(value)

    def count(self, name: str, default: int, high: int) -> int:
        value = self._take(name)
        if value is None:
            return default
        if type(value) is not int or not 0 <= value <= high:
            raise ChaosError(
                "bad_params", f"{name} must be an integer in [0, {high}], got {value!r}"[:200]
            )
        return value

    def refs(self, name: str, *, required: bool) -> list[Ref] | None:
        value = self._take(name)
        if value is None:
            if required:
                raise ChaosError("bad_params", f"{name} is required")
            return None
        if not isinstance(value, list) or not value or len(value) > MAX_REFS:
            raise ChaosError(
                "bad_params", f"{name} must be a list of 1..{MAX_REFS} HOST:PORT references"
            )
        try:
            return sorted({wire.validate_ref(ref) for ref in value})
        except wire.WireError as exc:
            raise ChaosError("bad_params", f"{name}: {exc.detail}") from None

    def marker(self, action: str) -> tuple[str, bool]:
        marker_id = self._take("marker_id")
        record = self._take("record")
        if marker_id is None:
            marker_id = new_marker_id(action)
        elif not isinstance(marker_id, str) or not _MARKER_ID.fullmatch(marker_id):
            raise ChaosError(
                "bad_params", "marker_id must be 1-100 letters, digits, '.', '_', ':' or '-'"
            )
        if record is None:
            record = True
        elif type(record) is not bool:
            raise ChaosError("bad_params", f"record must be true or false, got {record!r}"[:200])
        return marker_id, record

    def targets(self, default: Ref) -> list[Ref]:
        """Whom the marker names: `targets` when given (one injection over several daemons),
        else this daemon."""
        return self.refs("targets", required=False) or [default]


# --- the injections ---------------------------------------------------------------------------
class Chaos:
    """The injections on one daemon: `handle` validates and applies one request.

    `runtime` carries the network faults; `node` or `supervisor` is the daemon whose state
    may be corrupted (the other is None); `events`, when set, receives the markers.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        node: NodeTarget | None = None,
        supervisor: SupervisorTarget | None = None,
        events: EventSink | None = None,
        rng: random.Random | None = None,
        kill: Callable[[], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.ref = runtime.ref
        self.role = (
            "node" if node is not None else "supervisor" if supervisor is not None else "daemon"
        )
        self.node = node
        self.supervisor = supervisor
        self.events = events
        self.rng = rng or random.Random()
        self.counters: Counter[str] = Counter()
        self._kill = kill or _sigkill_self
        self._timers: dict[str, asyncio.TimerHandle] = {}

    # ------------------------------------------------------------------ entry point
    def handle(self, request: ChaosRequest) -> Outcome:
        """Apply one request; ChaosError (nothing applied) if it is refused."""
        action = request.action
        if action not in ACTIONS:
            raise ChaosError(
                "unsupported", f"unknown action {action!r}; one of {', '.join(ACTIONS)}"[:300]
            )
        params = Params(request.params)
        if action == "info":
            params.done()
            return Outcome(self.info())
        outcome = getattr(self, f"_{action}")(params)
        self.counters[action] += 1
        log.warning(
            "%s: chaos %s applied (marker %s)", self.ref, action, outcome.body.get("marker")
        )
        return outcome

    def info(self) -> dict[str, Any]:
        """Who this daemon is and which network faults are in force (seconds left)."""
        now = self.runtime.now()
        faults = self.runtime.faults
        active: dict[str, Any] = {}
        if faults.partition_until > now:
            active["partition"] = {
                "members": sorted(faults.partition),
                "remaining": round(faults.partition_until - now, 3),
            }
        if faults.drop_until > now:
            active["drop"] = {
                "fraction": faults.drop_fraction,
                "remaining": round(faults.drop_until - now, 3),
            }
        return {
            "ok": True,
            "action": "info",
            "ref": self.ref,
            "role": self.role,
            "pid": os.getpid(),
            "faults": active,
            "injections": dict(self.counters),
            "fault_drops": dict(self.runtime.stats.fault_drops),
        }

    # ------------------------------------------------------------------ crash
    def _crash(self, params: Params) -> Outcome:
        marker, record = params.marker("crash")
        targets = params.targets(self.ref)
        params.done()
        written = self._marker(record, marker, "crash", targets, {})
        if self.events is not None:
            try:
                self.events.rotate()  # the marker's file is moved into place before the kill
            except Exception:  # noqa: BLE001 - crash anyway; the failure is counted
                self.runtime.stats.error("event_error")
                log.exception("%s: cannot flush the event stream before the crash", self.ref)
        return Outcome(self._body("crash", marker, written, pid=os.getpid()), crash=True)

    def crash_now(self) -> None:
        """SIGKILL this process (after the answer to a crash request went out)."""
        log.warning("%s: chaos crash: killing pid %d with SIGKILL", self.ref, os.getpid())
        self._kill()

    # ------------------------------------------------------------------ corrupt_node
    def _corrupt_node(self, params: Params) -> Outcome:
        if self.node is None:
            raise ChaosError(
                "unsupported", f"{self.ref} is a {self.role}: corrupt_node needs a node"
            )
        marker, record = params.marker("corrupt_node")
        topic = params.topic()
        seed = params.seed()
        given = params.refs("pool", required=False)
        junk_count = params.count("junk", 3, MAX_JUNK)
        targets = params.targets(self.ref)
        params.done()
        core = self.node.core
        instances = core.instances
        if topic is not None and topic not in instances:
            raise ChaosError("unknown_topic", f"{self.ref} does not run topic {topic!r}")
        topics = [topic] if topic is not None else sorted(instances)
        if not topics:
            raise ChaosError("nothing_to_corrupt", f"{self.ref} runs no topic")
        known: dict[Ref, Label] = {}
        for instance in instances.values():
            for contact in (instance.left, instance.right, instance.ring):
                if contact is not None:
                    known.setdefault(contact.ref, contact.label)
            for label, holder in instance.shortcuts.items():
                if holder is not None:
                    known.setdefault(holder, label)
        pool = [r for r in (given if given is not None else sorted(known)) if r != self.ref]
        rng = random.Random(seed) if seed is not None else self.rng
        n = len(pool) + 1

        def believe(ref: Ref) -> Any:
            return belief(rng, ref, known.get(ref), n)

        for name in topics:
            state = instances[name]
            before = state.status()
            for _ in range(REDRAWS):
                corrupt_instance(state, pool, rng, n, believe)
                if state.status() != before:
                    break
        sends: list[Send] = [
            junk(rng, [*pool, self.ref], rng.choice(topics), n, believe, core.supervisor)
            for _ in range(junk_count)
        ]
        self.runtime.dispatch(sends)
        self._touched()
        written = self._marker(
            record,
            marker,
            "corrupt_node",
            targets,
            {"seed": seed, "pool": pool, "junk": junk_count, "topics": topics},
            topic,
        )
        states = {name: instances[name].status() for name in topics}
        return Outcome(
            self._body("corrupt_node", marker, written, topics=states, pool=pool, junk=len(sends))
        )

    # ------------------------------------------------------------------ corrupt_supervisor
    def _corrupt_supervisor(self, params: Params) -> Outcome:
        if self.supervisor is None:
            raise ChaosError(
                "unsupported",
                f"{self.ref} is a {self.role}: corrupt_supervisor needs the supervisor",
            )
        marker, record = params.marker("corrupt_supervisor")
        topic = params.topic()
        seed = params.seed()
        targets = params.targets(self.ref)
        params.done()
        databases = self.supervisor.core.topics
        if topic is not None and topic not in databases:
            raise ChaosError("unknown_topic", f"the supervisor has no topic {topic!r}")
        members = {
            name: sorted({ref for _, ref in db.members() if ref is not None})
            for name, db in databases.items()
            if topic is None or name == topic
        }
        members = {name: refs for name, refs in members.items() if refs}
        if not members:
            raise ChaosError("nothing_to_corrupt", "no topic with members to corrupt")
        rng = random.Random(seed) if seed is not None else self.rng
        for name, refs in sorted(members.items()):
            corrupt_database(databases[name], refs, rng, len(refs))
        self.supervisor.flush()  # durable like every other change of the database
        written = self._marker(
            record,
            marker,
            "corrupt_supervisor",
            targets,
            {"seed": seed, "topics": sorted(members)},
            topic,
        )
        result = {
            name: {
                "n": len(databases[name]),
                "legitimate_database": databases[name].is_legitimate(),
            }
            for name in sorted(members)
        }
        return Outcome(self._body("corrupt_supervisor", marker, written, topics=result))

    # ------------------------------------------------------------------ network faults
    def _partition(self, params: Params) -> Outcome:
        marker, record = params.marker("partition")
        members = params.refs("members", required=True)
        duration = params.number("duration", 0.0, MAX_DURATION, low_open=True)
        params.done()
        assert members is not None
        if self.ref not in members:
            raise ChaosError("bad_params", f"members must include this daemon, {self.ref}")
        faults = self.runtime.faults
        faults.partition = frozenset(members)
        faults.partition_until = self.runtime.now() + duration
        written = self._marker(
            record, marker, "partition", list(members), {"duration": duration, "members": members}
        )
        self._heal_later("partition", duration, marker, record, list(members))
        return Outcome(self._body("partition", marker, written, members=members, duration=duration))

    def _drop(self, params: Params) -> Outcome:
        marker, record = params.marker("drop")
        fraction = params.number("fraction", 0.0, 1.0, low_open=True)
        duration = params.number("duration", 0.0, MAX_DURATION, low_open=True)
        targets = params.targets(self.ref)
        params.done()
        faults = self.runtime.faults
        faults.drop_fraction = fraction
        faults.drop_until = self.runtime.now() + duration
        written = self._marker(
            record, marker, "drop", targets, {"fraction": fraction, "duration": duration}
        )
        self._heal_later("drop", duration, marker, record, targets)
        return Outcome(self._body("drop", marker, written, fraction=fraction, duration=duration))

    def _heal_later(
        self, action: str, duration: float, marker: str, record: bool, targets: list[Ref]
    ) -> None:
        previous = self._timers.pop(action, None)
        if previous is not None:
            previous.cancel()  # replaced: the new fault's end is the one that counts

        def healed() -> None:
            self._timers.pop(action, None)
            log.warning("%s: chaos %s %s is over", self.ref, action, marker)
            self._marker(record, f"{marker}-heal", "heal", targets, {"after": action, "of": marker})

        loop = asyncio.get_running_loop()
        self._timers[action] = loop.call_later(duration, healed)

    # ------------------------------------------------------------------ helpers
    def _marker(
        self,
        record: bool,
        marker: str,
        action: str,
        targets: list[Ref],
        params: dict[str, Any],
        topic: Topic | None = None,
    ) -> bool:
        """Write one marker event if asked to and an event writer is set; whether it was."""
        if not record or self.events is None:
            return False
        fields: dict[str, Any] = {
            "id": marker, "action": action, "targets": targets, "params": params
        }
        if topic is not None:
            fields["topic"] = topic
        try:
            self.events.emit("marker", **fields)
        except Exception:  # noqa: BLE001 - a broken event stream must not stop the injection
            self.runtime.stats.error("event_error")
            log.exception("%s: cannot write marker %s", self.ref, marker)
            return False
        return True

    def _touched(self) -> None:
        """Tell the node's telemetry observers that its state changed behind their back, so
        the corrupted state is snapshotted before anything repairs it."""
        for observer in list(getattr(self.node, "observers", ())):
            try:
                observer.touched()
            except Exception:  # noqa: BLE001 - telemetry must not stop the injection
                self.runtime.stats.error("telemetry_error")
                log.exception("%s: telemetry failed after corrupt_node", self.ref)

    def _body(self, action: str, marker: str, written: bool, **extra: Any) -> dict[str, Any]:
        return {
            "ok": True,
            "action": action,
            "ref": self.ref,
            "role": self.role,
            "marker": marker,
            "marker_written": written,
            **extra,
        }


def _sigkill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


# --- the admin listener -----------------------------------------------------------------------
class AdminServer:
    """Serves `ChaosRequest`s on the admin address, for one daemon's `Chaos`.

    `start` (call it once the runtime runs) binds the address -- AdminError if it cannot --
    and serves it in a task of the runtime, so stopping the runtime closes it.  Bad input
    (no Hello, an undecodable or truncated frame) is counted in the runtime's Stats as
    ``admin_<code>``, logged rate-limited, answered with ErrorReply, and the connection is
    closed; a well-formed request that is refused only gets its ErrorReply.
    """

    def __init__(self, chaos: Chaos, listen: Ref) -> None:
        self.chaos = chaos
        self.listen = listen
        self.runtime = chaos.runtime
        self._limiter = LogLimiter(log)
        self._sock: socket.socket | None = None

    def start(self) -> None:
        """Bind and listen now; serve in a runtime task."""
        host, port = split_ref(self.listen)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(16)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise AdminError(f"cannot open the admin listener {self.listen}: {reason}") from None
        self._sock = sock
        self.runtime.spawn(self._serve(sock), "admin listener")
        log.info("%s: admin listener on %s", self.chaos.ref, self.listen)

    async def _serve(self, sock: socket.socket) -> None:
        server = await asyncio.start_server(self._connection, sock=sock)
        try:
            await asyncio.Event().wait()  # until the runtime cancels us
        finally:
            server.close()
            sock.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        settings = self.runtime.settings
        peer = writer.get_extra_info("peername")
        source = peer[0] if isinstance(peer, tuple) else str(peer)
        try:
            async with asyncio.timeout(settings.hello_timeout):
                hello = await self._read(reader, writer, source)
            if hello is None:
                return
            if not (isinstance(hello, Hello) and hello.role == "client" and hello.ref is None):
                self._refuse(writer, source, "no_hello", "expected Hello(role=client, ref=None)")
                return
            while True:
                msg = await self._read(reader, writer, source)
                if msg is None:
                    return
                crash = self._answer(writer, msg, source)
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.drain()
                if crash:
                    with contextlib.suppress(Exception):
                        writer.write_eof()
                        async with asyncio.timeout(CRASH_REPLY_GRACE):
                            await reader.read()  # until the operator has read the answer
                    self.chaos.crash_now()
        except TimeoutError:
            self._refuse(writer, source, "no_hello", "no hello within the hello timeout")
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _read(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, source: str
    ) -> Message | None:
        """The next frame's message; None at EOF or after refusing a bad frame."""
        max_frame = self.runtime.settings.max_frame_bytes
        try:
            header = await reader.readexactly(wire.HEADER_SIZE)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                self._refuse(writer, source, "truncated_frame", "connection closed inside a frame")
            return None
        try:
            length = wire.frame_length(header, max_frame)
            payload = await reader.readexactly(length)
            return wire.decode(payload, max_frame)
        except asyncio.IncompleteReadError:
            self._refuse(writer, source, "truncated_frame", "connection closed inside a frame")
        except wire.WireError as exc:
            self._refuse(writer, source, exc.code, exc.detail)
        return None

    def _answer(self, writer: asyncio.StreamWriter, msg: Message, source: str) -> bool:
        """Reply to one request; whether the daemon must crash now."""
        stats = self.runtime.stats
        if not isinstance(msg, ChaosRequest):
            detail = f"the admin listener serves only chaos requests, not {msg.kind}"
            self._send(writer, ErrorReply("unsupported", detail))
            stats.error("admin_unsupported")
            return False
        try:
            outcome = self.chaos.handle(msg)
        except ChaosError as exc:
            stats.error(f"admin_{exc.code}")
            self._send(writer, ErrorReply(exc.code, exc.detail[: wire.MAX_STR_CHARS]))
            return False
        except Exception as exc:  # noqa: BLE001 - the daemon must survive a failed injection
            stats.error("handler_error")
            log.exception("%s: chaos %s failed", self.chaos.ref, msg.action)
            self._send(writer, ErrorReply("handler_error", f"{type(exc).__name__}: {exc}"[:200]))
            return False
        self._send(writer, Reply(body=outcome.body))
        return outcome.crash

    def _send(self, writer: asyncio.StreamWriter, msg: Message) -> None:
        try:
            frame = wire.encode(msg, self.runtime.settings.max_frame_bytes)
        except wire.WireError as exc:
            detail = f"cannot send the {msg.kind} reply: {exc.detail}"[:200]
            frame = wire.encode(ErrorReply(exc.code, detail))
        if not writer.is_closing():
            writer.write(frame)

    def _refuse(self, writer: asyncio.StreamWriter, source: str, code: str, detail: str) -> None:
        self.runtime.stats.error(f"admin_{code}")
        self._limiter.log(
            ("admin", source, code),
            logging.WARNING,
            "%s: admin listener: bad input from %s: %s: %s",
            self.chaos.ref,
            source,
            code,
            detail,
        )
        self._send(writer, ErrorReply(code, detail[: wire.MAX_STR_CHARS]))


def open_admin(
    settings: AdminSettings | None,
    runtime: Runtime,
    *,
    node: NodeTarget | None = None,
    supervisor: SupervisorTarget | None = None,
    events: EventSink | None = None,
) -> AdminServer | None:
    """The daemon's admin listener as `settings` ask (None when it is off); call its `start`
    once the runtime runs."""
    if settings is None or settings.admin_listen is None:
        return None
    chaos = Chaos(runtime, node=node, supervisor=supervisor, events=events)
    return AdminServer(chaos, Ref(settings.admin_listen))


async def admin_request(
    admin: str, action: str, params: Mapping[str, Any] | None = None, timeout: float = 5.0
) -> dict[str, Any]:
    """Send one chaos request to the admin address `admin`; the reply body.

    ChaosError with the daemon's code when it refuses; `pubsub.runtime.net.RequestError` when it
    cannot be reached or does not answer in time.
    """
    from pubsub.runtime.net import request

    reply = await request(admin, ChaosRequest(action=action, params=dict(params or {})), timeout)
    if isinstance(reply, ErrorReply):
        raise ChaosError(reply.code, reply.detail)
    if not isinstance(reply, Reply):
        raise ChaosError("bad_reply", f"{admin} answered with an unexpected {reply.kind!r} message")
    return reply.body


__all__ = [
    "ACTIONS",
    "AdminError",
    "AdminServer",
    "Chaos",
    "ChaosError",
    "Outcome",
    "admin_request",
    "new_marker_id",
    "open_admin",
]
