"""The supervisor daemon: `SupervisorCore` and its durable database on the network runtime.

At start the database in the data directory is loaded into the core.  After every call into
the core (a message, a Timeout, an unreachable peer) the changes the core reports through
``drain_changes()`` are written in one transaction *before* the resulting messages are
handed to the runtime, so a configuration is never sent for a database state that was not
stored.  If a write fails the changes are kept (newest value per (topic, label)) and retried
after the next call; the failure is counted as ``store_error`` and logged.

Clients may ask for status (StatusRequest): the core's status plus the runtime's counters
under "stats".  An operator may change a topic's retention settings (SetRetention) or purge
it (PurgeTopic, stamped with this daemon's wall clock); the settings are written to the
database before the reply and before they go to the members (`pubsub.publications.retention`).
A client may ask for the live supervisor set (SupervisorsRequest: the sharded supervisors of
`pubsub.skipring.supervisor.sharding`, this one alone without peers).  Nothing else is accepted from clients.

Telemetry (`pubsub.supervisor.telemetry`, through the daemon host `pubsub.runtime.host`): the app
counts configuration requests and
SetData sends for the metrics, and tells its observers which topics' databases changed and
when a Timeout ran (``supervisor`` and ``messages`` events, docs/events.md).
"""

from __future__ import annotations

import functools
import logging
import random
import ssl
import time
from collections.abc import Mapping
from typing import Any, Protocol

import uvloop

from pubsub.kernel import registry
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.shards import SupervisorsRequest
from pubsub.publications.retention import PurgeTopic, RetentionTable, SetRetention
from pubsub.runtime.connection import split_ref
from pubsub.runtime.datadir import held_data_dir
from pubsub.runtime.host import Daemon, host
from pubsub.runtime.httpserve import HttpService
from pubsub.runtime.identity import Identity
from pubsub.runtime.net import Runtime
from pubsub.runtime.permissions import DENIED, Authority
from pubsub.runtime.settings import AdminSettings, RuntimeSettings, SettingsError, TelemetrySettings
from pubsub.runtime.stats import Stats
from pubsub.runtime.tls import connect_context
from pubsub.supervisor.settings import SupervisorSettings
from pubsub.supervisor.store import StoreError, SupervisorStore
from pubsub.supervisor.telemetry import supervisor_instrument

log = logging.getLogger(__name__)


class SupervisorCoreLike(Protocol):
    """What the supervisor daemon hosts: a supervisor core of any overlay (the skip ring's
    `pubsub.skipring.supervisor.core.SupervisorCore`, the clique's
    `pubsub.clique.supervisor.CliqueSupervisor`; `Overlay.supervisor_core` builds it).

    Its durable database travels as rows ``(topic, key, ref)``: `load` at start,
    `drain_changes` after every call (None for a removal).  Retention settings are the
    shared layer's `RetentionTable`, which the daemon builds, loads and keeps durable, and
    hands the core at construction (``retention=``, `Overlay.supervisor_core`): the core
    sends the settings with each configuration."""

    @property
    def config_counters(self) -> Mapping[str, int]:
        """Configuration traffic for the metrics, the counts it has of: configuration_requests,
        configurations_sent (configurations handed out), configurations_none (members told
        they are none)."""
        ...

    def handle(self, msg: Message, now: float) -> list[Send]: ...
    def timeout(self, now: float) -> list[Send]: ...
    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]: ...
    def status(self) -> dict[str, object]: ...
    def drain_changes(self) -> list[tuple[str, str, str | None]]: ...
    def load(self, rows: list[tuple[str, str, str]]) -> None: ...
    def member_refs(self, topic: Topic) -> list[Ref]: ...


