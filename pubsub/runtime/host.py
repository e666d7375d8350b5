"""One host for every daemon: the same telemetry, admin listener and graceful stop.

A daemon (`pubsub.node.app`, `pubsub.supervisor.app`, `broker.app`) builds its application and
runtime, then hands them to `host` with what is its own:

* `Instruments`, made by an `Instrument` function once the host knows the topic-label
  cap and whether there is an event stream: the daemon's Prometheus collectors (beside the
  runtime's own `RuntimeCollector`, which every daemon gets), its telemetry observers
  (added to ``app.observers``; the event stream's observers among them) and the message
  kinds it speaks (the runtime's message counters report each from the start);
* its admin actions beyond the generic info / crash / partition / drop
  (`pubsub.runtime.admin.Chaos`);
* the sends to dispatch once serving starts, and what to do at a graceful stop (e.g. the
  last group commit).

The host opens the Prometheus endpoint (`TelemetrySettings.metrics_port`), the event stream
(`TelemetrySettings.events_dir`, docs/events.md) and the admin listener
(`AdminSettings.admin_listen`), serves until SIGTERM / SIGINT, and closes everything in
order: the daemon's stop action, then the observers (the last event file is moved into
place), then the endpoint.  Every daemon thus takes the same ``--metrics-port``,
``--events-dir`` and ``--admin-listen`` settings with the same errors (MetricsError,
EventsError, AdminError: one line each).

Garbage collection.  A daemon allocates many small objects that never form cycles
(publications, trie nodes, messages); with CPython's default thresholds the cyclic
collector runs every 700 allocations and rescans them, which cost about a tenth of a node's
CPU per publication (measured with callgrind on the relay path).  Before serving, the host
freezes what start-up built (the restored tries among it: `gc.freeze`) and raises the
first generation's threshold (`GC_THRESHOLDS`); cycles are still collected, less often.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry

from pubsub.kernel.message import Send
from pubsub.runtime.admin import Action
from pubsub.runtime.adminserver import open_admin
from pubsub.runtime.httpserve import HttpService
from pubsub.runtime.net import Runtime
from pubsub.runtime.settings import AdminSettings, TelemetrySettings
from pubsub.runtime.stats import ADMIN_ERROR_CODES
from pubsub.telemetry.events import EventWriter, Observer
from pubsub.telemetry.metrics import (
    MetricsError,
    MetricsServer,
    RuntimeCollector,
    TopicLabels,
    registry_for,
)

log = logging.getLogger(__name__)

#: Collector thresholds of the daemons (see the module docstring; CPython's are 700, 10, 10).
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """Freeze what exists now and collect less often (see the module docstring)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class Instruments(NamedTuple):
    """A daemon's own metric collectors and telemetry observers."""

    collectors: list[Any]
    observers: list[Observer]
    #: The message kinds the daemon speaks (its mode's): the runtime's message and byte
    #: counters report each from the first scrape, 0 until counted.
    kinds: Sequence[str] = ()


#: Makes a daemon's `Instruments`: (topic labels, the event writer or None, settings).
Instrument = Callable[[TopicLabels, EventWriter | None, TelemetrySettings], Instruments]


def no_instruments(topics: TopicLabels, events: EventWriter | None, settings: TelemetrySettings) -> Instruments:
    """For a daemon with nothing of its own to measure."""
    return Instruments([], [])


class Telemetry:
    """The metrics endpoint and the event stream of one daemon, as `settings` ask.

    ``await Telemetry.start(role, app, stats, settings, instrument)`` adds the daemon's
    observers to ``app.observers`` and starts the endpoint; ``await telemetry.stop()``
    closes the event stream (the last file is moved into place) and the endpoint.
    """

    def __init__(self) -> None:
        self.server: MetricsServer | None = None
        self.collector: RuntimeCollector | None = None
        self.registry: CollectorRegistry | None = None
        self.events: EventWriter | None = None
        self.observers: list[Observer] = []

    @classmethod
    async def start(
        cls, role: str, app: Any, stats: Any, settings: TelemetrySettings, instrument: Instrument
    ) -> Telemetry:
        """MetricsError / EventsError (one line) when the endpoint or run dir is unusable."""
        self = cls()
        runtime = RuntimeCollector(stats, role, app.ref, app)
        if settings.events_dir is not None:
            self.events = EventWriter(
                settings.events_dir,
                role,
                app.ref,
                rotate_seconds=settings.events_rotate_seconds,
                rotate_bytes=settings.events_rotate_bytes,
                retain_files=settings.events_retain_files,
                retain_seconds=settings.events_retain_seconds,
            )
            runtime.events = self.events
        own = instrument(TopicLabels(settings.metrics_max_topics), self.events, settings)
        runtime.kinds = tuple(own.kinds)
        self.collector = runtime
        self.observers.extend(own.observers)
        if settings.metrics_port:
            self.registry = registry_for(runtime, *own.collectors)
            self.server = MetricsServer(self.registry, settings.metrics_host, settings.metrics_port)
            try:
                await self.server.start()
            except MetricsError:
                if self.events is not None:
                    self.events.close()
                raise
        observers: list[Observer] = getattr(app, "observers", [])
        observers.extend(self.observers)
        return self

    async def stop(self) -> None:
        for observer in self.observers:
            try:
                observer.close()
            except Exception:  # noqa: BLE001 - stopping must go on
                log.exception("closing telemetry failed")
        if self.server is not None:
            await self.server.stop()


@dataclass
class Daemon:
    """What a daemon hands the host (see the module docstring)."""

    role: str
    app: Any
    runtime: Runtime
    instrument: Instrument = no_instruments
    actions: Mapping[str, Action] = field(default_factory=dict)
    initial: list[Send] = field(default_factory=list)
    on_stop: Callable[[], None] | None = None
    #: Further listeners (HTTP API, web view), started with the runtime, stopped before it.
    services: list[HttpService] = field(default_factory=list)
    #: Whether the host tunes the process's garbage collector (`tune_gc`) once serving: a
    #: daemon owns its process; a node inside an application's process may not.
    tune_gc: bool = True


async def host(
    daemon: Daemon,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
    *,
    until: asyncio.Event | None = None,
    on_serving: Callable[[], None] | None = None,
) -> None:
    """Serve `daemon` until SIGTERM / SIGINT (or, given `until`, until that is set: a node
    inside an application's process, `pubsub.client.embedded`) with its telemetry and admin
    listener, then stop it gracefully; `on_serving` is called once it serves.
    MetricsError, EventsError or AdminError when one cannot open; OSError when the daemon's
    own address cannot be bound."""
    runtime = daemon.runtime
    extras = await Telemetry.start(
        daemon.role, daemon.app, runtime.stats, telemetry or TelemetrySettings(), daemon.instrument
    )
    try:
        admin_server = open_admin(
            admin, runtime, role=daemon.role, actions=daemon.actions, events=extras.events
        )
        if admin_server is not None and extras.collector is not None:  # its codes too, from the start
            extras.collector.error_codes += ADMIN_ERROR_CODES

        def started() -> None:
            if daemon.tune_gc:
                tune_gc()
            if daemon.initial:
                runtime.dispatch(daemon.initial)
            if admin_server is not None:
                admin_server.start()
            if on_serving is not None:
                on_serving()

        for service in daemon.services:
            await service.start()
        if until is None:
            await runtime.serve_until_signal(on_start=started)
        else:
            await runtime.serve_until(until, on_start=started)
        if daemon.on_stop is not None:
            daemon.on_stop()
    finally:
        for service in daemon.services:
            await service.stop()
        await extras.stop()
