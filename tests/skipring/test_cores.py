"""Unit tests of the protocol cores against the paper's rules (paper 000, §2.2, §3.1, §3.2, §4.1)."""

from __future__ import annotations

import random

from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.buildsr import SkipRingNode, config_request_probability, shortcut_chain
from pubsub.skipring.labels import Label, l
from pubsub.skipring.messages import (
    CYC,
    LIN,
    Check,
    Contact,
    GetConfiguration,
    Introduce,
    IntroduceShortcut,
    Linearize,
    Ping,
    RemoveConnections,
    SetData,
    Subscribe,
    SuspectCrash,
    Unsubscribe,
)
from pubsub.skipring.nodecore import NodeCore
from pubsub.skipring.supervisor.core import SupervisorCore
from pubsub.skipring.supervisor.database import TopicDatabase

T = Topic("t")
SUP = Ref("sup")


def node(label: str, ref: str = "me") -> SkipRingNode:
    state = SkipRingNode(Ref(ref), T, SUP)
    state.label = Label(label)
    return state


def contact(label: str, ref: str) -> Contact:
    return Contact(Label(label), Ref(ref))


# --- §3.2.2 shortcut labels --------------------------------------------------------------------
def test_shortcut_computation_reproduces_the_worked_example() -> None:
    """1/4 with ring neighbours 3/16 and 5/16: shortcuts 1/8, 0 and 3/8, 1/2."""
    me = Label("01")
    assert shortcut_chain(me, Label("0011")) == (Label("001"), Label("0"))
    assert shortcut_chain(me, Label("0101")) == (Label("011"), Label("1"))


def test_shortcut_chain_across_the_wrap_at_zero() -> None:
    """Node 0 in SR(16): its left neighbour 15/16 leads to 7/8, 3/4 and 1/2."""
    assert shortcut_chain(Label("0"), Label("1111")) == (Label("111"), Label("11"), Label("1"))


def test_no_shortcut_towards_a_shorter_neighbour() -> None:
    assert shortcut_chain(Label("0011"), Label("01")) == ()


def test_node_fills_its_shortcut_table_from_its_ring_neighbours() -> None:
    state = node("01")
    state.left, state.right = contact("0011", "a"), contact("0101", "b")
    state.timeout(random.Random(0))
    assert set(state.shortcuts) == {Label("001"), Label("0"), Label("011"), Label("1")}


# --- §3.2.1 configuration requests ------------------------------------------------------------
def test_request_probability_classes_sum_below_one() -> None:
    assert config_request_probability(Label("0")) == 0.25
    assert config_request_probability(Label("011")) == 1 / (8 * 9)
    total = sum(
        count * config_request_probability(l(first))
        for first, count in [(0, 2)] + [(1 << (k - 1), 1 << (k - 1)) for k in range(2, 30)]
    )
    assert total < 1


def test_unlabelled_node_subscribes_on_timeout() -> None:
    state = SkipRingNode(Ref("me"), T, SUP)
    sends = state.timeout(random.Random(0))
    assert sends == [(SUP, Subscribe(T, Ref("me")))]


# --- §2.2 extended BuildRing -------------------------------------------------------------------
def test_check_with_a_wrong_label_is_answered_with_the_right_one() -> None:
    state = node("011")
    sends = state.handle(Check(T, contact("01", "a"), Label("1"), LIN))
    assert sends == [(Ref("a"), Introduce(T, contact("011", "me"), LIN))]


def test_check_with_the_right_label_links_the_sender() -> None:
    state = node("011")
    assert state.handle(Check(T, contact("01", "a"), Label("011"), LIN)) == []
    assert state.left == contact("01", "a")


def test_linearize_keeps_the_closer_node_and_delegates_the_farther() -> None:
    state = node("011")
    state.left = contact("01", "a")
    sends = state.handle(Linearize(T, contact("0101", "b")))  # 5/16 lies between 1/4 and 3/8
    assert state.left == contact("0101", "b")
    assert sends == [(Ref("b"), Linearize(T, contact("01", "a")))]
    sends = state.handle(Linearize(T, contact("001", "c")))  # 1/8 is farther than 5/16
    assert sends == [(Ref("b"), Linearize(T, contact("001", "c")))]


def test_a_corrected_label_moves_a_neighbour_to_the_other_side() -> None:
    state = node("011")
    state.left = contact("01", "a")
    state.handle(Introduce(T, contact("111", "a"), LIN))
    assert state.left is None and state.right == contact("111", "a")


