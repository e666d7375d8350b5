"""Fault injection on running daemons: the admin listener and the injections (`pubsub chaos`).

Who may inject.  Only an operator who knows a daemon's *admin address*.  Every daemon can
open a second listener (``--admin-listen HOST:PORT``, ``PUBSUB_ADMIN_LISTEN``; off by
default; a host that is not loopback is refused unless ``--admin-allow-remote`` is given,
`pubsub.runtime.settings.AdminSettings`).  `ChaosRequest` frames are served there and nowhere else:
on the peer/client port the runtime counts them as ``forbidden`` errors, answers with an
ErrorReply and never passes them on (`pubsub.runtime.inbound`).  Nothing else is served on the admin
listener, so it exposes no more than the injections below.  The protocol is the client one
of `pubsub.runtime.client.request`: ``Hello(ref=None, role="client")``, then requests, each answered
by one Reply (body: what was done) or ErrorReply (code and a one-line reason).

The injections (`ChaosRequest.action`; every request is validated first and a bad one is
refused with code ``bad_params``, ``unsupported``, ``unknown_topic`` or
``nothing_to_corrupt``, never half applied):

``info``
    who this is: reference, role, pid, the faults in force (no marker).
``crash``
    write the marker, close the event stream (the file moves into place, so the marker
    survives; nothing this process does afterwards is written, so no event of a crashed
    daemon is later than its crash marker), answer, then SIGKILL this process: a real
    crash, nothing else is cleaned up, closed or flushed.  When several daemons crash under
    one marker, the last one asked writes it (`pubsub chaos crash`, `pubsub experiment`).
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
(`pubsub.sim.scenarios.corrupted_start`); the network faults are `pubsub.runtime.faults.NetworkFaults`
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
import logging
import os
import random
import signal
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pubsub.kernel.control import ChaosRequest, ErrorReply, Reply
from pubsub.kernel.message import Ref, Topic
from pubsub.runtime.adminparams import MAX_DURATION, ChaosError, Params
from pubsub.runtime.net import Runtime

log = logging.getLogger(__name__)

#: The actions every daemon offers; a daemon adds its own (`Chaos`, ``actions``).
GENERIC_ACTIONS = ("info", "crash", "partition", "drop")
class EventSink(Protocol):
    """The part of the daemon's event writer (`pubsub.telemetry.events.EventWriter`) used here."""

    def emit(self, kind: str, **fields: Any) -> None: ...
    def close(self) -> None: ...


@dataclass
class Outcome:
    """A successful injection: the reply body, and whether to crash after answering."""

    body: dict[str, Any]
    crash: bool = False


# --- the injections ---------------------------------------------------------------------------
#: A daemon's own injection: validate the params (ChaosError if refused), apply, answer.
Action = Callable[["Chaos", Params], Outcome]


