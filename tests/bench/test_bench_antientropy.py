"""The anti-entropy repair benchmark (`bench.antientropy`) measures what it claims.

Behaviour only, no timing: the repair leaves v with exactly u's publications, costs
fewer bytes than sending the whole set, and the trie copy the benchmark uses to build v
cheaply is the same trie as one built by plain insertion.
"""

from __future__ import annotations

import random

import pytest

from bench.antientropy import (
    TOPIC,
    U,
    V,
    build_core,
    clone_core,
    full_set_cost,
    make_publications,
    measure,
    repair,
    same_keys,
)
from pubsub.kernel import wire
from pubsub.publications.messages import Publish
from pubsub.publications.trie import publication_key

N = 1000


@pytest.fixture(scope="module")
def result() -> dict:
    return measure(N, missing=(1, 10), seed=7)


def test_every_repair_is_complete_and_cheaper_than_the_full_set(result: dict) -> None:
    rows = result["rows"]
    assert {(row["d"], row["starts"]) for row in rows} == {(1, "u"), (1, "v"), (10, "u"), (10, "v")}
    for row in rows:
        assert row["complete"] and row["v_after"] == N
        assert row["publications_sent"] == row["d"]  # nothing sent twice
        assert 1 <= row["rounds"] <= 8
        assert row["bytes"] < row["full_set_bytes"]
        assert row["full_over_repair_bytes"] > 1
        assert row["messages"] == sum(row["by_kind"].values())
        assert row["bytes"] == sum(row["bytes_by_kind"].values())
        assert row["by_kind"]["publish"] >= 1 and row["by_kind"]["check_and_publish"] >= 1
        assert row["round_trips"] * 2 >= row["hops"] >= row["rounds"]


def test_full_set_is_every_publication_in_bounded_batches(result: dict) -> None:
    info = result["build"]
    assert info["full_set_messages"] == -(-N // 64)  # DEFAULT_BATCH_PUBLICATIONS
    # at least the payloads and keys of all N publications travel
    assert info["full_set_bytes"] > N * (32 + 16)


def test_repair_directly_on_the_cores() -> None:
    rng = random.Random(3)
    publications = make_publications(N, rng)
    assert all(
        p.key == publication_key(p.publisher, p.seq, p.payload) and 32 <= len(p.payload) <= 100
        for p in publications
    )
    u = build_core(U, publications)
    missing = set(rng.sample(range(N), 10))
    for starts in ("u", "v"):
        v = build_core(V, [p for i, p in enumerate(publications) if i not in missing])
        assert len(v.trie) == N - 10
        cost = repair(u, v, starts, random.Random(0))
        assert cost.converged and v.trie.root() == u.trie.root()
        assert sorted(p.key for p in v.publications()) == sorted(p.key for p in publications)
        assert cost.publications_sent == 10
        full_messages, full_bytes = full_set_cost(u, V)
        assert cost.bytes < full_bytes and full_messages >= 1


def test_the_copied_trie_equals_a_built_one_and_stays_independent() -> None:
    rng = random.Random(5)
    publications = make_publications(300, rng)
    base = build_core(V, publications[:250])
    copy = clone_core(base, V)
    assert copy.trie.root() == base.trie.root() and same_keys(copy, base)
    for p in publications[250:]:
        copy.store(p)
    built = build_core(V, publications)
    assert copy.trie.root() == built.trie.root() and same_keys(copy, built)
    assert copy.trie.depth() == built.trie.depth()
    assert len(base.trie) == 250 and base.trie.root() == build_core(V, publications[:250]).trie.root()


def test_bytes_are_the_encoded_frames() -> None:
    rng = random.Random(9)
    publications = make_publications(200, rng)
    u = build_core(U, publications)
    v = build_core(V, publications[1:])
    cost = repair(u, v, "v", random.Random(0))
    assert cost.converged and same_keys(u, v)
    # v lacks one publication: exactly one Publish carrying it travels
    assert cost.by_kind["publish"] == 1
    assert cost.bytes_by_kind["publish"] == len(wire.encode(Publish(TOPIC, [publications[0]])))
