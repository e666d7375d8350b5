"""The failure detector of a broker's neighbours (`broker.cores.failures`): silence past
the bound, refused connects at once, clearing, restarts by incarnation, old heartbeats."""

from __future__ import annotations

import pytest

from broker.cores.failures import Change, FailureDetector


def detector() -> FailureDetector:
    return FailureDetector(["a,0", "b,0"], heartbeat=0.5, missed=3, start=10.0)


def test_a_silent_neighbour_is_suspected_only_past_missed_periods() -> None:
    d = detector()
    assert d.heard_at("a,0") is None
    d.heard("a,0", 10.4, 7)
    assert d.heard_at("a,0") == 10.4
    assert d.tick(11.5) == []  # 1.5 s: the bound itself, not past it
    assert d.tick(11.6) == [Change("b,0", "suspected", "silent")]  # never heard: counted from the start
    assert d.tick(12.0) == [Change("a,0", "suspected", "silent")]
    assert d.tick(13.0) == []  # suspected once
    assert d.heard("a,0", 13.1, 7) == [Change("a,0", "cleared")]
    assert d.suspected == {"b,0": "silent"}


def test_a_refused_connect_suspects_at_once_and_any_message_clears() -> None:
    d = detector()
    assert d.refused("a,0") == [Change("a,0", "suspected", "refused")]
    assert d.refused("a,0") == []
    assert d.heard("a,0", 10.1) == [Change("a,0", "cleared")]  # a broker message, no incarnation


def test_a_restart_faster_than_detection_is_noticed_and_an_old_heartbeat_ignored() -> None:
    d = detector()
    assert d.heard("a,0", 10.1, 100) == []
    assert d.heard("a,0", 10.3, 250) == [Change("a,0", "restarted")]
    assert d.heard("a,0", 10.4, 100) == []  # still in flight from before the restart
    assert d.incarnation["a,0"] == 250


def test_strangers_are_ignored_and_bad_settings_refused() -> None:
    d = detector()
    assert d.heard("z,9", 10.0, 1) == [] and d.refused("z,9") == [] and "z,9" not in d.last_heard
    with pytest.raises(ValueError):
        FailureDetector(["a,0"], heartbeat=0)
    with pytest.raises(ValueError):
        FailureDetector(["a,0"], heartbeat=1, missed=0)


def test_its_own_pause_is_not_blamed_on_the_neighbours() -> None:
    d = detector()
    d.heard("a,0", 10.0, 1)
    d.heard("b,0", 10.0, 1)
    assert d.tick(10.4) == []
    assert d.tick(30.0) == [] and d.pauses == 1  # stopped for 19.6 s: the neighbours were not silent
    assert d.tick(30.9) == []  # 0.4 s of silence before the pause, 0.9 after: 1.3 <= 1.5
    assert [c.neighbour for c in d.tick(31.2)] == ["a,0", "b,0"]  # now they are
