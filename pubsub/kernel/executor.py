"""The one executor of a core's effects (`pubsub.kernel.effects`), for the daemons and the
simulator alike.

`Executor.run(effects)` carries out what one call into a core returned and gives back the
`Send`s to go out now.  Everything else is stated against three small contracts that the
host supplies:

* a `Store` that writes rows by group commits: `add` queues rows for the next commit,
  `after` runs an action once the commit holding everything queued so far has ended
  (``action(ok, local_seqs)``), and the host tells the executor of rows a failed commit
  could not write (`unwritten`).  The node daemon's is its SQLite group commit
  (`pubsub.node.commits`); the simulator's a simulated store whose commits take virtual
  time (`pubsub.sim.world`); one without durability runs `after` at once;
* a `Clock`: the time, "at the end of this pass" (`soon`) and "in so many seconds"
  (`later`): the event loop's, or the simulator's virtual clock;
* an `Outlet`: where answers to clients go (`answer`, which an outlet may buffer) and the
  sends released later -- by a commit or a batch -- (`deliver`, which first writes the
  answers buffered so far: acknowledgements before spreading, as the Persists order them).

The order it keeps, whoever hosts it:

1. the effects of one call in the order returned; a `Persist`'s rows join the store's next
   commit, and its `then` (or `otherwise`) runs only after that commit ended -- after the
   core heard `Committed` for its token and what that returned was carried out;
2. what commits release in one pass leaves together at the end of the pass (`soon`): the
   outlet's answers, then the sends, then the `Batch`es of the `Batched` items released
   (one `Batch` per work and topic: one arc broadcast for a whole commit);
3. under load (the last release carried at least `hold_min` items) the `Batched` items may
   wait up to `hold` seconds for more, fewer than `hold_max` at most (the node daemon's
   ``PUBSUB_SPREAD_HOLD``; the simulator holds nothing).

Effects the executor does not know are refused (`TypeError`): a core that returns
something else has a bug that must not pass silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from pubsub.kernel.contracts import Core
from pubsub.kernel.effects import Answer, Batch, Batched, Committed, Effect, Persist
from pubsub.kernel.message import Message, Send, Topic

#: Local numbers of what a commit wrote, by (topic, publication key).
LocalSeqs = Mapping[tuple[Topic, bytes], int]


class Store(Protocol):
    """Where the rows of `Persist`s are written (module docstring)."""

    def add(self, rows: Sequence[Any]) -> None:
        """Queue rows for the next commit."""
        ...

    def after(self, action: Callable[[bool, LocalSeqs], None]) -> None:
        """Run `action(ok, local_seqs)` after the commit that holds every row queued so far."""
        ...


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """The host's time and scheduling (module docstring)."""

    def now(self) -> float: ...

    def soon(self, action: Callable[[], None]) -> None:
        """Run `action` at the end of this pass."""
        ...

    def later(self, delay: float, action: Callable[[], None]) -> Timer | None:
        """Run `action` in `delay` seconds; None if this clock cannot (nothing is held then)."""
        ...


class Outlet(Protocol):
    """Where answers and later sends go (module docstring)."""

    def answer(self, client: int, msg: Message) -> None: ...

    def deliver(self, sends: list[Send]) -> None: ...


