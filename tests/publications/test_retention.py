"""The retention window (`pubsub.publications.retention`) and its use by the anti-entropy core."""

from __future__ import annotations

import random

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.antientropy import AntiEntropy
from pubsub.publications.messages import Publication, Publish
from pubsub.publications.retention import (
    MAX_KEY,
    NOTHING,
    NodeRetention,
    Policy,
    Retention,
    RetentionTable,
    Window,
    horizon,
    quantum_ms,
)
from pubsub.publications.topicstate import make_publication

T = Topic("t")


def pubs(n: int, start_ms: int = 1_000, size: int = 1, seed: int = 0) -> list[Publication]:
    rng = random.Random(seed)
    return [
        make_publication(Ref(f"p{rng.randrange(3)}:1"), i, bytes(rng.randrange(1, size + 1)), start_ms + rng.randrange(50))
        for i in range(n)
    ]


def kept(policy: Policy, held: list[Publication], wall_ms: int = 0) -> set[Publication]:
    window = Window(policy)
    gone = window.advance(wall_ms, lambda: held)
    return set(held) - set(gone)


def test_max_age_horizon_moves_in_steps_and_never_removes_early() -> None:
    policy = Policy(max_age_ms=8_000)
    assert quantum_ms(8_000) == 1_000
    assert horizon(policy, 20_000) == (11_999, MAX_KEY)
    assert horizon(policy, 20_999) == (11_999, MAX_KEY)  # the same within a step
    for wall in range(10_000, 30_000, 137):
        through_ms = horizon(policy, wall)[0]
        assert wall - 8_000 - quantum_ms(8_000) <= through_ms < wall - 8_000  # kept up to one step longer


def test_purge_and_horizon_only_move_forward() -> None:
    window = Window(Policy(purged_ms=5_000))
    held = pubs(10, start_ms=4_990)
    gone = window.advance(0, lambda: held)
    assert {p for p in held if p.published_ms <= 5_000} == set(gone)
    retention = NodeRetention()
    retention.windows[T] = window
    assert retention.configure(Retention(T, 0, 0, 0, 1_000)) is window  # an older purge ...
    assert window.policy.purged_ms == 5_000  # ... changes nothing
    assert not window.admits(make_publication(Ref("a:1"), 99, b"x", 4_000))
    assert window.admits(make_publication(Ref("a:1"), 99, b"x", 6_000))


@pytest.mark.parametrize("policy", [Policy(max_count=7), Policy(max_bytes=40), Policy(max_count=9, max_bytes=60)])
def test_count_and_bytes_are_monotone_on_the_set(policy: Policy) -> None:
    """A node deciding on a subset removes only what the whole set removes, and the same set
    gives the same result at every node, whatever order it arrived in."""
    for seed in range(30):
        everything = pubs(25, size=8, seed=seed)
        final = kept(policy, everything)
        rng = random.Random(seed)
        subset = rng.sample(everything, rng.randrange(len(everything)))
        window = Window(policy)
        removed = window.advance(0, lambda s=subset: s)  # type: ignore[misc]
        assert not set(removed) & final
        for p in final:
            assert window.admits(p), "a publication the whole set keeps is refused"
        shuffled = list(everything)
        rng.shuffle(shuffled)
        assert kept(policy, shuffled) == final


def test_anti_entropy_refuses_what_lies_at_or_before_the_horizon() -> None:
    a = AntiEntropy(Ref("a:1"), T, flooding=False)
    b = AntiEntropy(Ref("b:1"), T, flooding=False)
    held = pubs(20, start_ms=1_000)
    for p in held:
        assert a.store(p) and b.store(p)
    retention = NodeRetention()
    retention.configure(Retention(T, 0, 12, 0, 0))
    window = retention.window(T)
    assert window is not None
    a.retention = window
    assert retention.advance(T, a, 0.0) == 8
    assert len(a.trie) == 12
    b.handle(Publish(T, held))  # b still holds all: nothing changes there
    a.handle(Publish(T, held))  # b offers everything to a: the 8 removed are refused
    assert len(a.trie) == 12 and a.counters["retention_refused"] == 8
    assert {p for _, p in a.trie.items()} == kept(Policy(max_count=12), held)
    assert window.through != NOTHING and retention.drain_changes()[0][0] == T


def test_the_supervisor_table() -> None:
    table = RetentionTable()
    assert table.message(T) is None
    table.set(T, max_age_ms=60_000)
    table.set(T, max_count=5)
    policy = table.purge(T, 123)
    assert policy == Policy(60_000, 5, 0, 123)
    assert table.message(T) == Retention(T, 60_000, 5, 0, 123)
    assert table.drain_changes() == [(T, policy)]
    with pytest.raises(ValueError):
        table.set(T, max_bytes=-1)
    other = RetentionTable()
    assert other.load([(T, 60_000, 5, 0, 123), ("u", -1, 0, 0, 0)]) == 1
    assert other.get(T) == policy


def test_a_max_age_lifted_or_raised_becomes_a_purge_point() -> None:
    table = RetentionTable()
    table.set(T, max_age_ms=80_000, wall_ms=1_000_000)
    assert table.get(T) == Policy(80_000, 0, 0, 0)
    table.set(T, max_age_ms=40_000, wall_ms=1_000_000)  # tightened: nothing to keep removed
    assert table.get(T) == Policy(40_000, 0, 0, 0)
    lifted_at = horizon(Policy(40_000), 2_000_000)[0]  # what the 40 s limit had removed
    assert table.set(T, max_age_ms=0, wall_ms=2_000_000) == Policy(0, 0, 0, lifted_at)
    table.set(T, max_age_ms=10_000)
    assert table.set(T, max_age_ms=60_000, wall_ms=3_000_000).purged_ms == horizon(Policy(10_000), 3_000_000)[0]


def test_only_an_admin_changes_retention_under_tls() -> None:
    from pubsub.publications.retention import PurgeTopic, SetRetention
    from pubsub.runtime.identity import Identity
    from pubsub.runtime.permissions import Authority
    from pubsub.supervisor.app import SupervisorApp

    app = SupervisorApp.__new__(SupervisorApp)  # `refuses` reads nothing of the app
    rules = Authority(None)
    for msg in (PurgeTopic(T), SetRetention(T, 1_000)):
        refusal = app.refuses(msg, Identity("client", "alice"), rules)
        assert refusal is not None and refusal.code == "permission_denied"  # type: ignore[attr-defined]
        assert app.refuses(msg, Identity("admin", "operator"), rules) is None
