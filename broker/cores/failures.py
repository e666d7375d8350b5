"""Failure detection of a broker's neighbours, without I/O: heartbeats in, suspicions out.

Broker failures are outside paper 002's scope (§9.2 limitation (i)); this is the detector a
service needs before anything can be rerouted.  Every neighbour sends a heartbeat every
``heartbeat`` seconds on every link, busy or not, carrying its *incarnation* (a number that
grows with each start of that broker).  A neighbour is

* **suspected** when ``missed`` heartbeat periods pass without a word from it (any message
  counts, a heartbeat or a broker message), counted from the detector's start for a
  neighbour never heard; or at once when a connect to it is refused (the runtime reports
  it unreachable);
* **cleared** when it is heard again;
* not suspected for this broker's own pause: when the detector's checks stop for longer than
  the bound (the broker was stopped, or starved of CPU), the pause is not counted as the
  neighbours' silence;
* **restarted** when a heartbeat brings a larger incarnation than the last one heard, even if
  it came back faster than the detector could suspect it: its tables are not the ones its
  neighbours routed on (a smaller incarnation is an old heartbeat still in flight, ignored).

`heard`, `refused` and `tick` return the changes they made as data (`Change`); the daemon
(`broker.app`) counts, logs and emits them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

#: Missed heartbeat periods before a silent neighbour is suspected (the default).
DEFAULT_MISSED = 3

ChangeKind = Literal["suspected", "cleared", "restarted"]


@dataclass(frozen=True)
class Change:
    """What one input did to one neighbour: `kind`, and for a suspicion `reason`
    (``silent`` or ``refused``)."""

    neighbour: str
    kind: ChangeKind
    reason: str = ""


class FailureDetector:
    """The suspicions of one broker about its neighbours (module docstring)."""

    def __init__(self, neighbours: Iterable[str], heartbeat: float, missed: int = DEFAULT_MISSED,
                 start: float = 0.0) -> None:
        if heartbeat <= 0 or missed < 1:
            raise ValueError("the heartbeat must be positive and at least one missed period must be allowed")
        self.heartbeat = heartbeat
        self.missed = missed
        self.last_heard: dict[str, float] = dict.fromkeys(neighbours, start)
        self.ever_heard: set[str] = set()
        self.incarnation: dict[str, int] = {}
        self.suspected: dict[str, str] = {}
        self.last_tick: float | None = None
        #: own pauses longer than the bound noticed by `tick` (not blamed on the neighbours)
        self.pauses = 0

    @property
    def bound(self) -> float:
        """Seconds of silence after which a neighbour is suspected."""
        return self.heartbeat * self.missed

    def heard(self, neighbour: str, now: float, incarnation: int | None = None) -> list[Change]:
        """A message from `neighbour` (a heartbeat brings its `incarnation`)."""
        if neighbour not in self.last_heard:
            return []
        out: list[Change] = []
        self.last_heard[neighbour] = max(self.last_heard[neighbour], now)
        self.ever_heard.add(neighbour)
        if incarnation is not None:
            known = self.incarnation.get(neighbour)
            if known is not None and incarnation < known:
                return []  # an old heartbeat, overtaken by the broker's restart
            if known is not None and incarnation > known:
                out.append(Change(neighbour, "restarted"))
            self.incarnation[neighbour] = incarnation
        if self.suspected.pop(neighbour, None) is not None:
            out.append(Change(neighbour, "cleared"))
        return out

    def refused(self, neighbour: str) -> list[Change]:
        """A connect to `neighbour` was refused: suspected at once."""
        return self._suspect(neighbour, "refused")

    def tick(self, now: float) -> list[Change]:
        """Suspect every neighbour silent for longer than the bound.  A gap since the last
        tick longer than the bound is this broker's own pause (it was stopped, or starved):
        the pause is not counted as the neighbours' silence."""
        if self.last_tick is not None and now - self.last_tick > self.bound:
            pause = now - self.last_tick
            for neighbour in self.last_heard:
                self.last_heard[neighbour] += pause
            self.pauses += 1
        self.last_tick = now
        out: list[Change] = []
        for neighbour, heard in sorted(self.last_heard.items()):
            if now - heard > self.bound:
                out += self._suspect(neighbour, "silent")
        return out

    def heard_at(self, neighbour: str) -> float | None:
        """When `neighbour` was last heard (None: never since the start)."""
        return self.last_heard[neighbour] if neighbour in self.ever_heard else None

    def _suspect(self, neighbour: str, reason: str) -> list[Change]:
        if neighbour not in self.last_heard or neighbour in self.suspected:
            return []
        self.suspected[neighbour] = reason
        return [Change(neighbour, "suspected", reason)]
