"""Bugs the fuzzer found, each pinned by a test."""

from __future__ import annotations

import pytest

from broker import topologyfile
from broker.cores.factory import make_core
from broker.cores.language.filters import Filter
from broker.cores.messages import Attrs, PadresPublish, ScotPublish


@pytest.mark.parametrize("protocol", ["octopia", "padres"])
def test_a_negative_hop_count_is_dropped_not_forwarded(protocol: str) -> None:
    """`fuzz octopia`: a neighbour's publication copy with hops < 0 was routed on with
    hops + 1, so a forged count slipped under the hop guard (`max_hops`) and a routing loop
    would have carried it about 2^63 times.  It is now dropped and counted like one over
    the limit."""
    topo = topologyfile.figure3()
    me = topo.brokers[0]
    core = make_core(protocol, topo, me)
    neighbour = core.neighbours[0]
    core.subscribe("c1", "s", Filter())  # a local subscriber that matches everything
    attrs = Attrs({"x": 1})
    msg = (
        ScotPublish("p", "c9", attrs, 0, -5, neighbour)
        if protocol == "octopia"
        else PadresPublish("p", "c9", attrs, "t", -5, neighbour)
    )
    assert core.handle(msg, 0.0) == []
    assert core.counters["hop_limit"] == 1
