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


def test_padres_a_neighbour_cannot_retire_an_advertisement_hosted_here() -> None:
    """`fuzz padres`: a PadresUnadvertise from a neighbour naming the tree of an
    advertisement this broker hosts removed it from the SRT while its client still held it,
    and the client's next publication raised KeyError in `handle`.  Only the client withdraws
    its advertisement now (as in OctopiA); the message is dropped and counted."""
    from broker.cores.messages import ClientPublish, PadresUnadvertise
    from broker.cores.padres import PadresBroker

    topo = topologyfile.figure3()
    core = make_core("padres", topo, topo.brokers[0])
    assert isinstance(core, PadresBroker)
    core.advertise("c1", "a", Filter.from_wire([["x", "exists", None]]))
    (tid,) = core.local_advs.values()
    assert core.handle(PadresUnadvertise(tid, core.neighbours[0]), 0.0) == []
    assert core.counters["hosted_unadv"] == 1 and tid in core.srt
    assert core.handle(ClientPublish("c1", "p", Attrs({"x": 1})), 0.0) == []  # no subscriber: no sends
