"""SCOT topology (OctopiA §3-§4, `broker.cores.topology`, `broker.topologyfile`): structure,
shipped files, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker import topologyfile as TF
from broker.cores import topology as T
from broker.cores.topology import ALINK, ILINK, TopologyError, scot


def test_figure3_structure_clusters_regions_and_links() -> None:
    """Fig. 3: G_af (six vertices) □ K_3 has 3 clusters of 6 brokers and 6 regions of 3."""
    topo = TF.figure3()
    assert len(topo) == 18
    assert topo.clusters == (0, 1, 2)
    assert topo.cluster(0) == ("a,0", "b,0", "c,0", "d,0", "e,0", "f,0")
    assert topo.region("e") == ("e,0", "e,1", "e,2")
    # aLinks follow the factor inside a cluster, iLinks join a region pairwise (K_m).
    assert len(topo.alinks()) == 3 * 5
    assert len(topo.ilinks()) == 6 * 3
    assert topo.link_kind("d,1", "e,1") == ALINK
    assert topo.link_kind("e,1", "e,2") == ILINK
    assert topo.link_kind("d,1", "e,2") is None
    # §4.2: primary neighbours in the cluster, secondary neighbours in the region.
    assert topo.primary_neighbours("e,1") == ("d,1", "f,1")
    assert topo.secondary_neighbours("e,1") == ("e,0", "e,2")
    assert topo.ilink_to("e,1", 2) == "e,2"
    # §4.2: B(e, 1) is an inner broker, B(a, 2) an edge broker; a region has one type.
    assert topo.is_inner("e,1") and topo.is_edge("a,2")
    for x in topo.vertices:
        assert len({topo.is_inner(b) for b in topo.region(x)}) == 1
    assert topo.cluster_of("e,1") == 1 and topo.region_of("e,1") == "e"


def test_s_e_matches_section_10_counts() -> None:
    """§10/Fig. 9: S_e has 4 inner and 10 edge factor vertices, times K_4."""
    topo = TF.s_e()
    assert len(topo.vertices) == 14 and topo.m == 4
    inner = {topo.region_of(b) for b in topo.inner_brokers()}
    assert inner == {"F", "G", "H", "I"}
    assert len(topo.inner_brokers()) == 16 and len(topo.edge_brokers()) == 40


def test_scot3x3_and_distances() -> None:
    topo = TF.scot3x3()
    assert len(topo) == 9 and topo.diameter == 2
    assert topo.distance("a,0", "c,2") == 3  # diam(G_af) + 1 (§9.1)
    assert topo.path_in_cluster("a,1", "c,1") == ("a,1", "b,1", "c,1")
    assert topo.neighbours("b,0") == ("a,0", "c,0", "b,1", "b,2")


def test_single_vertex_factor_is_a_complete_graph() -> None:
    topo = scot([], 4, vertices=["solo"])
    assert topo.brokers == ("solo,0", "solo,1", "solo,2", "solo,3")
    assert topo.primary_neighbours("solo,0") == ()
    assert len(topo.ilinks()) == 6


def test_m_one_is_the_factor_alone() -> None:
    topo = scot([["a", "b"]], 1)
    assert topo.secondary_neighbours("a,0") == ()
    assert topo.links() == (("a,0", "b,0"),)


def test_file_round_trip_with_addresses_and_clients(tmp_path: Path) -> None:
    topo = TF.scot3x3()
    addresses = {b: f"127.0.0.1:{7100 + k}" for k, b in enumerate(topo.brokers)}
    topo = scot(topo.edges, topo.m, addresses=addresses, clients={"P": "b,1"})
    path = tmp_path / "t.json"
    path.write_text(topo.to_json())
    back = TF.load(path)
    assert back == topo
    assert back.address("c,2") == addresses["c,2"]
    assert back.broker_at(addresses["a,1"]) == "a,1"
    assert (back.host_broker("P"), back.host_cluster("P"), back.host_region("P")) == ("b,1", 1, "b")


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ({"factor": [["a", "b"]], "m": 0}, "m must be at least 1"),
        ({"factor": [["a", "b"]], "m": "3"}, "m must be an integer"),
        ({"factor": [["a", "a"]], "m": 2}, "self loop"),
        ({"factor": [["a", "b"], ["b", "a"]], "m": 2}, "duplicate"),
        ({"factor": [["a", "b"], ["b", "c"], ["c", "a"]], "m": 2}, "not acyclic"),
        ({"factor": [["a", "b"], ["c", "d"]], "m": 2}, "not connected"),
        ({"factor": [["a", "b"]], "m": 2, "vertices": ["a", "b", "a"]}, "listed twice"),
        ({"factor": [["a", "b"]], "m": 2, "vertices": ["a"]}, "not in 'vertices'"),
        ({"factor": [["a", "b"]], "m": 2, "vertices": ["a", "b", "c"]}, "not connected"),
        ({"factor": [], "m": 2}, "no vertex"),
        ({"factor": [["a,1", "b"]], "m": 2}, "vertex label"),
        ({"factor": [["a", 3]], "m": 2}, "vertex label is a string"),
        ({"factor": [["a", "b", "c"]], "m": 2}, "pair"),
        ({"factor": "ab", "m": 2}, "list of edges"),
        ({"m": 2}, "needs 'factor'"),
        ({"factor": [["a", "b"]], "m": 2, "colour": 1}, "unknown topology key"),
        ({"factor": [["a", "b"]], "m": 2, "addresses": {"a,0": "h:1"}}, "have no address"),
        ({"factor": [["a", "b"]], "m": 1, "addresses": {"a,0": "h:1", "b,0": "h:1"}}, "share"),
        ({"factor": [["a", "b"]], "m": 1, "addresses": {"a,0": "h:1", "b,0": "nope"}}, "host:port"),
        ({"factor": [["a", "b"]], "m": 1, "addresses": {"a,0": "h:1", "z,0": "h:2"}}, "no broker"),
        ({"factor": [["a", "b"]], "m": 1, "clients": {"P": "a,5"}}, "unknown broker"),
        ([1, 2], "JSON object"),
    ],
)
def test_invalid_topologies_are_refused_with_a_clear_message(obj: object, fragment: str) -> None:
    with pytest.raises(TopologyError) as info:
        TF.loads(json.dumps(obj))
    assert fragment in str(info.value)


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read"):
        TF.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("factor: [a, b]")
    with pytest.raises(TopologyError, match=r"bad\.json: a topology file must be JSON"):
        TF.load(bad)


def test_broker_id_parsing_and_unknown_ids() -> None:
    assert T.parse_broker_id("e,1") == ("e", 1)
    for bad in ("e", "e,", ",1", "e,01", "e,-1", 5):
        with pytest.raises(TopologyError):
            T.parse_broker_id(bad)
    topo = TF.scot3x3()
    with pytest.raises(TopologyError, match="no broker"):
        topo.primary_neighbours("z,0")
    with pytest.raises(TopologyError, match="no cluster"):
        topo.cluster(3)
    with pytest.raises(TopologyError, match="no iLink"):
        topo.ilink_to("a,0", 0)
    with pytest.raises(TopologyError, match="no address"):
        topo.address("a,0")
    with pytest.raises(TopologyError, match="no shipped topology"):
        TF.shipped("nope")