class SupervisorApp:
    """The `pubsub.runtime.application.Application` of the supervisor daemon."""

    def __init__(
        self, ref: Ref, core: SupervisorCoreLike, store: SupervisorStore, stats: Stats,
        *, retention: RetentionTable, overlay: str = registry.DEFAULT_OVERLAY,
    ) -> None:
        self.ref = ref
        self.core = core
        #: Each topic's retention settings: the table the core was built with (it sends them
        #: with each configuration); this daemon keeps it durable and changes it.
        self.retention = retention
        #: With TLS, who may send what: the overlay's rules (`Overlay.supervisor_admits`).
        self._supervisor_admits = registry.overlay(overlay).supervisor_admits
        #: The overlay this supervisor runs (its status says it: nodes learn it there).
        self.overlay = overlay
        self.store = store
        self.stats = stats
        self._pending: dict[tuple[str, str], str | None] = {}
        #: Timeout actions run so far (the ``interval`` of events).
        self.intervals = 0
        #: Telemetry (`pubsub.telemetry.events.Observer`): told about database changes and Timeouts.
        self.observers: list[Any] = []

    def handle(self, msg: Message, now: float) -> list[Send]:
        return self._persisted(self.core.handle(msg, now))

    def admits(self, msg: Message, identity: Identity) -> str | None:
        """With TLS: why `msg` from the peer holding `identity` is refused, or None
        (the overlay's rules, `Overlay.supervisor_admits`)."""
        return self._supervisor_admits(msg, identity.role, identity.name)

    def refuses(self, msg: Message, identity: Identity | None, authority: Authority) -> Message | None:
        """With TLS: changing a topic's retention or purging it is an admin action
        (`pubsub.runtime.permissions`); everything else a client may ask is a status."""
        if not isinstance(msg, (SetRetention, PurgeTopic)):
            return None
        problem = authority.check(identity, "admin")
        return None if problem is None else ErrorReply(code=DENIED, detail=problem)

    def timeout(self, now: float) -> list[Send]:
        self.intervals += 1
        sends = self._persisted(self.core.timeout(now))
        self._notify("ticked")
        return sends

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        return self._persisted(self.core.peer_unreachable(ref, now))

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        if isinstance(msg, StatusRequest):
            body = dict(self.core.status())
            body["overlay"] = self.overlay  # nodes learn it at start (`pubsub.node.overlaycheck`)
            body["stats"] = self.stats.snapshot()
            body["unsaved_changes"] = len(self._pending)
            return Reply(body=body), []
        if isinstance(msg, (SetRetention, PurgeTopic)):
            return self._retention(msg)
        if isinstance(msg, SupervisorsRequest):
            live = getattr(self.core, "live", None)
            body = {"live": live() if callable(live) else [self.ref], "overlay": self.overlay}
            return Reply(body=body), []
        return ErrorReply(
            code="unsupported", detail=f"the supervisor does not accept {msg.kind!r} from clients"
        ), []

    def _retention(self, msg: SetRetention | PurgeTopic) -> tuple[Message, list[Send]]:
        """Change a topic's retention settings or purge it: stored first, then sent to the
        topic's members (this daemon's `RetentionTable`, which the core also sends with each
        configuration; `RetentionTable.announce`).  Settings are kept for members that join
        later, also when the topic has none yet; a purge of a topic without members is refused
        (`no_members`) and changes nothing: it would remove nothing now, only, later, whatever
        a rejoining node brings back -- most likely a mistyped topic."""
        core, table = self.core, self.retention
        if isinstance(msg, PurgeTopic) and not core.member_refs(msg.topic):
            detail = (
                f"no member holds {msg.topic}: nothing purged (a purge reaches the topic's members; "
                "none has joined it, or all have left)"
            )
            return ErrorReply(code="no_members", detail=detail), []
        before = table.get(msg.topic)
        wall_ms = int(time.time() * 1000)
        try:
            if isinstance(msg, PurgeTopic):
                table.purge(msg.topic, wall_ms)
            else:
                table.set(msg.topic, msg.max_age_ms, msg.max_count, msg.max_bytes, wall_ms)
        except ValueError as exc:
            return ErrorReply(code="bad_retention", detail=str(exc)[:200]), []
        try:
            self.store.save_retention(
                (topic, p.max_age_ms, p.max_count, p.max_bytes, p.purged_ms)
                for topic, p in table.drain_changes()
            )
        except StoreError as exc:  # nothing changes: the settings in force stay, nothing is sent
            table.restore(msg.topic, before)
            self.stats.error("store_error")
            log.error("%s", exc)
            return ErrorReply(code="store_error", detail=str(exc)[:200]), []
        sends = table.announce(msg.topic, core.member_refs(msg.topic))
        policy = table.get(msg.topic)
        assert policy is not None  # set and purge always leave the topic a policy (RetentionTable._put)
        members = len({s.dest for s in sends})
        action = "purge" if isinstance(msg, PurgeTopic) else "retention"
        body = {"ok": True, "action": action, "topic": msg.topic, "retention": policy.as_dict(), "members": members}
        return Reply(body=body), sends

    def flush(self) -> None:
        """Write every change the core has reported and not yet stored."""
        changes = self.core.drain_changes()
        for topic, label, ref in changes:
            self._pending[(topic, label)] = ref
        if changes:
            self._notify("changed", {topic for topic, _, _ in changes})
        if not self._pending:
            return
        try:
            self.store.apply((topic, label, ref) for (topic, label), ref in self._pending.items())
        except StoreError as exc:
            self.stats.error("store_error")
            log.error("%s (%d changes kept for the next attempt)", exc, len(self._pending))
            return
        self._pending.clear()

    def _persisted(self, sends: list[Send]) -> list[Send]:
        self.flush()
        return sends

    def _notify(self, event: str, *args: Any) -> None:
        """Tell every observer (telemetry); a failing observer is counted, never fatal."""
        for observer in self.observers:
            try:
                getattr(observer, event)(*args)
            except Exception:  # noqa: BLE001 - telemetry must not stop the supervisor
                self.stats.error("telemetry_error")
                log.exception("%s: telemetry %s failed", self.ref, event)


