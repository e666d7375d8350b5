"""A broker's failure detector on real processes (a 3×3 SCOT on 127.0.0.1): a hung inner
broker (SIGSTOP) is suspected by every neighbour within the bound (heartbeat × suspect-after)
and cleared when it runs again; a broker killed with -9 and restarted faster than detection
could matter is noticed as restarted by its new incarnation.  Detection only: rerouting
around a suspect is not built yet (issue 46)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from broker.localscot import LocalScot
from broker.topologyfile import scot3x3
from pubsub.ops.processes import poll

pytestmark = pytest.mark.integration

HEARTBEAT = 0.2
SUSPECT_AFTER = 3
BOUND = HEARTBEAT * SUSPECT_AFTER
#: What a status poll on a loaded 2-core machine may add to the bound (the assertion is on
#: detection as the neighbours' status shows it).
SLACK = 3.0
VICTIM = "b,1"
WAIT = 60.0


def test_a_hung_and_a_restarted_inner_broker_are_noticed_by_every_neighbour(tmp_path: Path) -> None:
    with LocalScot(tmp_path / "scot", scot3x3(), heartbeat=HEARTBEAT, suspect_after=SUSPECT_AFTER) as scot:
        neighbours = sorted(scot.topology.neighbours(VICTIM))
        assert len(neighbours) >= 3, neighbours

        def statuses() -> dict[str, dict[str, Any]]:
            return scot.broker_statuses(neighbours)

        def nobody_suspects() -> list[str]:
            every = scot.broker_statuses()
            return [f"{b} suspects {s['suspected']}" for b, s in sorted(every.items()) if s.get("suspected")]

        def everyone_heard() -> list[str]:  # a neighbour never heard is not suspected before the bound
            return nobody_suspects() + [f"{b} has not heard {VICTIM}'s incarnation"
                                        for b, s in sorted(statuses().items()) if s["links"][VICTIM]["incarnation"] is None]

        poll(everyone_heard, WAIT, "every broker hearing all its neighbours", 0.2)
        incarnations = {b: s["links"][VICTIM]["incarnation"] for b, s in statuses().items()}
        assert len(set(incarnations.values())) == 1 and None not in incarnations.values(), incarnations

        def suspecting(reason: str | None) -> list[str]:
            return [f"{b}: {VICTIM} is {s['links'][VICTIM]['suspected']!r}" for b, s in sorted(statuses().items())
                    if s["links"][VICTIM]["suspected"] != reason]

        scot.kill_broker(VICTIM, signal.SIGSTOP)
        hung_at = time.monotonic()
        try:
            poll(lambda: suspecting("silent"), WAIT, f"every neighbour suspecting the hung {VICTIM}", 0.1)
            detected = time.monotonic() - hung_at
        finally:
            scot.kill_broker(VICTIM, signal.SIGCONT)
        assert detected <= BOUND + SLACK, f"suspected after {detected:.2f} s; the bound is {BOUND} s"
        poll(lambda: suspecting(None), WAIT, f"{VICTIM} cleared once it runs again", 0.2)
        cleared = {b: s["daemon_counters"].get("suspicions_cleared", 0) for b, s in statuses().items()}
        assert all(n >= 1 for n in cleared.values()), cleared

        scot.kill_broker(VICTIM)  # kill -9, and back at once
        scot.restart_broker(VICTIM)

        def restart_noticed() -> list[str]:
            return [f"{b}: no restart noticed" for b, s in sorted(statuses().items())
                    if s["daemon_counters"].get("restarts_noticed", 0) < 1
                    or s["links"][VICTIM]["incarnation"] <= incarnations[b]]

        poll(restart_noticed, WAIT, f"every neighbour noticing {VICTIM}'s new incarnation", 0.2)
        poll(nobody_suspects, WAIT, "no suspicion left after the restart", 0.2)
