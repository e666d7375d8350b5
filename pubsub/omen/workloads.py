"""Synthetic stand-ins for paper 003's workloads (§6.1), whose traces cannot be fetched
here: social graphs sampled by breadth-first search (FB 1K/10K, TW 1K/10K) and a Poisson
churn trace in place of the Google cluster trace.

Social graphs.  A large graph with a heavy-tailed degree distribution is generated first:

* Facebook-style: undirected friendships from a Holme-Kim process (preferential
  attachment, each new node making `m` links, each link after the first closing a
  triangle with probability `triad`, which gives the clustering of a social graph);
* Twitter-style: directed follows from the same process, where a new node follows `m`
  users chosen by their number of followers (plus one) or, with probability `triad`, a
  user that the user it followed last follows; each follow is returned with probability
  `reciprocity`.

Then, as the paper does, a few random seeds start a breadth-first search that runs until
the target number of nodes, and the sample keeps every relation among its nodes.  Each
user is a topic: Facebook-style, a user's friends subscribe to its topic, so a node's
subscriptions are its friends' topics; Twitter-style, a node subscribes to the topics of
the users it follows.  A topic nobody in the sample subscribes to is no topic.

Churn.  Events come at exponential inter-arrival times (a Poisson process of a given
rate).  Each is a leave of a uniformly random present node or a join of a uniformly random
absent node of the sample, with its subscriptions from the sample: a node held out of the
initial overlay or a node that left earlier (a re-join).

The paper leaves the values below open; they are `OPEN_PARAMETERS`, and `describe()` of
each workload prints them with how it was made.  Everything is drawn from one seeded
`random.Random`: a workload is a function of its parameters and seed.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["facebook", "twitter"]
KINDS: tuple[Kind, ...] = ("facebook", "twitter")

#: The large graph is this many times the target sample (the paper samples 1K and 10K users
#: out of 3M and 41.7M).
BASE_FACTOR = 10
#: Links per new node: the Facebook set has about 19 friends a user (28.3M relations, 3M
#: users), the Twitter set about 35 followees.
FACEBOOK_LINKS = 10
TWITTER_FOLLOWS = 12
TRIAD_PROBABILITY = 0.5
RECIPROCITY = 0.2
SEEDS = 3
SELF_SUBSCRIBE = False
HELD_OUT = 0.1
LEAVE_PROBABILITY = 0.5
#: Events per second: one every ten minutes (§3.1: intervals of tens of minutes).
CHURN_RATE = 1 / 600

OPEN_PARAMETERS = {
    "social graph": (
        f"Holme-Kim preferential attachment, {BASE_FACTOR}x the target nodes, triad closure "
        f"p={TRIAD_PROBABILITY}; Facebook m={FACEBOOK_LINKS} undirected links per new node; Twitter "
        f"m={TWITTER_FOLLOWS} follows per new node by followers+1, follow-back p={RECIPROCITY}"
    ),
    "BFS sample": (
        f"{SEEDS} uniformly random seeds, one BFS from all of them (direction ignored), stopped at exactly "
        "the target; if the seeds' parts did not meet, the largest part is grown by BFS to the target"
    ),
    "own topic": "a user does not subscribe to its own topic" if not SELF_SUBSCRIBE else "a user subscribes to its own",
    "topics": "one per sampled user with at least one subscriber in the sample",
    "churn": (
        f"Poisson events at rate {CHURN_RATE:.5f}/s; leave with p={LEAVE_PROBABILITY} (a uniform present "
        f"node), else join (a uniform absent node: {HELD_OUT:.0%} of the sample is held out of the initial "
        "overlay, and nodes that left may re-join with their subscriptions); a leave with nobody present or "
        "a join with nobody absent is the other kind"
    ),
}


# ---------------------------------------------------------------------- generators
def holme_kim(nodes: int, links: int, triad: float, rng: random.Random) -> list[list[int]]:
    """An undirected Holme-Kim graph on `nodes` nodes: adjacency lists, no duplicates."""
    if not 1 <= links < nodes:
        raise ValueError("need 1 <= links < nodes")
    adjacency: list[list[int]] = [[] for _ in range(nodes)]
    ends: list[int] = []  # every edge's two ends: a uniform pick is a pick by degree
    for u in range(links + 1):  # a first clique of links + 1 nodes
        for v in range(u):
            adjacency[u].append(v)
            adjacency[v].append(u)
            ends += (u, v)
    for new in range(links + 1, nodes):
        chosen: set[int] = set()
        last = -1
        while len(chosen) < links:
            target = -1
            if last >= 0 and rng.random() < triad:
                options = [w for w in adjacency[last] if w not in chosen]
                if options:
                    target = rng.choice(options)
            if target < 0:
                target = rng.choice(ends)
                if target in chosen:
                    continue
            chosen.add(target)
            last = target
        for target in sorted(chosen):
            adjacency[new].append(target)
            adjacency[target].append(new)
            ends += (new, target)
    return adjacency


def directed_holme_kim(
    nodes: int, follows: int, triad: float, reciprocity: float, rng: random.Random
) -> list[list[int]]:
    """A directed follow graph: out-lists (who each node follows), no duplicates."""
    if not 1 <= follows < nodes:
        raise ValueError("need 1 <= follows < nodes")
    following: list[list[int]] = [[] for _ in range(nodes)]
    known: list[set[int]] = [set() for _ in range(nodes)]
    pool: list[int] = []  # each node once, plus once per follower: a pick by followers + 1

    def follow(u: int, v: int) -> None:
        following[u].append(v)
        known[u].add(v)
        pool.append(v)

    for u in range(follows + 1):
        pool.append(u)
        for v in range(follows + 1):
            if u != v:
                follow(u, v)
    for new in range(follows + 1, nodes):
        chosen: list[int] = []
        last = -1
        while len(chosen) < follows:
            target = -1
            if last >= 0 and rng.random() < triad:
                options = [w for w in following[last] if w != new and w not in known[new]]
                if options:
                    target = rng.choice(options)
            if target < 0:
                target = rng.choice(pool)
                if target in known[new]:
                    continue
            follow(new, target)
            chosen.append(target)
            last = target
        pool.append(new)
        for target in chosen:
            if rng.random() < reciprocity:
                follow(target, new)
    return following


def bfs_sample(adjacency: Sequence[Sequence[int]], target: int, seeds: int, rng: random.Random) -> list[int]:
    """`target` nodes reached by one breadth-first search from `seeds` random nodes over
    the undirected `adjacency`, sorted; connected (see `OPEN_PARAMETERS`)."""
    if not 1 <= target <= len(adjacency):
        raise ValueError("need 1 <= target <= nodes")
    starts = rng.sample(range(len(adjacency)), min(seeds, target))
    sample = _grow(adjacency, set(starts), deque(starts), target)
    parts = _parts(adjacency, sample)
    if len(parts) > 1:
        largest = max(parts, key=lambda part: (len(part), -min(part)))
        sample = _grow(adjacency, set(largest), deque(sorted(largest)), target)
    return sorted(sample)


def _grow(adjacency: Sequence[Sequence[int]], sample: set[int], frontier: deque[int], target: int) -> set[int]:
    while frontier and len(sample) < target:
        here = frontier.popleft()
        for there in adjacency[here]:
            if there not in sample:
                sample.add(there)
                frontier.append(there)
                if len(sample) == target:
                    break
    return sample


def _parts(adjacency: Sequence[Sequence[int]], nodes: set[int]) -> list[set[int]]:
    unseen, parts = set(nodes), []
    while unseen:
        start = min(unseen)
        unseen.discard(start)
        part, stack = {start}, [start]
        while stack:
            for there in adjacency[stack.pop()]:
                if there in unseen:
                    unseen.discard(there)
                    part.add(there)
                    stack.append(there)
        parts.append(part)
    return parts


def _undirected(following: Sequence[Sequence[int]]) -> list[list[int]]:
    both: list[set[int]] = [set(out) for out in following]
    for u, out in enumerate(following):
        for v in out:
            both[v].add(u)
    return [sorted(s) for s in both]


def _name(i: int) -> str:
    return f"u{i:07d}"


# ---------------------------------------------------------------------- social workloads
@dataclass(frozen=True)
class SocialShape:
    """How a social workload is made; the defaults are `OPEN_PARAMETERS`."""

    kind: Kind = "facebook"
    target: int = 1000
    base_factor: int = BASE_FACTOR
    links: int = 0  # 0: FACEBOOK_LINKS or TWITTER_FOLLOWS by kind
    triad: float = TRIAD_PROBABILITY
    reciprocity: float = RECIPROCITY
    seeds: int = SEEDS
    self_subscribe: bool = SELF_SUBSCRIBE

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind is one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.target < 2 or self.base_factor < 1 or self.seeds < 1:
            raise ValueError("need target >= 2, base_factor >= 1, seeds >= 1")

    @property
    def per_node(self) -> int:
        if self.links:
            return self.links
        return FACEBOOK_LINKS if self.kind == "facebook" else TWITTER_FOLLOWS

    @property
    def base_nodes(self) -> int:
        return max(self.target, self.base_factor * self.target, self.per_node + 2)


@dataclass(frozen=True)
class SocialWorkload:
    """A BFS-sampled social graph as topics (§6.1): `topics_of` every sampled node, and the
    relations kept (`relations`: friendships (a, b) with a < b, or follows (follower,
    followee))."""

    shape: SocialShape
    seed: int
    base_edges: int
    topics_of: dict[str, frozenset[str]]
    relations: tuple[tuple[str, str], ...]

    @property
    def nodes(self) -> list[str]:
        return sorted(self.topics_of)

    @property
    def topics(self) -> set[str]:
        return {t for ts in self.topics_of.values() for t in ts}

    def degrees(self) -> dict[str, int]:
        """Friends in the sample (Facebook), or followers in the sample (Twitter): the
        size of each user's topic, before `self_subscribe`."""
        count = dict.fromkeys(self.topics_of, 0)
        for a, b in self.relations:
            count[b] += 1
            if self.shape.kind == "facebook":
                count[a] += 1
        return count

    def describe(self) -> list[str]:
        s = self.shape
        degrees = sorted(self.degrees().values())
        sizes = sorted(len(ts) for ts in self.topics_of.values())
        what = "friends" if s.kind == "facebook" else "followers"
        lines = [
            f"{s.kind} workload, seed {self.seed}: BFS sample of {len(self.topics_of)} nodes (target {s.target}) "
            f"from {s.seeds} seeds out of a generated graph of {s.base_nodes} nodes and {self.base_edges} relations",
            f"  relations kept among sampled nodes: {len(self.relations)}; topics: {len(self.topics)}",
            f"  {what} per user: median {statistics.median(degrees):g}, max {degrees[-1]}",
            f"  subscriptions per node: mean {statistics.fmean(sizes):.1f}, max {sizes[-1]}",
        ]
        lines += [f"  open parameter, {key}: {value}" for key, value in OPEN_PARAMETERS.items()]
        return lines


