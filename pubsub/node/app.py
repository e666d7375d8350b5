"""The subscriber daemon: a node core (`pubsub.publications.node.PublicationNode` over the
overlay `--overlay` names) on the network runtime, with a durable publication store.

Clients talk to it with control requests:

* JoinTopic -> ``core.join`` (and the topic's trie is refilled from the store), LeaveTopic
  -> ``core.leave``, StatusRequest -> the core's status, the publication section described
  in the README and the runtime's counters under "stats" (`pubsub.node.status`);
* PublishRequest -> answered later with PublishAck or PublishFailed (below);
* Follow -> a stream of Delivery frames (`pubsub.node.delivery`).

Topics.  With a data directory the node keeps the topics it should be subscribed to
(``core.wanted_topics``) in ``<data>/topics.json``, rewritten atomically (temporary file,
fsync, rename) whenever the set changes, and joins them again when it starts.  BuildSR
state is soft: the supervisor and the neighbours rebuild it (self-stabilization).

Publications are not soft.  Every publication the core stores (issued here, handed over,
spread, flooded or repaired by anti-entropy) is written to the store (`pubsub.node.store`,
SQLite in ``<data>/publications.sqlite3``, or in memory without a data directory) before
it counts as delivered: the core hands what it stored out as the rows of a `Persist`, which
the group commit writes on the store's own thread (`pubsub.node.commits`,
`pubsub.node.writer`), so a commit and its fsync never stall the event loop; only then are
they numbered for clients, streamed to followers (from memory, `pubsub.node.delivery`),
acknowledged to publishers and -- for publications issued or handed over here -- spread,
all those of the commits one loop pass released at once (`Batched`: one Spread per
neighbour for the whole batch).  At start every stored topic's trie is rebuilt from the
store.

Telemetry (`pubsub.node.telemetry`, through the daemon host `pubsub.runtime.host`): observers
in ``observers`` hear about
every state change (``touched``), every Timeout (``ticked``) and every commit (``stored``,
the rows written); they emit the event stream and count deliveries for the metrics.  A
publication issued here is stamped with the wall clock (``published_ms``) when accepted.

Sequence numbers.  The core numbers the publications this node issues, below a reservation
the store keeps; before it accepts a publication the node makes sure the next number is
reserved, a block at a time (`pubsub.node.sequence`), so that a restarted node never issues
a (publisher, seq) pair twice.

Publishing.  The core decides (`PublicationNode.publish_request`, hand-overs in
`pubsub.publications.handover`) and states the order as effects (`pubsub.kernel.effects`),
which the one executor (`pubsub.kernel.executor`) carries out against the group commit:
a `Persist`'s rows join the next commit, and what waits for it runs afterwards (the core
hears `Committed` with the store's local numbers and answers; then the acknowledgements
leave, then the spreads); `Answer`s go to the client connection they name, all of a
client's answers of one loop pass in one write (this app is the executor's outlet); and
`Batched` items come back to the core as one `Batch` per topic (the arc broadcast of a
commit's publications: the arcs computed once, one Spread per neighbour).

Serving.  `serve_node` (and `run_node`, on a fresh event loop: the mode registry's
``node`` daemon) builds the node from its settings -- the overlay's core, the store,
`NodeApp`, signing with TLS, the HTTP API -- and hosts it (`pubsub.runtime.host`), as
`pubsub.supervisor.app` and `broker.app` do their daemons.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import uvloop

from pubsub.kernel import registry
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.effects import Effect
from pubsub.kernel.executor import Executor, Timer
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.node import quotas
from pubsub.node.commits import GroupCommit
from pubsub.node.delivery import Deliveries
from pubsub.node.overlaycheck import agreed_overlay
from pubsub.node.permits import refusal as client_refusal
from pubsub.node.retention import RetentionKeeper
from pubsub.node.rowcodec import Stored
from pubsub.node.sequence import SequenceBlocks
from pubsub.node.settings import FRAME_OVERHEAD, HOLD_MIN_BATCH, NodeSettings, check_node_limits, dissemination_of
from pubsub.node.status import node_status
from pubsub.node.store import NewRow, PublicationStore, StoreError
from pubsub.node.telemetry import node_instrument
from pubsub.node.topicfile import TopicFile, TopicFileError
from pubsub.node.writer import StoreThread
from pubsub.publications.fields import MAX_PUBLICATIONS
from pubsub.publications.hosted import HostedNode
from pubsub.publications.messages import Follow, JoinTopic, LeaveTopic, PublishAck, PublishFailed, PublishRequest
from pubsub.publications.topicstate import DEFAULT_BATCH_BYTES
from pubsub.runtime.connection import ClientSession
from pubsub.runtime.datadir import held_data_dir
from pubsub.runtime.host import Daemon, host
from pubsub.runtime.httpserve import HttpService
from pubsub.runtime.identity import Identity
from pubsub.runtime.net import Runtime
from pubsub.runtime.permissions import Authority
from pubsub.runtime.settings import AdminSettings, RuntimeSettings, TelemetrySettings
from pubsub.runtime.stats import LogLimiter, Stats
from pubsub.runtime.tls import server_context

if TYPE_CHECKING:
    from pubsub.node.signing import Signing

log = logging.getLogger(__name__)

#: Seconds between moving the journal's commits into SQLite (`NodeApp.settle`: one
#: transaction, cheaper per row the more rows it carries; the store also settles on its own
#: once `pubsub.node.store.SETTLE_ROWS` rows wait) and checkpoints of SQLite's log under
#: sync "normal", which follow the settle.
CHECKPOINT_EVERY = 1.0
#: A node never holds its arc broadcasts back (`Executor.hold`) while a Spread's
#: worth waits.
HOLD_MAX_ITEMS = MAX_PUBLICATIONS


class _LoopClock:
    """The executor's clock (`pubsub.kernel.executor.Clock`) on the running event loop;
    without one (a test driving the app by hand) what is for "soon" runs at once and
    nothing is held back."""

    def now(self) -> float:
        return time.monotonic()

    def soon(self, action: Callable[[], None]) -> None:
        try:
            asyncio.get_running_loop().call_soon(action)
        except RuntimeError:
            action()

    def later(self, delay: float, action: Callable[[], None]) -> Timer | None:
        try:
            return asyncio.get_running_loop().call_later(delay, action)
        except RuntimeError:
            return None


class NodeApp:
    """The `pubsub.runtime.application.Application` of the subscriber daemon."""

    def __init__(
        self,
        ref: Ref,
        core: HostedNode,
        stats: Stats,
        topic_file: TopicFile | None = None,
        *,
        store: PublicationStore | None = None,
        linger: float = 0.0,
        spread_hold: float = 0.0,
        overlay: str = registry.DEFAULT_OVERLAY,
    ) -> None:
        self.ref = ref
        self.core = core
        #: With TLS, who may send what: the overlay's rules (`Overlay.node_admits`).
        self._node_admits = registry.overlay(overlay).node_admits
        self.stats = stats
        self.topic_file = topic_file
        self.store = store if store is not None else PublicationStore(None)
        #: The store's own thread: every SQLite call of the node runs there.
        self.thread = StoreThread(f"store {ref}")
        self.deliveries = Deliveries(self.store, reads=self.thread)
        #: Commits run on the event loop unless they may wait for the disk (sync "full"); there
        #: a commit is one write to the store's journal, settled into SQLite about once a
        #: second (`settle`, `CHECKPOINT_EVERY`; `pubsub.node.journal`).
        inline = not self.store.durable or self.store.sync == "normal"
        if inline:
            self.store.defer_writes()
        self.commits = GroupCommit(
            self.store,
            self.thread,
            on_written=self._written,
            on_error=self._store_error,
            on_unwritten=self._unwritten,
            linger=linger,
            inline=inline,
        )
        self.core.attach_store(self.store.durable, self.store.seq_reserved)
        #: Retention's removals carried to the store and the streams (`pubsub.node.retention`).
        self.retention = RetentionKeeper(
            self.core, self.store, self.thread, self.commits, self.deliveries.pruned, self._store_error
        )
        self.deliveries.removed_through = self.retention.records.removed_local
        self.deliveries.runs = self.core.is_member
        self._now = time.monotonic()  # the clock of the last call into the app
        self._refill_message_ids()
        self._checkpointing: concurrent.futures.Future[None] | None = None
        self._settled_at = 0.0
        self._checkpointed: tuple[int, int] = (0, 0)  # (store.commits, store.settles) at the last checkpoint
        self.runtime: Runtime | None = None
        self.counters: Counter[str] = Counter()
        self._saved: set[Topic] | None = None
        #: The core's effects carried out (`pubsub.kernel.executor`): against the group
        #: commit, on the event loop, answers and sends leaving through this app.  `Batched`
        #: items may be held back under load for up to `spread_hold` seconds: their
        #: publications are stored and acknowledged already; the wait lets one arc
        #: broadcast carry more of them, so that every node down the tree handles fewer,
        #: larger batches (never while a Spread's worth waits).
        self.executor = Executor(
            self.core, self.commits, _LoopClock(), self, hold=spread_hold,
            hold_min=HOLD_MIN_BATCH, hold_max=HOLD_MAX_ITEMS,
        )
        self._replies: dict[int, list[Message]] = {}  # answers per client, one write each
        self._sessions: dict[int, ClientSession] = {}  # client token -> its connection
        self._tokens: dict[int, int] = {}  # id of a live session -> its token
        self._next_client = 0
        self._limiter = LogLimiter(log)
        #: The durable blocks of the sequence numbers this node issues (`pubsub.node.sequence`).
        self.sequence = SequenceBlocks(ref, self.store, self.thread, inline=inline)
        #: Timeout actions run so far (the ``interval`` of events).
        self.intervals = 0
        #: Telemetry (`pubsub.telemetry.events.Observer`): told about state changes, Timeouts, commits.
        self.observers: list[Any] = []
        #: With TLS: signed publications (`pubsub.node.signing`; `enable_signing`).
        self.signing: Signing | None = None
        self._sender: Ref | None = None  # the peer of the message being handled (TLS)

    def attach(self, runtime: Runtime) -> None:
        """Called by the runtime when it starts: where later answers and sends go."""
        self.runtime = runtime

    # ------------------------------------------------------------------ topics
    def rejoin(self) -> list[Send]:
        """Join every stored topic again (call once, before the runtime starts serving)."""
        if self.topic_file is None:
            return []
        topics = self.topic_file.load()
        self._saved = set(topics)
        sends: list[Send] = []
        for topic in sorted(topics):
            sends.extend(self.join(topic))
        if topics:
            log.info("%s: rejoining %d stored topics", self.ref, len(topics))
        return sends

    def join(self, topic: Topic) -> list[Send]:
        """`core.join`; a topic whose trie is new is refilled from the store."""
        fresh = not self.core.has_publication_core(topic)
        sends = self.core.join(topic)
        if fresh and self.store.latest(topic):
            stored = self.thread.call(lambda: list(self.store.publications(topic)))
            restored = self.core.restore(topic, stored)
            log.info("%s: %s: %d publications restored from the store", self.ref, topic, restored)
        return sends

    # ------------------------------------------------------------------ the protocol
    def handle(self, msg: Message, now: float) -> list[Send]:
        self._now = now
        self._notify("touched")
        if self.signing is None:
            return self._execute(self.core.handle(msg, now))
        sender, self._sender = self._sender, None
        checked, sends = self.signing.incoming(msg, sender, now)
        if checked is not None:
            sends.extend(self._execute(self.core.handle(checked, now)))
        return self._out(sends)

    def enable_signing(self, signing: Signing) -> None:
        """Sign what this node issues, check what it receives (`pubsub.node.signing`)."""
        self.signing = signing
        self.commits.before_write = signing.sign_rows

    def _out(self, sends: list[Send]) -> list[Send]:
        """Sends about to leave: with signing, completed by `Signing.outgoing`."""
        return sends if self.signing is None else self.signing.outgoing(sends)

    def admits(self, msg: Message, identity: Identity) -> str | None:
        """With TLS: why `msg` from the peer holding `identity` is refused, or None
        (the overlay's rules, `Overlay.node_admits`)."""
        supervisor = self.core.admitted_supervisor(msg, identity.name)  # the topic's owner
        problem = self._node_admits(msg, identity.role, identity.name, supervisor)
        self._sender = Ref(identity.name) if problem is None else None  # `handle` follows at once
        return problem

    def refuses(self, msg: Message, identity: Identity | None, authority: Authority) -> Message | None:
        """With TLS: the refusal of a client request the rules do not allow, or None
        (`pubsub.node.permits`)."""
        return client_refusal(msg, identity, authority)

    def timeout(self, now: float) -> list[Send]:
        self._now = now
        self.intervals += 1
        if now - self._settled_at >= CHECKPOINT_EVERY:
            self._settled_at = now
            self.settle()
            self._checkpoint()
        self.retention.clock(now)
        sends = self._out(self._execute(self.core.timeout(now)))
        self._notify("ticked")
        return sends

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        if self.signing is not None:
            self.signing.forget_peer(ref)
        return self._out(self.core.peer_unreachable(ref, now))

    #: What the runtime's publish quotas need (`pubsub.node.quotas`).
    publication_size = staticmethod(quotas.publication_size)
    over_quota = staticmethod(quotas.over_quota)

    # ------------------------------------------------------------------ clients
    def session_request(
        self, msg: Message, session: ClientSession, now: float
    ) -> list[Send] | None:
        """Publish and Follow answer later or stream; everything else goes to `control`."""
        self._now = now
        self._notify("touched")
        if isinstance(msg, PublishRequest):
            return self._publish(msg, session, now)
        if isinstance(msg, Follow):
            if self.runtime is None:
                session.send(ErrorReply(code="unavailable", detail="the node is not running"))
                return []
            self.deliveries.open(msg, session, self.runtime.spawn)
            return []
        return None

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        self._now = now
        self._notify("touched")
        if isinstance(msg, JoinTopic):
            sends = self.join(msg.topic)
            return self._changed("join", msg.topic), sends
        if isinstance(msg, LeaveTopic):
            sends = self.core.leave(msg.topic)
            self.deliveries.left(msg.topic)
            return self._changed("leave", msg.topic), sends
        if isinstance(msg, StatusRequest):
            return Reply(body=self.status()), []
        return ErrorReply(
            code="unsupported", detail=f"a node does not accept {msg.kind!r} from clients"
        ), []

    def _changed(self, action: str, topic: Topic) -> Message:
        body: dict[str, object] = {"ok": True, "action": action, "topic": topic, "persisted": False}
        if self.topic_file is not None:
            wanted = set(self.core.wanted_topics)
            if wanted != self._saved:
                try:
                    self.topic_file.save(wanted)
                    self._saved = wanted
                except TopicFileError as exc:
                    self.stats.error("persist_error")
                    log.error("%s", exc)
                    body["warning"] = str(exc)
                    return Reply(body=body)
            body["persisted"] = True
        return Reply(body=body)

    # ------------------------------------------------------------------ publishing
    def _publish(self, msg: PublishRequest, session: ClientSession, now: float) -> list[Send]:
        client = self._client_token(session)
        if self.signing is not None and self.signing.own_key_revoked:
            detail = "this node's signing key is revoked: no node accepts its publications"
            self.answer(client, PublishFailed(msg.id, "key_revoked", detail))
            self.executor.release()
            return []
        try:
            self.sequence.reserve(self.core.next_seq)
        except StoreError as exc:
            self.stats.error("store_error")
            self.answer(client, PublishFailed(msg.id, "store_error", str(exc)))
            self.executor.release()
            return []
        published_ms = int(time.time() * 1000)
        return self._execute(self.core.publish_request(client, msg, published_ms, now))

    def _client_token(self, session: ClientSession) -> int:
        """The token by which the core addresses this client connection."""
        token = self._tokens.get(id(session))
        if token is not None:
            return token
        self._next_client += 1
        token = self._next_client
        self._sessions[token] = session
        self._tokens[id(session)] = token

        def forget() -> None:
            self._sessions.pop(token, None)
            self._tokens.pop(id(session), None)

        session.on_close(forget)
        return token

    # ------------------------------------------------------------------ effects
    def _execute(self, effects: Iterable[Effect]) -> list[Send]:
        """Carry out a core's effects (`pubsub.kernel.executor`): the sends to go now are
        returned for the runtime; then the topics whose retention changed are made durable
        after the commit of what was just queued."""
        sends = self.executor.run(effects)
        self.retention.persist()
        return sends

    def answer(self, client: int, msg: Message) -> None:
        """(The executor's outlet.)  An answer for a client: written, with the others of
        the pass, in one write when the pass ends (`deliver`)."""
        if isinstance(msg, PublishAck):
            if msg.stored_by == self.ref:
                self.counters["published_local"] += 1
        elif isinstance(msg, PublishFailed):
            self.counters[f"publish_failed_{msg.code}"] += 1
        if client in self._sessions:
            self._replies.setdefault(client, []).append(msg)

    def deliver(self, sends: list[Send]) -> None:
        """(The executor's outlet.)  At the end of the pass: each client's answers in one
        write, then the sends that commits and batches released -- acknowledgements before
        spreading, as the Persists ordered them."""
        if self._replies:
            replies, self._replies = self._replies, {}
            for client, msgs in replies.items():
                session = self._sessions.get(client)
                if session is not None:
                    session.send_many(msgs)
        self._dispatch(sends)

    # ------------------------------------------------------------------ persistence
    def settle(self) -> None:
        """Move the commits waiting in the store's journal into SQLite (about once a second,
        just before a checkpoint syncs the log); a failure is the store's error, tried again
        next time."""
        try:
            self.store.settle()
        except StoreError as exc:
            self._store_error(exc)

    def _checkpoint(self) -> None:
        """Under sync "normal" the store's log is synced by checkpoints, which run on the
        store's thread after a settle (about once a second) while something was written."""
        if not self.commits.inline or not self.store.durable:
            return
        written = (self.store.commits, self.store.settles)
        if written == self._checkpointed:
            return
        if self._checkpointing is not None and not self._checkpointing.done():
            return
        self._checkpointed = written
        self._checkpointing = self.thread.submit(self.store.checkpoint)
        self._checkpointing.add_done_callback(self._checkpoint_ended)

    def _checkpoint_ended(self, future: concurrent.futures.Future[None]) -> None:
        """(On the store's thread.)  A failed checkpoint is retried by the next one."""
        if future.exception() is not None:
            log.error("%s: %s", self.ref, future.exception())

    def _written(self, written: list[Stored]) -> None:
        """A commit wrote these: streams get them from memory, telemetry hears of them."""
        self.deliveries.committed(written)
        self._notify("stored", written)

    def _unwritten(self, rows: list[NewRow]) -> None:
        """A commit failed: the core forgets what it could not write (`Committed`)."""
        self.executor.unwritten(rows)

    def _refill_message_ids(self) -> None:
        """After a restart, the message ids of what the store holds from the last window
        are duplicates again (`pubsub.publications.publishing`)."""
        window = self.core.dedupe_window
        if not self.store.durable or window <= 0:
            return
        wall_ms = int(time.time() * 1000)
        try:
            found = self.thread.call(self.store.message_ids, wall_ms - int(window * 1000))
        except StoreError as exc:
            log.warning("%s: cannot refill the message-id window: %s", self.ref, exc)
            return
        for topic, publication, stored_at_ms in found:
            left = window - (wall_ms - stored_at_ms) / 1000
            self.core.remember_message_id(topic, publication, self._now, self._now + left)

    def _store_error(self, exc: StoreError) -> None:
        self.stats.error("store_error")
        try:
            self._limiter.log(("store",), logging.ERROR, "%s: %s", self.ref, exc)
        except RuntimeError:  # no event loop
            log.error("%s: %s", self.ref, exc)

    def flush(self) -> None:
        """Write everything still queued now (blocks; shutdown and tests)."""
        self.commits.flush()
        self.settle()
        self.executor.flush()  # held batches too: after the other sends, as `release` orders them

    def close(self) -> None:
        """Write what is queued, then stop the store's thread (the store stays open)."""
        self.flush()
        self.thread.close()

    def _notify(self, event: str, *args: Any) -> None:
        """Tell every observer (telemetry); a failing observer is counted, never fatal."""
        for observer in self.observers:
            try:
                getattr(observer, event)(*args)
            except Exception as exc:  # noqa: BLE001 - telemetry must not stop the node
                self.stats.error("telemetry_error")
                try:
                    self._limiter.log(
                        ("telemetry", type(exc).__name__), logging.ERROR,
                        "%s: telemetry %s failed: %r", self.ref, event, exc, exc_info=True,
                    )
                except RuntimeError:  # no event loop
                    log.exception("%s: telemetry %s failed", self.ref, event)

    def _dispatch(self, sends: list[Send]) -> None:
        if sends and self.runtime is not None:
            self.runtime.dispatch(self._out(sends))

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """The node's status (`pubsub.node.status`; README: `status --node`)."""
        return node_status(self)


async def serve_node(
    listen: Ref,
    supervisor: Ref,
    runtime_settings: RuntimeSettings,
    settings: NodeSettings,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
    *,
    until: asyncio.Event | None = None,
    on_serving: Callable[[NodeApp], None] | None = None,
    tune_gc: bool = True,
) -> None:
    """Run a subscriber on `listen` until SIGTERM/SIGINT (with `admin`, also its admin
    listener for `pubsub chaos`; AdminError if it cannot be opened).

    Inside an application's process (`pubsub.client.embedded`): until `until` is set,
    `on_serving(app)` called once it serves, the process's garbage collector left alone
    unless `tune_gc` (`pubsub.runtime.host.tune_gc`).

    With `settings.http_listen` it also serves the HTTP API there (`pubsub.node.http`).

    Raises TopicFileError or StoreError when the data directory, topics file or store is
    unusable or another process holds the data directory (`held_data_dir`), MetricsError /
    EventsError when the metrics endpoint or the events directory (`telemetry`) is,
    HttpError when the HTTP API's address is, and OSError when `listen` cannot be bound.
    """
    with held_data_dir(settings.data_dir, StoreError):
        await _serve_node(
            listen, supervisor, runtime_settings, settings, telemetry, admin, until, on_serving, tune_gc
        )


async def _serve_node(
    listen: Ref,
    supervisor: Ref,
    runtime_settings: RuntimeSettings,
    settings: NodeSettings,
    telemetry: TelemetrySettings | None,
    admin: AdminSettings | None,
    until: asyncio.Event | None,
    on_serving: Callable[[NodeApp], None] | None,
    tune_gc: bool,
) -> None:
    given = settings.overlay if "overlay" in settings.model_fields_set else None
    learned = await agreed_overlay(supervisor, given, runtime_settings)
    if learned != settings.overlay:
        settings = settings.model_copy(update={"overlay": learned})
        check_node_limits(settings, runtime_settings)
    topic_file = TopicFile(settings.data_dir) if settings.data_dir is not None else None
    store = PublicationStore(settings.data_dir, sync=settings.store_sync)
    overlay = registry.overlay(settings.overlay)
    try:
        core = overlay.node_core(
            listen,
            supervisor,
            rng=random.Random(),
            flooding=settings.flooding,
            dissemination=dissemination_of(settings),
            # anti-entropy batches must fit in a frame, whatever PUBSUB_MAX_FRAME_BYTES is
            publish_batch_bytes=min(
                DEFAULT_BATCH_BYTES, runtime_settings.max_frame_bytes - FRAME_OVERHEAD
            ),
            max_payload_bytes=settings.max_payload_bytes,
            handover_timeout=settings.handover_timeout,
            handover_attempts=settings.handover_attempts,
            dedupe_window=settings.dedupe_window,
            order_wait=settings.order_wait,
            order_max_wait=settings.order_max_wait,
            discover_supervisors=True,  # sharded supervisors (`pubsub.kernel.shards`)
        )
        stats = Stats()
        app = NodeApp(
            listen, core, stats, topic_file, store=store, linger=settings.publish_linger,
            spread_hold=settings.spread_hold, overlay=settings.overlay,
        )
        signing: Signing | None = None
        if runtime_settings.tls:  # signing (and the cryptography it needs) comes with TLS
            from pubsub.node.signing import Signing

            signing = Signing.from_settings(listen, runtime_settings, settings.data_dir)
            if signing is not None:
                app.enable_signing(signing)
        daemon = Daemon(
            role="node",
            app=app,
            runtime=Runtime(app, runtime_settings, stats=stats, role="node"),
            instrument=node_instrument(app, stats, overlay.kinds()),
            actions=overlay.node_faults(app),
            initial=app.rejoin(),
            on_stop=app.close,
            tune_gc=tune_gc,
        )
        authority = daemon.runtime.authority
        if signing is not None and authority is not None:  # the permissions file's revocations
            authority.listen(lambda rules: signing.revoke(rules.revoked_keys))
        if settings.http_listen is not None:
            from pubsub.node.http import http_application  # aiohttp: only when served

            host_name, _, port = settings.http_listen.rpartition(":")
            daemon.services.append(
                HttpService("HTTP API", http_application(app), host_name, int(port), server_context(runtime_settings))
            )
        serving = None if on_serving is None else (lambda: on_serving(app))
        await host(daemon, telemetry, admin, until=until, on_serving=serving)
    finally:
        store.close()


def run_node(
    listen: Ref,
    supervisor: Ref,
    runtime_settings: RuntimeSettings,
    settings: NodeSettings,
    telemetry: TelemetrySettings | None = None,
    admin: AdminSettings | None = None,
) -> None:
    """`serve_node` on a fresh uvloop event loop."""
    uvloop.run(serve_node(listen, supervisor, runtime_settings, settings, telemetry, admin))