def test_cyc_introduction_closes_the_ring_at_the_maximum() -> None:
    state = node("111")
    state.left = contact("11", "a")
    state.handle(Introduce(T, contact("0", "min"), CYC))
    assert state.ring == contact("0", "min")


def test_two_claims_of_one_label_go_to_the_supervisor() -> None:
    state = node("011")
    sends = state.handle(Linearize(T, contact("011", "twin")))
    assert sends == [
        (SUP, GetConfiguration(T, Ref("twin"))),
        (SUP, GetConfiguration(T, Ref("me"))),
    ]


def test_unlabelled_node_asks_to_be_forgotten() -> None:
    state = SkipRingNode(Ref("me"), T, SUP)
    assert state.handle(Introduce(T, contact("1", "a"), LIN)) == [
        (Ref("a"), RemoveConnections(T, Ref("me")))
    ]


# --- Alg. 4 SetData and IntroduceShortcut ---------------------------------------------------
def test_set_data_reports_a_closer_unknown_neighbour() -> None:
    """Request (iii): our stored left lies closer than the configured predecessor."""
    state = node("011")
    state.left = contact("0101", "stranger")
    sends = state.handle(SetData(T, contact("01", "p"), Label("011"), contact("1", "s")))
    assert (SUP, GetConfiguration(T, Ref("stranger"))) in sends
    assert state.right == contact("1", "s")


def test_set_data_at_the_minimum_closes_the_ring() -> None:
    state = SkipRingNode(Ref("me"), T, SUP)
    state.handle(SetData(T, contact("11", "max"), Label("0"), contact("01", "s")))
    assert state.ring == contact("11", "max") and state.right == contact("01", "s")
    assert state.left is None


def test_introduce_shortcut_replaces_a_wrong_partner_and_hands_it_back() -> None:
    state = node("01")
    state.shortcuts = {Label("0"): Ref("old")}
    sends = state.handle(IntroduceShortcut(T, contact("0", "new")))
    assert state.shortcuts[Label("0")] == Ref("new")
    assert sends == [(Ref("old"), Introduce(T, contact("01", "me"), LIN))]


def test_introduce_shortcut_for_an_unexpected_label_changes_nothing() -> None:
    state = node("01")
    assert state.handle(IntroduceShortcut(T, contact("111", "x"))) == []
    assert state.shortcuts == {} and state.left is None and state.right is None


# --- NodeCore: leaving (§4.1, Lemma 4.1) -----------------------------------------------------
def test_leave_waits_for_permission_then_releases_everyone() -> None:
    core = NodeCore(Ref("me"), SUP, rng=random.Random(0))
    core.join(T)
    core.handle(SetData(T, contact("0", "a"), Label("1"), contact("0", "a")), 0.0)
    assert core.leave(T) == [(SUP, Unsubscribe(T, Ref("me")))]
    assert T in core.instances
    sends = core.handle(SetData(T, None, None, None), 1.0)
    assert T not in core.instances
    assert (Ref("a"), RemoveConnections(T, Ref("me"))) in sends


def test_messages_for_a_topic_not_run_are_answered_with_remove_connections() -> None:
    core = NodeCore(Ref("me"), SUP, rng=random.Random(0))
    assert core.handle(Introduce(T, contact("1", "a"), LIN), 0.0) == [
        (Ref("a"), RemoveConnections(T, Ref("me")))
    ]
    assert core.handle(SetData(T, None, Label("1"), None), 0.0) == [
        (SUP, Unsubscribe(T, Ref("me")))
    ]


# --- NodeCore: the arc view (issue 11) -----------------------------------------------------------
def test_the_arc_view_is_made_again_exactly_when_the_ring_state_changes() -> None:
    core = NodeCore(Ref("me"), SUP, rng=random.Random(0))

    def made_afresh() -> object:
        saved = dict(core._arc_views)
        core._arc_views.clear()
        try:
            return core._arc_view(T)
        finally:
            core._arc_views.update(saved)

    core.join(T)
    assert core._arc_view(T) is None  # no label yet
    core.handle(SetData(T, contact("0", "a"), Label("1"), contact("0", "a")), 0.0)
    view = core._arc_view(T)
    assert view is not None and view.has_successor and (Label("0").position, Ref("a")) in view.neighbours
    assert core._arc_view(T) is view  # nothing changed: the same view
    instance = core.instances[T]
    steps = [
        lambda: setattr(instance, "right", contact("11", "b")),  # a new contact
        lambda: instance.shortcuts.__setitem__(Label("01"), None),  # a shortcut, holder unknown
        lambda: instance.shortcuts.__setitem__(Label("01"), Ref("c")),  # its holder found, in place
        lambda: setattr(instance, "label", Label("10")),  # relabelled
        lambda: setattr(instance, "ring", None),
        lambda: setattr(instance, "right", None),  # no successor left
    ]
    for step in steps:
        step()
        view = core._arc_view(T)
        assert view == made_afresh()
        assert core._arc_view(T) is view
    assert view is not None and not view.has_successor and (Label("01").position, Ref("c")) in view.neighbours
    assert view.me == Label("10").position and view.levels == 2
    instance.label = None
    assert core._arc_view(T) is None