def social_workload(shape: SocialShape, seed: int) -> SocialWorkload:
    """Generate the large graph, BFS-sample it and turn users into topics (§6.1)."""
    rng = random.Random(seed)
    n, m = shape.base_nodes, shape.per_node
    if shape.kind == "facebook":
        adjacency = holme_kim(n, m, shape.triad, rng)
        base_edges = sum(len(a) for a in adjacency) // 2
        sample = bfs_sample(adjacency, shape.target, shape.seeds, rng)
        inside = set(sample)
        relations = tuple(
            (_name(u), _name(v)) for u in sample for v in sorted(adjacency[u]) if v > u and v in inside
        )
    else:
        following = directed_holme_kim(n, m, shape.triad, shape.reciprocity, rng)
        base_edges = sum(len(out) for out in following)
        sample = bfs_sample(_undirected(following), shape.target, shape.seeds, rng)
        inside = set(sample)
        relations = tuple((_name(u), _name(v)) for u in sample for v in sorted(following[u]) if v in inside)
    subscriptions: dict[str, set[str]] = {_name(u): set() for u in sample}
    for a, b in relations:
        subscriptions[a].add(b)  # a follows b / a is b's friend: a subscribes to b's topic
        if shape.kind == "facebook":
            subscriptions[b].add(a)
    if shape.self_subscribe:
        for node, topics in subscriptions.items():
            topics.add(node)
    topics_of = {node: frozenset(topics) for node, topics in subscriptions.items()}
    return SocialWorkload(shape, seed, base_edges, topics_of, relations)