async def serve_supervisor(
    listen: Ref,
    runtime_settings: RuntimeSettings,
    settings: SupervisorSettings,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
) -> None:
    """Run a supervisor on `listen` until SIGTERM/SIGINT (with `admin`, also its admin
    listener for `pubsub chaos`; AdminError if it cannot be opened; with
    `settings.web_listen`, also its web view: HttpError if it cannot be opened).

    Raises StoreError when the database cannot be opened or another process holds the data
    directory (`pubsub.runtime.datadir.held_data_dir`), MetricsError / EventsError when
    the metrics endpoint or the events directory (`telemetry`) is unusable, and OSError
    when `listen` cannot be bound.
    """
    with held_data_dir(settings.data_dir, StoreError):
        await _serve_supervisor(listen, runtime_settings, settings, telemetry, admin)


async def _serve_supervisor(
    listen: Ref,
    runtime_settings: RuntimeSettings,
    settings: SupervisorSettings,
    telemetry: TelemetrySettings | None,
    admin: AdminSettings | None,
) -> None:
    overlay = registry.overlay(settings.overlay)
    store = SupervisorStore(settings.data_dir, overlay.member_key)
    try:
        peers = [p for p in settings.peer_refs() if p != listen]
        retention = RetentionTable()
        retention.load(store.load_retention())
        try:
            core = overlay.supervisor_core(
                listen, config_budget=settings.config_budget, rng=random.Random(),
                peers=peers, peer_timeout=settings.peer_timeout, retention=retention,
                **settings.overlay_options(),
            )
        except ValueError as exc:  # the overlay refuses a setting (e.g. peers: one supervisor)
            raise SettingsError(f"invalid configuration: {exc}") from None
        rows = store.load()
        core.load(rows)
        log.info("%s: %s overlay, loaded %d members from %s", listen, overlay.name, len(rows), store.path)
        if peers:
            log.info("%s: sharded supervisors, peers %s", listen, ", ".join(peers))
        stats = Stats()
        app = SupervisorApp(listen, core, store, stats, retention=retention, overlay=overlay.name)
        daemon = Daemon(
            role="supervisor",
            app=app,
            runtime=Runtime(app, runtime_settings, stats=stats, role="supervisor"),
            instrument=supervisor_instrument(app, stats, overlay.kinds()),
            actions=overlay.supervisor_faults(app),
            on_stop=app.flush,
            services=web_view(listen, core, settings, connect_context(runtime_settings)),
        )
        await host(daemon, telemetry, admin)
    finally:
        store.close()


def web_view(
    listen: Ref, core: SupervisorCoreLike, settings: SupervisorSettings, context: ssl.SSLContext | None
) -> list[HttpService]:
    """The web view's listener (`pubsub.supervisor.webview`) if `settings.web_listen` asks for it;
    it asks the nodes with the supervisor's TLS `context` (None: plain TCP)."""
    if settings.web_listen is None:
        return []
    from pubsub.supervisor.webview import RingWatch, application, ask_status  # aiohttp: only when served

    host_name, port = split_ref(settings.web_listen)
    watch = RingWatch(
        listen, core.status, functools.partial(ask_status, context=context),
        web_topic=registry.overlay(settings.overlay).web_topic,
    )
    return [HttpService("web view", application(watch), host_name, port)]


def run_supervisor(
    listen: Ref,
    runtime_settings: RuntimeSettings,
    settings: SupervisorSettings,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
) -> None:
    """`serve_supervisor` on a fresh uvloop event loop."""
    uvloop.run(serve_supervisor(listen, runtime_settings, settings, telemetry, admin))


__all__ = ["SupervisorApp", "StoreError", "run_supervisor", "serve_supervisor"]
