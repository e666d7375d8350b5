"""Fixed, seeded skip ring scenarios whose message counts are kept in a golden file.

Each scenario builds a `pubsub.sim.world.Simulation` with a fixed seed, drives it through
the simulator's public API only (the constructor's arguments, `add_node`, `join`, `leave`,
`crash`, `publish`, `publish_request`, `run_for`, `traffic`, `answers`, `nodes`, and the
starts of `pubsub.sim.scenarios`), and returns a JSON-able dict: the messages sent, by kind
(all of them, those the supervisor sent and those sent to it), their total and, where
publications are made, how many publications each live member holds per topic.

`tests/sim/golden_counts.json` holds what today's code produces; `test_golden_counts.py`
asserts that the code still produces exactly that.  It was captured before the overlay-seam
refactor of the cores and the effect executor (issue 43), which must change no behaviour:
with the same seed, the same messages must be sent.

"After convergence" is a fixed number of intervals (`SETTLE`), not a legitimacy check: a
check would read the cores' internals, which the refactor changes.  These rings (at most 16
subscribers) are legitimate after at most 5 intervals (checked with
`tests.simhelpers.is_legitimate` when the file was captured), so `SETTLE` = 30 leaves a wide
margin.

    python -m tests.sim.goldenscenarios            # compare with the golden file, print a summary
    python -m tests.sim.goldenscenarios --write    # capture the golden file anew
    python -m tests.sim.goldenscenarios --print join crash   # print scenarios' output as JSON
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pubsub.kernel.message import Ref, Topic
from pubsub.sim.scenarios import corrupted_start, fresh_start
from pubsub.sim.world import Simulation

GOLDEN_FILE = Path(__file__).with_name("golden_counts.json")

TOPIC = Topic("t")
#: Intervals after which the fresh rings of these scenarios are settled (module docstring).
SETTLE = 30

Scenario = Callable[[], dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} is registered twice")
        SCENARIOS[name] = fn
        return fn

    return register


# ---------------------------------------------------------------------- what is recorded
def _sorted_counts(counter: Counter[str]) -> dict[str, int]:
    """A counter as a dict sorted by kind (kinds counted zero times are left out, so that a
    counter that lists every kind up front compares equal to one that does not)."""
    return {kind: count for kind, count in sorted(counter.items()) if count}


def traffic(sim: Simulation) -> dict[str, Any]:
    """Every message sent so far: by kind, in total, from and to the supervisor."""
    return {
        "by_kind": _sorted_counts(sim.traffic.by_kind),
        "total": sim.traffic.total(),
        "from_supervisor": _sorted_counts(sim.traffic.from_supervisor),
        "to_supervisor": _sorted_counts(sim.traffic.to_supervisor),
    }


def publications_held(sim: Simulation, topics: list[Topic]) -> dict[str, dict[str, int]]:
    """topic -> live node -> how many publications its trie holds (nodes that run no
    anti-entropy for the topic are left out)."""
    held: dict[str, dict[str, int]] = {}
    for topic in topics:
        held[topic] = {
            ref: len(node.publications[topic].trie)
            for ref, node in sorted(sim.nodes.items())
            if topic in node.publications
        }
    return held


def answers(sim: Simulation) -> list[list[Any]]:
    """The answers to clients in the order given: [node, message kind, ok]; ok means the
    publication was acknowledged (PublishAck), not failed (PublishFailed)."""
    return [[ref, answer.msg.kind, answer.msg.kind == "publish_ack"] for _, ref, answer in sim.answers]


def intervals(sim: Simulation, count: int) -> None:
    sim.run_for(count * sim.interval)


# ---------------------------------------------------------------------- ring changes
@scenario("join")
def join() -> dict[str, Any]:
    """16 fresh processes join one topic at time 0; 40 intervals."""
    sim = Simulation(4301)
    fresh_start(sim, 16, TOPIC)
    intervals(sim, 40)
    return {"traffic": traffic(sim), "live": len(sim.nodes)}


@scenario("leave")
def leave() -> dict[str, Any]:
    """A settled ring of 16; 4 of them leave the topic; 30 intervals."""
    seed = 4302
    sim = Simulation(seed)
    refs = fresh_start(sim, 16, TOPIC)
    intervals(sim, SETTLE)
    for ref in random.Random(seed).sample(sorted(refs), 4):
        sim.leave(ref, TOPIC)
    intervals(sim, 30)
    return {"traffic": traffic(sim), "live": len(sim.nodes)}


@scenario("crash")
def crash() -> dict[str, Any]:
    """A settled ring of 16; 3 of them crash; 40 intervals."""
    seed = 4303
    sim = Simulation(seed)
    refs = fresh_start(sim, 16, TOPIC)
    intervals(sim, SETTLE)
    for ref in random.Random(seed).sample(sorted(refs), 3):
        sim.crash(ref)
    intervals(sim, 40)
    return {"traffic": traffic(sim), "live": len(sim.nodes)}


@scenario("corrupted")
def corrupted() -> dict[str, Any]:
    """24 subscribers in an arbitrary state (`corrupted_start`); 60 intervals."""
    seed = 4304
    sim = Simulation(seed)
    corrupted_start(sim, 24, TOPIC, random.Random(seed))
    intervals(sim, 60)
    return {"traffic": traffic(sim), "live": len(sim.nodes)}


# ---------------------------------------------------------------------- publications
def _publications(seed: int, dissemination: str) -> dict[str, Any]:
    """A settled ring of 12; 30 publications from 4 of its members, 0.1 interval apart;
    20 intervals."""
    sim = Simulation(seed, dissemination=dissemination)
    refs = fresh_start(sim, 12, TOPIC)
    intervals(sim, SETTLE)
    publishers = [refs[0], refs[3], refs[7], refs[10]]
    for i in range(30):
        sim.publish(publishers[i % len(publishers)], TOPIC, f"publication {i}".encode())
        sim.run_for(0.1 * sim.interval)
    intervals(sim, 20)
    return {"traffic": traffic(sim), "live": len(sim.nodes), "held": publications_held(sim, [TOPIC])}


@scenario("publications_flood")
def publications_flood() -> dict[str, Any]:
    """§4.3's flooding (the simulator's default)."""
    return _publications(4305, "flood")


@scenario("publications_tree")
def publications_tree() -> dict[str, Any]:
    """The arc broadcast (the daemons' default)."""
    return _publications(4306, "tree")


@scenario("client_publishing_durable")
def client_publishing_durable() -> dict[str, Any]:
    """Simulated stores with group commits of 0.05 s; a settled ring of 8 and one process
    that runs no topic.  Clients publish at three members, at the non-member (handed over to
    a member) and at the non-member for a topic without members (fails); 20 intervals."""
    sim = Simulation(4307, commit_delay=0.05)
    refs = fresh_start(sim, 8, TOPIC)
    outsider = sim.add_node("outsider")
    intervals(sim, SETTLE)
    requests: list[tuple[Ref, Topic]] = [
        (refs[0], TOPIC),
        (outsider, TOPIC),
        (refs[5], TOPIC),
        (outsider, TOPIC),
        (refs[2], TOPIC),
        (outsider, Topic("nobody")),
        (refs[0], TOPIC),
    ]
    for i, (ref, topic) in enumerate(requests):
        sim.publish_request(ref, topic, f"request {i}".encode(), client=10 + i, request_id=i + 1, msg_id=f"m{i}")
        sim.run_for(0.2 * sim.interval)
    intervals(sim, 20)
    return {
        "traffic": traffic(sim),
        "live": len(sim.nodes),
        "held": publications_held(sim, [TOPIC]),
        "answers": answers(sim),
    }


@scenario("two_topics")
def two_topics() -> dict[str, Any]:
    """14 processes: n0..n9 subscribe to "a", n5..n13 to "b" (n5..n9 to both); a few
    publications in each topic, some from the shared members; 20 intervals."""
    a, b = Topic("a"), Topic("b")
    sim = Simulation(4308)
    refs = [sim.add_node() for _ in range(14)]
    for ref in refs[:10]:
        sim.join(ref, a)
    for ref in refs[5:]:
        sim.join(ref, b)
    intervals(sim, SETTLE)
    publications = [(refs[0], a), (refs[6], a), (refs[6], b), (refs[12], b), (refs[9], a), (refs[9], b), (refs[3], a)]
    for i, (ref, topic) in enumerate(publications):
        sim.publish(ref, topic, f"{topic} {i}".encode())
        sim.run_for(0.1 * sim.interval)
    intervals(sim, 20)
    return {"traffic": traffic(sim), "live": len(sim.nodes), "held": publications_held(sim, [a, b])}


# ---------------------------------------------------------------------- the golden file
def run(name: str) -> dict[str, Any]:
    """Scenario `name`'s output as it reads back from JSON (tuples become lists)."""
    result: dict[str, Any] = json.loads(json.dumps(SCENARIOS[name]()))
    return result


def run_all() -> dict[str, dict[str, Any]]:
    return {name: run(name) for name in sorted(SCENARIOS)}


def dumps(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def load_golden() -> dict[str, dict[str, Any]]:
    golden: dict[str, dict[str, Any]] = json.loads(GOLDEN_FILE.read_text(encoding="utf-8"))
    return golden


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """What differs between a scenario's output and its golden entry, one line each: the
    message kinds whose counts differ, then any other field."""
    lines: list[str] = []
    got_traffic, want_traffic = got.get("traffic", {}), want.get("traffic", {})
    for counter in ("by_kind", "from_supervisor", "to_supervisor"):
        now, then = got_traffic.get(counter, {}), want_traffic.get(counter, {})
        for kind in sorted(set(now) | set(then)):
            if now.get(kind, 0) != then.get(kind, 0):
                lines.append(f"{counter}[{kind}]: golden {then.get(kind, 0)}, now {now.get(kind, 0)}")
    if got_traffic.get("total") != want_traffic.get("total"):
        lines.append(f"total: golden {want_traffic.get('total')}, now {got_traffic.get('total')}")
    for key in sorted((set(got) | set(want)) - {"traffic"}):
        if got.get(key) != want.get(key):
            lines.append(f"{key}: golden {json.dumps(want.get(key))}, now {json.dumps(got.get(key))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim.goldenscenarios", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_FILE.name} from today's code")
    parser.add_argument("--print", nargs="*", metavar="SCENARIO", dest="show", help="print scenarios' output as JSON")
    args = parser.parse_args(argv)
    if args.show is not None:
        names = args.show or sorted(SCENARIOS)
        unknown = [name for name in names if name not in SCENARIOS]
        if unknown:
            parser.error(f"unknown scenarios {unknown}; known: {sorted(SCENARIOS)}")
        sys.stdout.write(dumps({name: run(name) for name in names}))
        return 0
    results = run_all()
    if args.write:
        GOLDEN_FILE.write_text(dumps(results), encoding="utf-8")
        for name, result in results.items():
            print(f"{name}: {result['traffic']['total']} messages")
        print(f"wrote {GOLDEN_FILE}")
        return 0
    golden = load_golden()
    failed = 0
    for name in sorted(set(results) | set(golden)):
        if name not in golden:
            print(f"{name}: not in the golden file")
            failed += 1
        elif name not in results:
            print(f"{name}: in the golden file but no such scenario")
            failed += 1
        elif results[name] != golden[name]:
            failed += 1
            print(f"{name}: DIFFERS")
            for line in differences(results[name], golden[name]):
                print(f"    {line}")
        else:
            print(f"{name}: same ({results[name]['traffic']['total']} messages)")
    print("all scenarios match the golden file" if not failed else f"{failed} scenario(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
