"""How long `DaemonGroup.wait_answering` waits for daemons started together.

The clock restarts whenever one more daemon answers; a daemon that never answers ends the
wait `timeout` seconds after the last progress.  The daemons' answers follow a schedule on
a simulated clock (the real-process start-up is exercised by every integration test): what
is checked here is the waiting rule itself, which wall-clock tests could only show by
sleeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pubsub.ops import daemongroup
from pubsub.ops.processes import ClusterTimeout, Daemon


class Clock:
    """Simulated time for the module under test: `sleep` advances it."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Running:
    """A process that has not exited (what `Daemon.running` asks)."""

    pid = 4242

    def poll(self) -> None:
        return None


class Scheduled(daemongroup.DaemonGroup):
    """Daemons whose first status answer comes at a given simulated time (None: never).
    Each round of status requests costs one simulated second, as a refused connect would
    cost at most."""

    def __init__(self, tmp_path: Path, clock: Clock, ready_at: Sequence[float | None], timeout: float) -> None:
        self.clock = clock
        self.start_timeout = timeout
        self.ready_at: dict[str, float | None] = {}
        self.group: list[Daemon] = []
        for i, at in enumerate(ready_at):
            daemon = Daemon(f"node-{i}", f"127.0.0.1:{1000 + i}", [], tmp_path, tmp_path / f"{i}.log")
            daemon.process = Running()  # type: ignore[assignment]
            self.ready_at[daemon.ref] = at
            self.group.append(daemon)

    def daemons(self) -> list[Daemon]:
        return self.group

    def _statuses(self, refs: Sequence[str], timeout: float = 1.0) -> dict[str, dict[str, Any] | Exception]:
        self.clock.sleep(1.0)
        answers: dict[str, dict[str, Any] | Exception] = {}
        for ref in refs:
            at = self.ready_at[ref]
            answers[ref] = {} if at is not None and at <= self.clock.now else ConnectionRefusedError(ref)
        return answers


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    simulated = Clock()
    monkeypatch.setattr(daemongroup, "time", simulated)
    return simulated


def test_daemons_answering_one_after_another_may_take_longer_than_the_timeout_together(
    tmp_path: Path, clock: Clock
) -> None:
    group = Scheduled(tmp_path, clock, ready_at=[8.0, 16.0, 24.0, 32.0], timeout=10.0)
    group.wait_answering(group.daemons())
    assert 32.0 <= clock.now < 34.0  # waited for the last one, well past one timeout


def test_a_daemon_that_never_answers_ends_the_wait_one_timeout_after_the_last_progress(
    tmp_path: Path, clock: Clock
) -> None:
    group = Scheduled(tmp_path, clock, ready_at=[5.0, 12.0, None], timeout=10.0)
    with pytest.raises(ClusterTimeout, match="node-2") as raised:
        group.wait_answering(group.daemons())
    assert "node-0" not in str(raised.value) and "node-1" not in str(raised.value)
    assert 22.0 <= clock.now < 24.0  # 10 s after node-1 answered at 12 s


def test_no_daemon_answering_ends_the_wait_after_the_timeout(tmp_path: Path, clock: Clock) -> None:
    group = Scheduled(tmp_path, clock, ready_at=[None, None], timeout=10.0)
    with pytest.raises(ClusterTimeout, match="node-0.*node-1"):
        group.wait_answering(group.daemons(), timeout=4.0)
    assert 4.0 <= clock.now < 6.0
