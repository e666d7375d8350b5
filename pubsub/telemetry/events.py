"""The event stream: JSON lines in rotated files, moved atomically into a run directory.

The schema and the file protocol are a stable interface, specified in ``docs/events.md``;
the PySpark analysis (`pubsub analyze`) reads it.  This module has two parts.

`EventWriter` -- files
    ``emit(kind, **fields)`` adds the common fields (``ts``, ``kind``, ``source``, ``role``)
    and appends one JSON object per line to a private file
    ``DIR/.inprogress/<role>-<host>_<port>-<pid>-<seq>.jsonl``.  The file is closed and
    renamed into ``DIR`` (``os.replace`` within one file system: atomic, so a reader sees
    the whole file or nothing) once it is ``rotate_seconds`` old or ``rotate_bytes`` long,
    whichever comes first, and on `close`.  A file is created only when there is something
    to write into it.

    It never blocks the event loop for long: lines go into Python's file buffer (64 KiB)
    and reach the kernel when that fills, at a rotation and at `close`; nothing is synced
    to disk (the files are for analysis; a machine crash may lose the last seconds).  A
    disk error never reaches the caller: it is logged once (later ones at debug level),
    counted in `errors`, the events of the failed file are counted in `dropped`, and the
    writer tries a new file no sooner than `rotate_seconds` later.

    Retention (``retain_files``, ``retain_seconds``; both 0, keep everything, by default):
    after each rotation the writer deletes the oldest of *its own* rotated files -- those
    named after its role and reference, from this and earlier runs of the same daemon --
    beyond the newest ``retain_files``, and those last written more than ``retain_seconds``
    ago.  Files of other daemons and of other tools in the same directory are never touched.

    Other tools use the same class for their own events (``role="chaos"``,
    ``source="chaos"`` for fault-injection markers): ``with EventWriter(...) as w:
    w.emit("marker", id=..., action=..., targets=[...], params={})``.

The daemons' observers -- what to write
    `NodeEvents` and `SupervisorEvents` turn a daemon's state into events: a ``snapshot``
    (node) or ``supervisor`` event per topic whenever the documented fields change (checked
    once per event-loop pass after anything touched the state) and for every topic every
    ``snapshot_every`` Timeout intervals; a ``messages`` event per Timeout interval with the
    runtime's counts since the previous one; and (node) a ``delivery`` event for every
    publication the node stores for the first time, after the store's commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

#: The subdirectory of the run directory that holds files still being written.
INPROGRESS = ".inprogress"
SUFFIX = ".jsonl"
#: Bytes of Python's write buffer per file.
BUFFER_BYTES = 64 * 1024


class EventsError(RuntimeError):
    """The run directory cannot be used at start; the message is one line for the operator."""


def file_stem(role: str, source: str, pid: int) -> str:
    """``<role>-<host>_<port>-<pid>``: the start of every file name of one writer."""
    safe = "".join(c if c.isalnum() or c in "._" else "_" for c in source)
    return f"{role}-{safe}-{pid}"


class EventWriter:
    """Writes one daemon's (or tool's) events into `directory` as docs/events.md says."""

    def __init__(
        self,
        directory: Path | str,
        role: str,
        source: str,
        *,
        rotate_seconds: float = 2.0,
        rotate_bytes: int = 4 << 20,
        retain_files: int = 0,
        retain_seconds: float = 0.0,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create `directory` and its in-progress subdirectory; EventsError if impossible."""
        if rotate_seconds <= 0 or rotate_bytes <= 0:
            raise ValueError("rotate_seconds and rotate_bytes must be positive")
        if retain_files < 0 or retain_seconds < 0:
            raise ValueError("retain_files and retain_seconds must not be negative")
        self.directory = Path(directory)
        self.inprogress = self.directory / INPROGRESS
        try:
            self.inprogress.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EventsError(
                f"cannot use events directory {self.directory}: {exc.strerror or exc}"
            ) from None
        if not os.access(self.inprogress, os.W_OK | os.X_OK):
            raise EventsError(f"cannot write to events directory {self.inprogress}")
        self.role = role
        self.source = source
        self.rotate_seconds = rotate_seconds
        self.rotate_bytes = rotate_bytes
        self.stem = file_stem(role, source, os.getpid() if pid is None else pid)
        self.retain_files = retain_files
        self.retain_seconds = retain_seconds
        #: Rotated files of this daemon (any run): ``<role>-<host>_<port>-<pid>-<seq>.jsonl``.
        self._mine = re.compile(re.escape(file_stem(role, source, 0)[:-1]) + r"\d+-\d+" + re.escape(SUFFIX) + "$")
        self._clock = clock
        self._monotonic = monotonic
        self._file: IO[str] | None = None
        self._name = ""
        self._opened_at = 0.0
        self._size = 0
        self._lines = 0  # events in the current file
        self._seq = 0
        self._retry_at = 0.0  # after a disk error: no new file before this (monotonic)
        self._error_logged = False
        self.closed = False
        #: Events written into files that were moved into place (or are still open).
        self.written = 0
        #: Events lost: to a disk error, or emitted after `close`.
        self.dropped = 0
        #: Disk errors (open, write, close or rename failed).
        self.errors = 0
        #: Files moved into the run directory.
        self.files = 0
        #: Rotated files deleted by the retention rules.
        self.pruned = 0

    # ------------------------------------------------------------------ writing
    def emit(self, kind: str, **fields: Any) -> None:
        """Write one event: the common fields, then `fields` (``ts`` may be given)."""
        if self.closed:
            self.dropped += 1
            return
        event: dict[str, Any] = {
            "ts": fields.pop("ts", None) or self._clock(),
            "kind": kind,
            "source": self.source,
            "role": self.role,
        }
        event.update(fields)
        try:
            line = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)
        except (TypeError, ValueError) as exc:  # a caller's bug; the daemon goes on
            self._failed("encode", exc)
            self.dropped += 1
            return
        self._write(line + "\n")

    def _write(self, line: str) -> None:
        now = self._monotonic()
        if self._file is not None and now - self._opened_at >= self.rotate_seconds:
            self.rotate()
        if self._file is None and (now < self._retry_at or not self._open(now)):
            self.dropped += 1
            return
        assert self._file is not None
        try:
            self._file.write(line)
        except (OSError, ValueError) as exc:
            self._abandon(exc)
            self.dropped += 1
            return
        self._size += len(line.encode("utf-8")) if not line.isascii() else len(line)
        self._lines += 1
        if self._size >= self.rotate_bytes:
            self.rotate()

    def _open(self, now: float) -> bool:
        self._name = f"{self.stem}-{self._seq:06d}{SUFFIX}"
        self._seq += 1
        try:
            self.inprogress.mkdir(parents=True, exist_ok=True)  # in case it was removed
            self._file = open(  # noqa: SIM115 - closed by rotate/close
                self.inprogress / self._name, "w", encoding="utf-8", buffering=BUFFER_BYTES
            )
        except OSError as exc:
            self._failed("open", exc)
            self._retry_at = now + self.rotate_seconds
            return False
        self._opened_at = now
        self._size = 0
        self._lines = 0
        return True

    def tick(self) -> None:
        """Rotate the current file if it is old enough (call it now and then, e.g. every
        Timeout, so that a quiet writer still moves its file into place)."""
        if self._file is not None and self._monotonic() - self._opened_at >= self.rotate_seconds:
            self.rotate()

    def rotate(self) -> None:
        """Close the current file and move it into the run directory (if there is one)."""
        f, self._file = self._file, None
        if f is None:
            return
        lines = self._lines
        try:
            f.close()
            os.replace(self.inprogress / self._name, self.directory / self._name)
        except OSError as exc:
            self._failed("rotate", exc)
            self.dropped += lines
            self._retry_at = self._monotonic() + self.rotate_seconds
            return
        self.written += lines
        self.files += 1
        if self.retain_files or self.retain_seconds:
            self.prune()

    def prune(self) -> list[Path]:
        """Delete this daemon's rotated files beyond the retention limits (oldest first);
        returns what was deleted.  Errors are logged like the writer's own and counted."""
        try:
            mine = []
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if self._mine.match(entry.name) and entry.is_file(follow_symlinks=False):
                        mine.append((entry.stat().st_mtime, entry.name))
        except OSError as exc:
            self._failed("prune", exc)
            return []
        mine.sort()
        doomed: set[str] = set()
        if self.retain_files and len(mine) > self.retain_files:
            doomed.update(name for _, name in mine[: len(mine) - self.retain_files])
        if self.retain_seconds:
            oldest = self._clock() - self.retain_seconds
            doomed.update(name for mtime, name in mine if mtime < oldest)
        deleted = []
        for name in sorted(doomed):
            try:
                (self.directory / name).unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._failed("prune", exc)
                continue
            self.pruned += 1
            deleted.append(self.directory / name)
        return deleted

    def close(self) -> None:
        """Move the last file into place; later events are dropped (counted)."""
        if self.closed:
            return
        self.rotate()
        self.closed = True

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ errors
    def _abandon(self, exc: BaseException) -> None:
        """A write failed: give the current file up (its events are lost)."""
        f, self._file = self._file, None
        self._failed("write", exc)
        self.dropped += self._lines
        if f is not None:
            with contextlib.suppress(OSError, ValueError):
                f.close()
        self._retry_at = self._monotonic() + self.rotate_seconds

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        level = logging.DEBUG if self._error_logged else logging.ERROR
        self._error_logged = True
        log.log(
            level,
            "event stream %s: %s failed: %s (events are dropped and counted; "
            "further errors are logged at debug level)",
            self.directory,
            what,
            getattr(exc, "strerror", None) or exc,
        )

    def counters(self) -> dict[str, int]:
        """written, dropped, errors, files (for metrics and status)."""
        return {
            "written": self.written,
            "dropped": self.dropped,
            "errors": self.errors,
            "files": self.files,
        }


