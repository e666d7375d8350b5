"""`tests.simhelpers.is_legitimate` (one pass, first difference, ideal cached per membership)
gives the verdict of `is_legitimate_full` (every problem listed) in every state a run passes
through: fresh joins, corrupted states, leaves and crashes, and single planted faults."""

from __future__ import annotations

import random

from pubsub.kernel.message import Ref, Topic
from pubsub.sim.scenarios import corrupted_start, fresh_start, legitimate_start
from pubsub.sim.world import Simulation
from pubsub.skipring.labels import Label
from pubsub.skipring.messages import Contact, Linearize, RemoveConnections
from tests.simhelpers import is_legitimate, is_legitimate_full

TOPIC = Topic("t")


def _agree(sim: Simulation, intervals: int) -> list[bool]:
    seen = []
    for _ in range(intervals):
        fast = is_legitimate(sim, TOPIC)
        assert fast == is_legitimate_full(sim, TOPIC), f"verdicts differ at t={sim.now}"
        seen.append(fast)
        sim.run_for(sim.interval)
    return seen


def test_fresh_start_verdicts_agree() -> None:
    sim = Simulation(1)
    fresh_start(sim, 40, TOPIC)
    seen = _agree(sim, 20)
    assert not seen[0] and seen[-1]


def test_corrupted_start_verdicts_agree() -> None:
    sim = Simulation(2)
    corrupted_start(sim, 24, TOPIC, random.Random(2))
    seen = _agree(sim, 120)
    assert not seen[0] and seen[-1]


def test_leave_and_crash_verdicts_agree() -> None:
    sim = Simulation(3)
    refs = legitimate_start(sim, 50, TOPIC)
    assert _agree(sim, 2) == [True, True]
    sim.leave(refs[7], TOPIC)
    sim.crash(refs[11])
    seen = _agree(sim, 15)
    assert not seen[0] and seen[-1]


FAULTS = (
    "shortcut holder", "shortcut unknown", "extra shortcut", "missing shortcut",
    "wrong left", "no left", "wrong label", "stale contact in flight", "cut in flight",
)


def _plant(what: str, sim: Simulation, refs: list[Ref]) -> None:
    state = sim.nodes[refs[5]].instances[TOPIC]
    label = next(iter(state.shortcuts))
    stray = Label("0000001")
    if what == "shortcut holder":
        state.shortcuts[label] = refs[6]
    elif what == "shortcut unknown":
        state.shortcuts[label] = None
    elif what == "extra shortcut":
        state.shortcuts[stray] = refs[6]
    elif what == "missing shortcut":
        del state.shortcuts[label]
    elif what == "wrong left":
        assert state.left is not None
        state.left = Contact(state.left.label, refs[6])
    elif what == "no left":
        state.left = None
    elif what == "wrong label":
        state.label = stray
    elif what == "stale contact in flight":
        sim.inject(refs[3], Linearize(TOPIC, Contact(stray, refs[6])), src=refs[4])
    else:
        sim.inject(refs[3], RemoveConnections(TOPIC, refs[6]), src=refs[4])


def test_planted_faults_are_seen_by_both() -> None:
    for what in FAULTS:
        sim = Simulation(4)
        refs = legitimate_start(sim, 33, TOPIC)
        sim.run_for(2 * sim.interval)
        assert is_legitimate(sim, TOPIC) and is_legitimate_full(sim, TOPIC)
        _plant(what, sim, refs)
        assert not is_legitimate_full(sim, TOPIC), what
        assert not is_legitimate(sim, TOPIC), what
