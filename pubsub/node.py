"""The subscriber daemon: `NodeCore` on the network runtime.

Clients (``pubsub subscribe`` / ``unsubscribe`` / ``status``) talk to it with control
requests: JoinTopic -> ``core.join``, LeaveTopic -> ``core.leave``, StatusRequest -> the
core's status plus the runtime's counters under "stats".

With a data directory the node keeps the topics it should be subscribed to
(``core.wanted_topics``) in ``<data>/topics.json``, rewritten atomically (temporary file,
fsync, rename) whenever the set changes, and joins them again when it starts.  The rest of
its state is soft: the supervisor and the neighbours rebuild it (self-stabilization).
"""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path
from typing import Protocol

import uvloop

from pubsub.messages import (
    ErrorReply,
    JoinTopic,
    LeaveTopic,
    Message,
    Ref,
    Reply,
    Send,
    StatusRequest,
    Topic,
)
from pubsub.net import Runtime, Stats
from pubsub.nodecore import NodeCore
from pubsub.settings import NodeSettings, RuntimeSettings
from pubsub.wire import WireError, validate_topic

log = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"
TOPICS_FORMAT = 1


class TopicFileError(RuntimeError):
    """The topics file cannot be read or written; the message is one line for the operator."""


class TopicFile:
    """The durable set of wanted topics, one JSON document written atomically."""

    def __init__(self, data_dir: Path | str) -> None:
        self.dir = Path(data_dir)
        self.path = self.dir / TOPICS_FILE
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TopicFileError(
                f"cannot create data directory {self.dir}: {exc.strerror or exc}"
            ) from None
        if not os.access(self.dir, os.W_OK | os.X_OK):
            raise TopicFileError(f"data directory {self.dir} is not writable")

    def load(self) -> set[Topic]:
        """The stored topics (empty when there is no file yet); invalid entries are skipped."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return set()
        except OSError as exc:
            raise TopicFileError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        try:
            doc = json.loads(text)
            entries = doc["topics"]
            if not isinstance(entries, list):
                raise TypeError("'topics' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise TopicFileError(f"{self.path} is not a topics file: {exc}") from None
        topics: set[Topic] = set()
        for entry in entries:
            try:
                topics.add(validate_topic(entry))
            except WireError as exc:
                log.warning("%s: skipping invalid topic %r: %s", self.path, entry, exc.detail)
        return topics

    def save(self, topics: set[Topic]) -> None:
        """Replace the file with `topics` (temporary file, fsync, rename, fsync directory)."""
        doc = {"format": TOPICS_FORMAT, "topics": sorted(topics)}
        tmp = self.path.with_name(f".{TOPICS_FILE}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, ensure_ascii=False, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TopicFileError(f"cannot write {self.path}: {exc.strerror or exc}") from None


class NodeCoreLike(Protocol):
    """The part of `pubsub.nodecore.NodeCore` the daemon uses."""

    wanted_topics: set[Topic]

    def join(self, topic: Topic) -> list[Send]: ...
    def leave(self, topic: Topic) -> list[Send]: ...
    def handle(self, msg: Message, now: float) -> list[Send]: ...
    def timeout(self, now: float) -> list[Send]: ...
    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]: ...
    def status(self) -> dict[str, object]: ...


class NodeApp:
    """The `pubsub.net.Application` of the subscriber daemon."""

    def __init__(
        self, ref: Ref, core: NodeCoreLike, stats: Stats, topic_file: TopicFile | None = None
    ) -> None:
        self.ref = ref
        self.core = core
        self.stats = stats
        self.topic_file = topic_file
        self._saved: set[Topic] | None = None

    def rejoin(self) -> list[Send]:
        """Join every stored topic again (call once, before the runtime starts serving)."""
        if self.topic_file is None:
            return []
        topics = self.topic_file.load()
        self._saved = set(topics)
        sends: list[Send] = []
        for topic in sorted(topics):
            sends.extend(self.core.join(topic))
        if topics:
            log.info("%s: rejoining %d stored topics", self.ref, len(topics))
        return sends

    def handle(self, msg: Message, now: float) -> list[Send]:
        return self.core.handle(msg, now)

    def timeout(self, now: float) -> list[Send]:
        return self.core.timeout(now)

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        return self.core.peer_unreachable(ref, now)

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        if isinstance(msg, JoinTopic):
            sends = self.core.join(msg.topic)
            return self._changed("join", msg.topic), sends
        if isinstance(msg, LeaveTopic):
            sends = self.core.leave(msg.topic)
            return self._changed("leave", msg.topic), sends
        if isinstance(msg, StatusRequest):
            body = dict(self.core.status())
            body["stats"] = self.stats.snapshot()
            return Reply(body=body), []
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


async def serve_node(
    listen: Ref, supervisor: Ref, runtime_settings: RuntimeSettings, settings: NodeSettings
) -> None:
    """Run a subscriber on `listen` until SIGTERM/SIGINT.

    Raises TopicFileError when the data directory or topics file is unusable and OSError
    when `listen` cannot be bound.
    """
    topic_file = TopicFile(settings.data_dir) if settings.data_dir is not None else None
    core = NodeCore(listen, supervisor, rng=random.Random())
    stats = Stats()
    app = NodeApp(listen, core, stats, topic_file)
    initial = app.rejoin()
    runtime = Runtime(app, runtime_settings, stats=stats)
    await runtime.serve_until_signal(on_start=lambda: runtime.dispatch(initial))


def run_node(
    listen: Ref, supervisor: Ref, runtime_settings: RuntimeSettings, settings: NodeSettings
) -> None:
    """`serve_node` on a fresh uvloop event loop."""
    uvloop.run(serve_node(listen, supervisor, runtime_settings, settings))
