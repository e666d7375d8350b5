"""The stand-ins for paper 003's workloads (§6.1): BFS-sampled social graphs as topics and
the Poisson churn trace."""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from functools import cache

import pytest

from pubsub.omen.workloads import (
    OPEN_PARAMETERS,
    Kind,
    SocialShape,
    SocialWorkload,
    bfs_sample,
    directed_holme_kim,
    facebook,
    holme_kim,
    poisson_churn,
    social_workload,
    twitter,
)


@cache
def sample(kind: Kind, target: int, seed: int) -> SocialWorkload:
    return facebook(target, seed) if kind == "facebook" else twitter(target, seed)


def connected(nodes: set[str], relations: tuple[tuple[str, str], ...]) -> bool:
    adjacent: dict[str, set[str]] = defaultdict(set)
    for a, b in relations:
        adjacent[a].add(b)
        adjacent[b].add(a)
    start = min(nodes)
    seen, stack = {start}, [start]
    while stack:
        for other in adjacent[stack.pop()] - seen:
            seen.add(other)
            stack.append(other)
    return seen == nodes


@pytest.mark.parametrize("kind", ["facebook", "twitter"])
def test_workloads_are_deterministic_per_seed(kind: Kind) -> None:
    one = social_workload(SocialShape(kind, 300), 4)
    two = social_workload(SocialShape(kind, 300), 4)
    other = social_workload(SocialShape(kind, 300), 5)
    assert one.topics_of == two.topics_of and one.relations == two.relations
    assert one.describe() == two.describe()
    assert one.topics_of != other.topics_of


@pytest.mark.parametrize(("kind", "target"), [("facebook", 1000), ("twitter", 1000), ("facebook", 10000)])
def test_bfs_samples_are_connected_and_of_the_target_size(kind: Kind, target: int) -> None:
    workload = sample(kind, target, 1)
    assert abs(len(workload.topics_of) - target) <= 0.05 * target
    assert connected(set(workload.topics_of), workload.relations)  # weakly, for follows
    assert abs(len(workload.topics) - target) <= 0.2 * target  # |T| ≈ |V| as in §6.1


@pytest.mark.parametrize(("kind", "target"), [("facebook", 1000), ("twitter", 1000), ("facebook", 10000)])
def test_degree_distribution_is_heavy_tailed(kind: Kind, target: int) -> None:
    degrees = list(sample(kind, target, 1).degrees().values())
    assert max(degrees) > 10 * statistics.median(degrees)


def test_facebook_friends_subscribe_to_each_other_not_to_themselves() -> None:
    workload = sample("facebook", 1000, 1)
    friends = {(a, b) for a, b in workload.relations} | {(b, a) for a, b in workload.relations}
    for node, topics in workload.topics_of.items():
        assert node not in topics
        assert topics == {b for a, b in friends if a == node}
        for topic in topics:
            assert node in workload.topics_of[topic]


def test_twitter_followers_subscribe_to_the_followed() -> None:
    workload = sample("twitter", 1000, 1)
    follows = set(workload.relations)
    assert any((b, a) not in follows for a, b in follows)  # relations are one-way
    assert any((b, a) in follows for a, b in follows)  # some are followed back
    for node, topics in workload.topics_of.items():
        assert topics == {b for a, b in follows if a == node}
        assert node not in topics


def test_self_subscription_is_an_option() -> None:
    workload = social_workload(SocialShape("facebook", 200, self_subscribe=True), 2)
    assert all(node in topics for node, topics in workload.topics_of.items())


def test_describe_names_every_open_parameter() -> None:
    lines = sample("twitter", 1000, 1).describe()
    assert lines[0].startswith("twitter workload, seed 1: BFS sample of 1000 nodes")
    for key in OPEN_PARAMETERS:
        assert any(f"open parameter, {key}:" in line for line in lines)


def test_generators_have_heavy_tails_and_no_duplicate_links() -> None:
    rng = random.Random(0)
    graph = holme_kim(3000, 5, 0.5, rng)
    assert all(len(set(out)) == len(out) and i not in out for i, out in enumerate(graph))
    assert all(i in graph[j] for i, out in enumerate(graph) for j in out)
    degrees = [len(out) for out in graph]
    assert min(degrees) >= 5 and max(degrees) > 10 * statistics.median(degrees)
    follows = directed_holme_kim(3000, 5, 0.5, 0.2, rng)
    assert all(len(set(out)) == len(out) and i not in out for i, out in enumerate(follows))
    followers = [0] * 3000
    for out in follows:
        for v in out:
            followers[v] += 1
    assert max(followers) > 10 * statistics.median(followers)


def test_bfs_sample_grows_the_largest_part_when_the_seeds_do_not_meet() -> None:
    """Two separate cliques of 20, seeds in both: the sample is the target, all in one."""
    graph = [[j for j in range(20) if j != i] for i in range(20)]
    graph += [[j for j in range(20, 40) if j != i] for i in range(20, 40)]
    for seed in range(5):
        nodes = bfs_sample(graph, 15, 10, random.Random(seed))
        assert len(nodes) == 15
        assert all(n < 20 for n in nodes) or all(n >= 20 for n in nodes)


@pytest.mark.parametrize("rate", [2.0, 1 / 600])
def test_churn_inter_arrivals_have_the_mean_asked(rate: float) -> None:
    trace = poisson_churn(sample("facebook", 1000, 1).topics_of, 5000, 7, rate=rate)
    gaps = trace.intervals()
    assert len(gaps) == 5000 and all(g > 0 for g in gaps)
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / rate, rel=0.1)  # exponential: sd = mean


def test_churn_leaves_present_nodes_and_joins_absent_ones() -> None:
    topics_of = sample("facebook", 1000, 1).topics_of
    trace = poisson_churn(topics_of, 2000, 8)
    assert len(trace.initial) == 900
    present = set(trace.initial)
    rejoins = 0
    departed: set[str] = set()
    for event in trace.events:
        assert event.topics == topics_of[event.node]
        if event.kind == "leave":
            assert event.node in present
            present.discard(event.node)
            departed.add(event.node)
        else:
            assert event.node not in present
            rejoins += event.node in departed
            present.add(event.node)
    leaves = sum(e.kind == "leave" for e in trace.events)
    assert leaves / len(trace.events) == pytest.approx(0.5, abs=0.05)
    assert rejoins > 0  # joins are held-out nodes and re-joins
    assert poisson_churn(topics_of, 2000, 8) == trace
    assert poisson_churn(topics_of, 2000, 9) != trace
    assert "2000 events" in trace.describe()[0]


def test_churn_turns_a_leave_with_nobody_present_into_a_join_and_back() -> None:
    topics_of = {f"n{i}": frozenset({"t"}) for i in range(3)}
    for leave_probability in (0.9, 0.1):
        trace = poisson_churn(topics_of, 200, 1, leave_probability=leave_probability, held_out=0.0)
        present = set(trace.initial)
        for event in trace.events:
            assert (event.node in present) == (event.kind == "leave")
            (present.discard if event.kind == "leave" else present.add)(event.node)
        assert {e.kind for e in trace.events} == {"join", "leave"}
    with pytest.raises(ValueError):
        poisson_churn(topics_of, 1, 1, rate=0.0)