# --- supervisor database (§3.1) --------------------------------------------------------------
def database(rows: list[tuple[str, str | None]]) -> TopicDatabase:
    db = TopicDatabase(T, None)
    for bits, ref in rows:
        db.put(Label(bits), None if ref is None else Ref(ref))
    return db


def labels_of(db: TopicDatabase) -> dict[str, str | None]:
    return {label.bits: ref for label, ref in db.members()}


def test_repair_i_drops_tuples_without_subscriber() -> None:
    db = database([("0", "a"), ("1", None), ("01", "b")])
    db.check_labels()
    assert db.is_legitimate() and sorted(labels_of(db)) == ["0", "1"]


def test_repair_ii_keeps_the_lowest_of_several_labels() -> None:
    db = database([("0", "a"), ("1", "b"), ("01", "a")])
    db.check_multiple_copies(Ref("a"))
    assert labels_of(db) == {"0": "a", "1": "b"}


def test_repair_iii_fills_missing_labels_from_the_highest() -> None:
    db = database([("0", "a"), ("11", "b"), ("001", "c")])  # l(1) missing, l(3) and l(4) too high
    relabelled = db.check_labels()
    assert db.is_legitimate()
    assert labels_of(db) == {"0": "a", "1": "c", "01": "b"}
    assert relabelled == [Ref("c"), Ref("b")]


def test_repair_iv_relabels_labels_that_are_no_image_of_l() -> None:
    db = database([("0", "a"), ("10", "b")])
    db.check_labels()
    assert labels_of(db) == {"0": "a", "1": "b"}


# --- supervisor core (Alg. 3, §4.1) ----------------------------------------------------------
def test_subscribe_appends_l_n_and_configures_the_newcomer() -> None:
    core = SupervisorCore(SUP, rng=random.Random(0))
    for i, ref in enumerate("abc"):
        sends = core.handle(Subscribe(T, Ref(ref)), 0.0)
        assert len(sends) == 1 and sends[0].msg.label == l(i)
    assert core.drain_changes() == [(T, "0", "a"), (T, "1", "b"), (T, "01", "c")]


def test_unsubscribe_moves_the_holder_of_the_last_label() -> None:
    core = SupervisorCore(SUP, rng=random.Random(0))
    for ref in "abcd":
        core.handle(Subscribe(T, Ref(ref)), 0.0)
    sends = core.handle(Unsubscribe(T, Ref("a")), 0.0)  # a holds l(0); d holds l(3) = "11"
    assert {s.dest for s in sends} == {Ref("d"), Ref("a")}
    assert core.topics[T].label_of(Ref("d")) == Label("0")
    assert SetData(T, None, None, None) in [s.msg for s in sends if s.dest == "a"]


def test_unknown_subscriber_asking_for_its_configuration_gets_bottom() -> None:
    core = SupervisorCore(SUP, rng=random.Random(0))
    core.handle(Subscribe(T, Ref("a")), 0.0)
    assert core.handle(GetConfiguration(T, Ref("z")), 0.0) == [
        (Ref("z"), SetData(T, None, None, None))
    ]


def test_timeout_sends_budget_configurations_round_robin() -> None:
    core = SupervisorCore(SUP, config_budget=2, rng=random.Random(0))
    for ref in "abcde":
        core.handle(Subscribe(T, Ref(ref)), 0.0)
    seen = [s.dest for tick in range(5) for s in core.timeout(float(tick))]
    assert len(seen) == 10 and set(seen) == set("abcde")


def test_crash_verified_by_probe_removes_the_subscriber() -> None:
    core = SupervisorCore(SUP, rng=random.Random(0), probe_timeout=1.0)
    for ref in "abc":
        core.handle(Subscribe(T, Ref(ref)), 0.0)
    sends = core.handle(SuspectCrash(Ref("b")), 0.0)
    assert [type(s.msg) for s in sends] == [Ping]
    core.timeout(2.0)
    assert Ref("b") not in core.topics[T] and core.crashes_detected == 1