class Executor:
    """Carries out one core's effects against a store, a clock and an outlet."""

    def __init__(
        self,
        core: Core,
        store: Store,
        clock: Clock,
        outlet: Outlet,
        *,
        hold: float = 0.0,
        hold_min: int = 1,
        hold_max: int = 1,
    ) -> None:
        self.core = core
        self.store = store
        self.clock = clock
        self.outlet = outlet
        self.hold = hold
        self.hold_min = hold_min
        self.hold_max = hold_max
        #: Sends released by commits, sent at the end of the pass.
        self._outbox: list[Send] = []
        #: `Batched` items by (work, topic), released as one `Batch` each.
        self._batched: dict[tuple[str, Topic], list[Any]] = {}
        self._scheduled = False
        self._hold_timer: Timer | None = None
        self._last_release = 0
        #: How often the items waited under load (`hold`).
        self.holds = 0

    # ------------------------------------------------------------------ carrying out
    def run(self, effects: Iterable[Effect]) -> list[Send]:
        """Carry out the effects of one call into the core; the sends to go out now."""
        sends: list[Send] = []
        for effect in effects:
            cls = effect.__class__
            if cls is Send:
                sends.append(effect)  # type: ignore[arg-type]
            elif cls is Persist:
                self._persist(effect)  # type: ignore[arg-type]
            elif cls is Answer:
                self.outlet.answer(effect.client, effect.msg)  # type: ignore[union-attr]
                self._schedule()  # buffered answers leave at the end of the pass
            elif cls is Batched:
                work, topic, item = effect  # type: ignore[misc]
                self._batched.setdefault((work, topic), []).append(item)
                self._schedule()
            else:
                raise TypeError(f"not an effect: {effect!r}")
        return sends

    def _persist(self, persist: Persist) -> None:
        if persist.rows:
            self.store.add(persist.rows)
        if persist.then or persist.otherwise or persist.token is not None:
            self.store.after(partial(self._ended, persist))

    def _ended(self, persist: Persist, ok: bool, local_seqs: LocalSeqs) -> None:
        """A Persist's commit ended: tell the core (a token), then carry out what waited."""
        effects: Sequence[Effect] = persist.then if ok else persist.otherwise
        if persist.token is not None:
            told = self.core.handle(Committed((persist.token,), ok, local_seqs), self.clock.now())
            effects = (*told, *effects)
        self._outbox.extend(self.run(effects))
        self._schedule()

    def unwritten(self, rows: Sequence[Any]) -> None:
        """A commit failed: the core forgets what it could not write (before the actions of
        that commit run, which the store does next with ``ok=False``)."""
        if rows:
            self._outbox.extend(self.run(self.core.handle(Committed((), False, {}, tuple(rows)), self.clock.now())))
            self._schedule()

    # ------------------------------------------------------------------ the end of the pass
    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.clock.soon(self.release)

    def release(self) -> None:
        """The end of the pass: the outlet's answers and the commits' sends, then the
        batches (unless they wait under load)."""
        self._scheduled = False
        sends, self._outbox = self._outbox, []
        if self._batched and not self._holding():
            self._release_batched(sends)
        self.outlet.deliver(sends)

    def flush(self) -> None:
        """Release everything now, held batches included (shutdown, tests)."""
        self._cancel_hold()
        sends, self._outbox = self._outbox, []
        if self._batched:
            self._release_batched(sends)
        self.outlet.deliver(sends)

    @property
    def waiting(self) -> int:
        """`Batched` items not released yet."""
        return sum(len(items) for items in self._batched.values())

    @property
    def held(self) -> bool:
        """Whether items wait under load now (`hold`)."""
        return self._hold_timer is not None

    def _release_batched(self, sends: list[Send]) -> None:
        """One `Batch` per work and topic into the core; what it returns joins `sends`."""
        released = 0
        while self._batched:
            batched, self._batched = self._batched, {}
            for (work, topic), items in batched.items():
                released += len(items)
                sends.extend(self.run(self.core.handle(Batch(work, topic, tuple(items)), self.clock.now())))
        self._last_release = released

    def _holding(self) -> bool:
        """Whether the `Batched` items wait for more (module docstring, 3): their
        publications are stored and acknowledged already; the wait lets one arc broadcast
        carry more of them, so that every node down the tree handles fewer, larger batches."""
        if self.hold <= 0:
            return False
        if self.waiting >= self.hold_max:
            self._cancel_hold()
            return False
        if self._hold_timer is not None:
            return True
        if self._last_release < self.hold_min:
            return False
        self._hold_timer = self.clock.later(self.hold, self._release_held)
        if self._hold_timer is None:
            return False
        self.holds += 1
        return True

    def _release_held(self) -> None:
        self._hold_timer = None
        sends: list[Send] = []
        self._release_batched(sends)
        self.outlet.deliver(sends)

    def _cancel_hold(self) -> None:
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