class Chaos:
    """The injections on one daemon: `handle` validates and applies one request.

    `runtime` carries the network faults; `role` names the daemon in answers ("node",
    "supervisor", "broker"); `actions` are the daemon's own injections beside the generic
    ones (e.g. the node's corrupt_node, `pubsub.node.faults`); `events`, when set, receives
    the markers.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        role: str = "daemon",
        actions: Mapping[str, Action] | None = None,
        events: EventSink | None = None,
        rng: random.Random | None = None,
        kill: Callable[[], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.ref = runtime.ref
        self.role = role
        self.actions: dict[str, Action] = dict(actions or {})
        clash = set(self.actions) & set(GENERIC_ACTIONS)
        if clash:
            raise ValueError(f"daemon actions {sorted(clash)} would hide the generic ones")
        self.events = events
        self.rng = rng or random.Random()
        self.counters: Counter[str] = Counter()
        self._kill = kill or _sigkill_self
        self._timers: dict[str, asyncio.TimerHandle] = {}

    # ------------------------------------------------------------------ entry point
    def handle(self, request: ChaosRequest) -> Outcome:
        """Apply one request; ChaosError (nothing applied) if it is refused."""
        action = request.action
        offered = (*GENERIC_ACTIONS, *sorted(self.actions))
        if action not in offered:
            raise ChaosError(
                "unsupported",
                f"this {self.role} offers no action {action!r}; one of {', '.join(offered)}"[:300],
            )
        params = Params(request.params)
        if action == "info":
            params.done()
            return Outcome(self.info())
        own = self.actions.get(action)
        outcome = own(self, params) if own is not None else getattr(self, f"_{action}")(params)
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
        written = self.marker(record, marker, "crash", targets, {})
        if self.events is not None:
            try:
                self.events.close()  # the marker's file moves into place; later events drop
            except Exception:  # noqa: BLE001 - crash anyway; the failure is counted
                self.runtime.stats.error("event_error")
                log.exception("%s: cannot flush the event stream before the crash", self.ref)
        return Outcome(self.body("crash", marker, written, pid=os.getpid()), crash=True)

    def crash_now(self) -> None:
        """SIGKILL this process (after the answer to a crash request went out)."""
        log.warning("%s: chaos crash: killing pid %d with SIGKILL", self.ref, os.getpid())
        self._kill()

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
        written = self.marker(
            record, marker, "partition", list(members), {"duration": duration, "members": members}
        )
        self._heal_later("partition", duration, marker, record, list(members))
        return Outcome(self.body("partition", marker, written, members=members, duration=duration))

    def _drop(self, params: Params) -> Outcome:
        marker, record = params.marker("drop")
        fraction = params.number("fraction", 0.0, 1.0, low_open=True)
        duration = params.number("duration", 0.0, MAX_DURATION, low_open=True)
        targets = params.targets(self.ref)
        params.done()
        faults = self.runtime.faults
        faults.drop_fraction = fraction
        faults.drop_until = self.runtime.now() + duration
        written = self.marker(
            record, marker, "drop", targets, {"fraction": fraction, "duration": duration}
        )
        self._heal_later("drop", duration, marker, record, targets)
        return Outcome(self.body("drop", marker, written, fraction=fraction, duration=duration))

    def _heal_later(
        self, action: str, duration: float, marker: str, record: bool, targets: list[Ref]
    ) -> None:
        previous = self._timers.pop(action, None)
        if previous is not None:
            previous.cancel()  # replaced: the new fault's end is the one that counts

        def healed() -> None:
            self._timers.pop(action, None)
            log.warning("%s: chaos %s %s is over", self.ref, action, marker)
            self.marker(record, f"{marker}-heal", "heal", targets, {"after": action, "of": marker})

        loop = asyncio.get_running_loop()
        self._timers[action] = loop.call_later(duration, healed)

    # ------------------------------------------------------------------ helpers
    def marker(
        self,
        record: bool,
        marker: str,
        action: str,
        targets: list[Ref],
        params: dict[str, Any],
        topic: Topic | None = None,
    ) -> bool:
        """Write one marker event if asked to and an event writer is set; whether it was
        (for the daemons' own actions too)."""
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

    def body(self, action: str, marker: str, written: bool, **extra: Any) -> dict[str, Any]:
        """The reply body of an applied injection."""
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


async def admin_request(
    admin: str, action: str, params: Mapping[str, Any] | None = None, timeout: float = 5.0
) -> dict[str, Any]:
    """Send one chaos request to the admin address `admin`; the reply body.

    ChaosError with the daemon's code when it refuses; `pubsub.runtime.client.RequestError` when it
    cannot be reached or does not answer in time.
    """
    from pubsub.runtime.client import request

    reply = await request(admin, ChaosRequest(action=action, params=dict(params or {})), timeout)
    if isinstance(reply, ErrorReply):
        raise ChaosError(reply.code, reply.detail)
    if not isinstance(reply, Reply):
        raise ChaosError("bad_reply", f"{admin} answered with an unexpected {reply.kind!r} message")
    return reply.body