def move_leftovers(directory: Path | str) -> list[Path]:
    """Move every file a crashed writer left in ``DIR/.inprogress`` into ``DIR`` (for a
    runner, after every writer has stopped); returns the moved paths."""
    base = Path(directory)
    moved: list[Path] = []
    try:
        names = sorted(p.name for p in (base / INPROGRESS).iterdir())
    except OSError:
        return moved
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        target = base / name
        try:
            os.replace(base / INPROGRESS / name, target)
        except OSError as exc:
            log.warning("cannot move %s into %s: %s", name, base, exc)
            continue
        moved.append(target)
    return moved


# --------------------------------------------------------------------------- observers
class Observer:
    """What a daemon tells its telemetry; every method is a no-op here.

    `touched`: something happened that may have changed the state (a message, a client
    request, a commit).  `ticked`: a Timeout interval ended.  `stored`: rows the node's
    store just committed (`pubsub.node.rowcodec.Stored`).  `changed`: topics whose supervisor
    database changed.  `close`: the daemon stops.
    """

    def touched(self) -> None:
        """The daemon's state may have changed."""

    def ticked(self) -> None:
        """One Timeout interval ended."""

    def stored(self, rows: Sequence[Any]) -> None:
        """Publications committed to the node's store for the first time."""

    def changed(self, topics: Iterable[str]) -> None:
        """The supervisor database of `topics` changed."""

    def close(self) -> None:
        """The daemon stops."""