def facebook(target: int = 1000, seed: int = 0) -> SocialWorkload:
    """FB 1K / FB 10K's stand-in."""
    return social_workload(SocialShape("facebook", target), seed)


def twitter(target: int = 1000, seed: int = 0) -> SocialWorkload:
    """TW 1K / TW 10K's stand-in."""
    return social_workload(SocialShape("twitter", target), seed)


# ---------------------------------------------------------------------- churn
@dataclass(frozen=True)
class ChurnEvent:
    """One event at `time` seconds: `node` joins or leaves; `topics` are its subscriptions."""

    time: float
    kind: Literal["join", "leave"]
    node: str
    topics: frozenset[str]


@dataclass(frozen=True)
class ChurnTrace:
    """The initial overlay's nodes and the events after it (the Google trace's stand-in)."""

    seed: int
    rate: float
    leave_probability: float
    held_out: float
    initial: dict[str, frozenset[str]]
    events: tuple[ChurnEvent, ...]

    def intervals(self) -> list[float]:
        times = [0.0] + [e.time for e in self.events]
        return [b - a for a, b in zip(times, times[1:], strict=False)]

    def describe(self) -> list[str]:
        joins = sum(1 for e in self.events if e.kind == "join")
        gaps = self.intervals()
        mean = statistics.fmean(gaps) if gaps else 0.0
        return [
            f"Poisson churn, seed {self.seed}: {len(self.events)} events at rate {self.rate:g}/s "
            f"(mean interval asked {1 / self.rate:g} s, drawn {mean:g} s), {joins} joins, "
            f"{len(self.events) - joins} leaves",
            f"  initial overlay: {len(self.initial)} nodes ({self.held_out:.0%} of the sample held out to join)",
            f"  leave probability {self.leave_probability:g}; leaves uniform among present nodes, joins uniform "
            "among absent ones (held out or departed: re-joins keep their subscriptions)",
        ]


