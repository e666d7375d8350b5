"""The supervisor's raised configuration budget while it repairs (issue 14, item 2).

Paper 000: Alg. 3 l.3 sends one configuration per Timeout; Theorem 3.1 bounds the load in the
legitimate state.  `SupervisorCore` raises the budget only on repair work (§3.1 database
repairs, label conflicts, a Subscribe from a member that lost its label, request bursts) and
is back at the paper's budget after one round-robin pass without work.  Ordinary
Subscribe / Unsubscribe (§4.1, Theorem 4.3) and crash removal (§3.3) are no repair work.
"""

from __future__ import annotations

import random

from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.labels import Label, l
from pubsub.skipring.messages import GetConfiguration, SetData, Subscribe, Unsubscribe
from pubsub.skipring.supervisor.core import BOOST_PASS_INTERVALS, REQUEST_BURST, SupervisorCore

T = Topic("t")
SUP = Ref("sup")


def populated(n: int, **options: object) -> SupervisorCore:
    core = SupervisorCore(SUP, rng=random.Random(0), **options)  # type: ignore[arg-type]
    for i in range(n):
        core.handle(Subscribe(T, Ref(f"v{i}")), 0.0)
    return core


def configurations(core: SupervisorCore, now: float) -> int:
    return sum(isinstance(s.msg, SetData) for s in core.timeout(now))


def test_legitimate_database_keeps_the_papers_budget() -> None:
    core = populated(64)
    assert core.topics[T].is_legitimate()
    sent = [configurations(core, float(t)) for t in range(1, 40)]
    assert sent == [1] * 39
    assert core.effective_budget(T) == 1


def test_joins_and_leaves_are_no_repair_work() -> None:
    """Theorem 4.3: a join or a leave costs the supervisor a constant number of messages."""
    core = populated(64)
    core.timeout(1.0)
    core.handle(Subscribe(T, Ref("new")), 1.5)
    core.handle(Unsubscribe(T, Ref("v3")), 1.5)
    assert [configurations(core, float(t)) for t in range(2, 10)] == [1] * 8


def test_corrupted_database_raises_the_budget_then_falls_back() -> None:
    n = 256
    core = populated(n)
    db = core.topics[T]
    for i in range(0, n, 2):  # (iii) of §3.1: labels out of l(0..n-1), gaps everywhere
        ref = db.holder(l(i))
        assert ref is not None
        db.remove(l(i))
        db.put(Label("1" * 12 + format(i, "b")), ref)
    assert not db.is_legitimate()
    sent = [configurations(core, float(t)) for t in range(1, 60)]
    ceiling = n // BOOST_PASS_INTERVALS
    assert max(sent) == ceiling  # doubled up to ceil(n / BOOST_PASS_INTERVALS)
    assert sent[:3] == [2, 4, 8]
    assert db.is_legitimate()
    # one pass of n configurations at the raised budget, then the paper's budget again
    first_base = next(t for t in range(len(sent)) if t > 3 and sent[t] == 1)
    assert sum(sent[:first_base]) >= n
    assert all(s == 1 for s in sent[first_base:])
    assert core.effective_budget(T) == 1


def test_member_that_lost_its_label_is_repair_work() -> None:
    core = populated(64)
    core.timeout(1.0)
    core.handle(Subscribe(T, Ref("v5")), 1.5)  # v5 is a member: it lost its label
    assert configurations(core, 2.0) == 2


def test_request_burst_is_repair_work_and_single_requests_are_not() -> None:
    core = populated(64)
    core.timeout(1.0)
    core.handle(GetConfiguration(T, Ref("v1")), 1.2)
    assert configurations(core, 2.0) == 1
    for i in range(REQUEST_BURST):
        core.handle(GetConfiguration(T, Ref(f"v{i}")), 2.5)
    assert configurations(core, 3.0) == 2


def test_max_config_budget_none_is_the_paper() -> None:
    core = populated(64, max_config_budget=None)
    db = core.topics[T]
    ref = db.holder(l(0))
    assert ref is not None
    db.remove(l(0))
    db.put(Label("111111111"), ref)
    assert [configurations(core, float(t)) for t in range(1, 6)] == [1] * 5
    assert "raised_budgets" in core.status()


def test_max_config_budget_caps_the_raise() -> None:
    core = populated(1024, max_config_budget=16)
    for i in range(REQUEST_BURST):
        core.handle(GetConfiguration(T, Ref(f"v{i}")), 0.5)
    sent = []
    for t in range(1, 8):
        for i in range(REQUEST_BURST):  # keeps the work going
            core.handle(GetConfiguration(T, Ref(f"v{i}")), t - 0.5)
        sent.append(configurations(core, float(t)))
    assert max(sent) == 16