class MessageDeltas:
    """The ``messages`` event: a runtime's counts (`pubsub.runtime.stats.Stats`) since the previous
    call; counts before the first call belong to no interval."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats
        self._last = self._now()

    def _now(self) -> tuple[Counter[str], Counter[str], int, int, int]:
        s = self.stats
        return (
            Counter(s.frames_out) + Counter(getattr(s, "bundled_out", {})),
            Counter(s.frames_in) + Counter(getattr(s, "bundled_in", {})),
            sum(s.bytes_out.values()),
            sum(s.bytes_in.values()),
            sum(s.errors.values()),
        )

    def delta(self) -> dict[str, Any]:
        """Fields of one ``messages`` event (without ``interval``)."""
        before, after = self._last, self._now()
        self._last = after
        return {
            "sent": dict(sorted((after[0] - before[0]).items())),
            "received": dict(sorted((after[1] - before[1]).items())),
            "bytes_sent": after[2] - before[2],
            "bytes_received": after[3] - before[3],
            "errors": after[4] - before[4],
        }


def _call_soon(callback: Callable[[], None]) -> bool:
    """Schedule `callback` on the running loop; False when there is none."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    loop.call_soon(callback)
    return True


def as_pair(value: object) -> list[str] | None:
    """A reported pair (a contact's [label, ref]) as two strings, or None if it is not one."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return [str(value[0]), str(value[1])]
    return None


class SnapshotObserver(Observer):
    """Shared machinery: change checks once per loop pass, periodic snapshots, messages.

    Subclasses say how to read the state of topics (`_states`) and when a topic is gone
    (`_gone`: reported once, then forgotten until it comes back).
    """

    kind = ""

    def __init__(self, writer: EventWriter, app: Any, stats: Any, snapshot_every: int) -> None:
        self.writer = writer
        self.app = app
        self.snapshot_every = max(1, snapshot_every)
        self.messages = MessageDeltas(stats)
        self._last: dict[str, dict[str, Any]] = {}
        self._scheduled = False

    @property
    def interval(self) -> int:
        """The daemon's Timeout counter."""
        return int(getattr(self.app, "intervals", 0))

    def _states(self, topics: Iterable[str] | None) -> dict[str, dict[str, Any]]:
        """topic -> the documented state fields, for `topics` (None: every topic the daemon
        runs, plus those it reported before and no longer runs)."""
        raise NotImplementedError

    def _gone(self, state: dict[str, Any]) -> bool:
        raise NotImplementedError

    def _schedule(self) -> None:
        """Check for changes once, after everything queued in this loop pass."""
        if self._scheduled:
            return
        self._scheduled = True
        if not _call_soon(self._run_check):
            self._run_check()

    def _run_check(self) -> None:
        self._scheduled = False
        self._check(self._pending_topics())

    def _pending_topics(self) -> Iterable[str] | None:
        """Which topics a scheduled check looks at (None: all)."""
        return None

    def _check(self, topics: Iterable[str] | None) -> None:
        for topic, state in self._states(topics).items():
            last = self._last.get(topic)
            if last == state or (last is None and self._gone(state)):
                continue
            self._emit(topic, state, "change")

    def _emit(self, topic: str, state: dict[str, Any], reason: str) -> None:
        self.writer.emit(self.kind, topic=topic, **state, interval=self.interval, reason=reason)
        if self._gone(state):
            self._last.pop(topic, None)  # reported once; a comeback starts afresh
        else:
            self._last[topic] = state

    def ticked(self) -> None:
        self.writer.emit("messages", interval=self.interval, **self.messages.delta())
        self._check(None)
        if self.interval % self.snapshot_every == 0:
            for topic, state in list(self._last.items()):
                self._emit(topic, state, "periodic")
        self.writer.tick()

    def close(self) -> None:
        self._check(None)
        self.writer.close()


