"""The `omen` overlay's daemons as a user starts them: the start-up refusals name the allowed
values, a supervisor's settings reach its nodes with their membership, and both daemons'
omen metrics in a real Prometheus scrape, a hostile peer's out-of-place message counted
(real processes on 127.0.0.1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pubsub.client.library import Client
from pubsub.kernel.control import Hello
from pubsub.kernel.message import Ref
from pubsub.omen.messages import OmenDone
from pubsub.ops.processes import pick_free_ports, poll
from tests.attackers import exchange
from tests.integration.test_daemon_config import Proc, procs, scrape, status, wait_answering

__all__ = ["procs"]  # the fixture, shared with the daemon configuration tests

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "args, expected",
    [
        (["supervisor", "--resilience", "2"], "--resilience set the omen overlay, not skipring: add --overlay omen"),
        (["supervisor", "--overlay", "tco", "--t-wait", "3"], "--t-wait set the omen overlay, not tco"),
        (["supervisor", "--overlay", "omen", "--resilience", "0"], "0 is not in the range 1<=x<=16"),
        (["supervisor", "--overlay", "omen", "--peers", "127.0.0.1:1"], "the omen overlay runs one supervisor"),
        (["node", "--overlay", "omen", "--dissemination", "tree", "--supervisor", "127.0.0.1:1"],
         "the omen overlay spreads publications by flood, not tree"),
    ],
    ids=["resilience-without-omen", "t-wait-with-tco", "resilience-0", "sharded", "tree"],
)
def test_start_up_refusals_name_the_allowed_values(
    tmp_path: Path, procs: list[Proc], args: list[str], expected: str
) -> None:
    (port,) = pick_free_ports(1)
    proc = Proc(tmp_path / "out.log", *args, "--listen", f"127.0.0.1:{port}", "--data", str(tmp_path / "d"))
    procs.append(proc)
    assert proc.wait_exit() != 0
    assert expected in proc.text(), proc.text()
    assert "Traceback" not in proc.text()


def test_the_supervisors_settings_reach_a_node_that_learns_omen(tmp_path: Path, procs: list[Proc]) -> None:
    sup_port, node_port = pick_free_ports(2)
    sup, node = f"127.0.0.1:{sup_port}", f"127.0.0.1:{node_port}"
    sup_proc = Proc(tmp_path / "sup.log", "supervisor", "--overlay", "omen", "--resilience", "3",
                    "--coverage", "4", "--listen", sup, "--data", str(tmp_path / "sup"))
    procs.append(sup_proc)
    wait_answering(sup_proc, sup)
    node_proc = Proc(tmp_path / "node.log", "node", "--supervisor", sup,
                     "--listen", node, "--data", str(tmp_path / "node"))
    procs.append(node_proc)
    wait_answering(node_proc, node)

    async def join() -> None:
        async with Client(node) as client:
            await client.join("a")
            await client.join("b")

    asyncio.run(join())

    def held() -> list[str]:
        body = status(node) or {}
        problems = [] if body.get("overlay") == "omen" else [f"runs {body.get('overlay')}"]
        if body.get("held_topics") != ["a", "b"]:
            problems.append(f"held in {body.get('held_topics')}")
        return problems

    poll(held, 30.0, "the node held in its topics")
    body = status(sup) or {}
    assert body["overlay"] == "omen" and body["resilience"] == 3 and body["coverage"] == 4, body
    assert body["self_stabilizing"] is False and body["node_topics"] == {node: ["a", "b"]}
    node_body = status(node) or {}
    assert node_body["self_stabilizing"] is False and "not self-stabilizing" in node_body["note"]


def test_the_omen_metrics_of_both_daemons_in_a_real_scrape(tmp_path: Path, procs: list[Proc]) -> None:
    """Two nodes join topic a: the supervisor counts two join events and two nodes on the
    circle, each node holds one neighbour; an `omen_done` from a peer outside a node's
    predecessor range is refused and counted by reason."""
    sup_port, sup_metrics, *ports = pick_free_ports(6)
    sup = f"127.0.0.1:{sup_port}"
    procs.append(Proc(tmp_path / "sup.log", "supervisor", "--overlay", "omen", "--listen", sup, "--interval", "0.2",
                      "--data", str(tmp_path / "sup"), "--metrics-port", str(sup_metrics),
                      "--metrics-host", "127.0.0.1"))
    wait_answering(procs[-1], sup)
    nodes = [(f"127.0.0.1:{ports[i]}", ports[2 + i]) for i in range(2)]
    for i, (ref, metrics) in enumerate(nodes):
        procs.append(Proc(tmp_path / f"node{i}.log", "node", "--supervisor", sup, "--listen", ref, "--interval", "0.2",
                          "--data", str(tmp_path / f"node{i}"), "--metrics-port", str(metrics),
                          "--metrics-host", "127.0.0.1"))
        wait_answering(procs[-1], ref)

    async def join(ref: str) -> None:
        async with Client(ref) as client:
            await client.join("a")

    for ref, _ in nodes:
        asyncio.run(join(ref))

    def in_text(port: int, *samples: str) -> list[str]:
        text = scrape(port)
        return [f"no {s!r} scraped" for s in samples if s not in text]

    poll(lambda: in_text(sup_metrics, 'pubsub_omen_churn_events_total{kind="join"} 2.0', "pubsub_omen_nodes 2.0"),
         30.0, "the supervisor's metrics to count both joins")
    for _, metrics in nodes:
        poll(lambda port=metrics: in_text(port, "pubsub_omen_degree 1.0", 'pubsub_omen_edges_total{change="added"} 1.0'),
             30.0, "each node's metrics to show its one neighbour")
    target, target_metrics = nodes[0]
    assert 'pubsub_omen_refused_total{reason="done"} 0.0' in scrape(target_metrics)
    stranger = Ref(f"127.0.0.1:{pick_free_ports(1)[0]}")  # on no circle: in nobody's predecessor range
    asyncio.run(exchange(target, None, Hello(ref=stranger, role="peer"), OmenDone("1:forged", stranger), wait=2.0))
    poll(lambda: in_text(target_metrics, 'pubsub_omen_refused_total{reason="done"} 1.0'), 30.0,
         "the forged done refused and counted")
    body = status(target) or {}
    assert body["counters"]["refused_done"] == 1 and body["degree"] == 1, body