def poisson_churn(
    topics_of: dict[str, frozenset[str]],
    events: int,
    seed: int,
    rate: float = CHURN_RATE,
    leave_probability: float = LEAVE_PROBABILITY,
    held_out: float = HELD_OUT,
) -> ChurnTrace:
    """`events` churn events over the nodes of `topics_of` (a workload's): a random
    `held_out` share starts absent, the rest form the initial overlay."""
    if rate <= 0 or not 0 <= leave_probability <= 1 or not 0 <= held_out < 1:
        raise ValueError("need rate > 0, 0 <= leave_probability <= 1 and 0 <= held_out < 1")
    rng = random.Random(seed)
    nodes = sorted(topics_of)
    absent = set(rng.sample(nodes, round(held_out * len(nodes))))
    present = set(nodes) - absent
    initial = {node: topics_of[node] for node in sorted(present)}
    trace: list[ChurnEvent] = []
    now = 0.0
    for _ in range(events):
        now += rng.expovariate(rate)
        leave = rng.random() < leave_probability
        if not absent:
            leave = True
        if not present:
            leave = False
        source, sink = (present, absent) if leave else (absent, present)
        node = rng.choice(sorted(source))
        source.discard(node)
        sink.add(node)
        trace.append(ChurnEvent(now, "leave" if leave else "join", node, topics_of[node]))
    return ChurnTrace(seed, rate, leave_probability, held_out, initial, tuple(trace))
