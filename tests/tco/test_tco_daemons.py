"""The `tco` overlay's daemons as a user starts them: `pubsub supervisor --overlay tco`
with its settings, a node that learns its overlay from its supervisor or refuses another,
and the start-up refusals (real processes on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pubsub.ops.processes import pick_free_ports, poll
from tests.integration.test_daemon_config import Proc, procs, scrape, status, wait_answering

__all__ = ["procs"]  # the fixture, shared with the daemon configuration tests

pytestmark = pytest.mark.integration


def test_a_node_learns_tco_from_its_supervisor_and_one_told_otherwise_refuses(
    tmp_path: Path, procs: list[Proc]
) -> None:
    sup_port, learner_port, wrong_port, metrics_port = pick_free_ports(4)
    sup = f"127.0.0.1:{sup_port}"
    procs.append(Proc(
        tmp_path / "sup.log", "supervisor", "--listen", sup, "--data", str(tmp_path / "sup"), "--overlay", "tco",
        "--rho", "2.5", "--coverage", "2", "--backup-method", "greedy", "--interval", "0.2",
        "--metrics-port", str(metrics_port), "--metrics-host", "127.0.0.1", "--events-dir", str(tmp_path / "events"),
    ))
    body = wait_answering(procs[-1], sup)
    assert (body["overlay"], body["rho"], body["coverage"], body["backup_method"]) == ("tco", 2.5, 2, "greedy")
    learner = f"127.0.0.1:{learner_port}"
    procs.append(Proc(tmp_path / "node.log", "node", "--listen", learner, "--supervisor", sup, "--interval", "0.2"))
    node = wait_answering(procs[-1], learner)
    assert node["overlay"] == "tco", node.get("overlay")
    wrong = Proc(
        tmp_path / "wrong.log", "node", "--listen", f"127.0.0.1:{wrong_port}", "--supervisor", sup,
        "--overlay", "skipring",
    )
    procs.append(wrong)
    assert wrong.wait_exit() != 0
    assert "runs the tco overlay, and this node was told to run skipring" in wrong.text()
    import asyncio

    from pubsub.publications.messages import JoinTopic
    from pubsub.runtime.client import request

    asyncio.run(request(learner, JoinTopic("news"), 5.0))

    def joined() -> list[str]:
        text = scrape(metrics_port)
        return [] if 'pubsub_tco_repairs_total{kind="join"} 1.0' in text else ["no join repair scraped yet"]

    poll(joined, 30.0, "the supervisor's metrics to count the join")
    text = scrape(metrics_port)
    assert "pubsub_tco_max_degree 0.0" in text and "pubsub_tco_split_topics 0.0" in text
    assert "pubsub_tco_nodes_short_of_coverage 0.0" in text  # news has one subscriber: λ unreachable, not short

    def repair_event() -> list[str]:
        for path in (tmp_path / "events").glob("*.jsonl"):
            for line in path.read_text().splitlines():
                event = json.loads(line)
                if event.get("kind") == "repair" and event.get("repair") == "join" and event.get("node") == learner:
                    return []
        return ["no repair event yet"]

    poll(repair_event, 30.0, "a repair event of the join")


@pytest.mark.parametrize(
    "args, expected",
    [
        (["supervisor", "--overlay", "tco", "--rho", "0"], "0.0 is not in the range x>0"),
        (["supervisor", "--overlay", "tco", "--coverage", "0"], "0 is not in the range x>=1"),
        (["supervisor", "--overlay", "tco", "--backup-method", "best"], "'primal-dual', 'greedy'"),
        (["supervisor", "--rho", "2"], "set the tco or omen overlay, not skipring: add --overlay tco"),
        (["supervisor", "--overlay", "tco", "--peers", "127.0.0.1:1"], "the tco overlay runs one supervisor"),
        (["node", "--overlay", "tco", "--dissemination", "tree", "--supervisor", "127.0.0.1:1"],
         "the tco overlay spreads publications by flood, not tree"),
    ],
    ids=["rho", "lambda", "method", "rho-without-tco", "sharded", "tree"],
)
def test_start_up_refusals_name_the_allowed_values(
    tmp_path: Path, procs: list[Proc], args: list[str], expected: str
) -> None:
    (port,) = pick_free_ports(1)
    proc = Proc(tmp_path / "out.log", *args, "--listen", f"127.0.0.1:{port}", "--data", str(tmp_path / "d"))
    procs.append(proc)
    assert proc.wait_exit() != 0
    assert expected in proc.text(), proc.text()
    assert "Traceback" not in proc.text()  # one line, not a stack


def test_a_tco_node_without_its_supervisor_keeps_asking_and_joins_once_it_answers(
    tmp_path: Path, procs: list[Proc]
) -> None:
    """The node started first runs the overlay it was given; its topics settle once the
    supervisor is up (it asks again every Timeout)."""
    sup_port, node_port = pick_free_ports(2)
    sup, ref = f"127.0.0.1:{sup_port}", f"127.0.0.1:{node_port}"
    procs.append(Proc(
        tmp_path / "node.log", "node", "--listen", ref, "--supervisor", sup, "--overlay", "tco",
        "--data", str(tmp_path / "node"), "--interval", "0.2",
    ))
    wait_answering(procs[-1], ref)
    procs.append(Proc(
        tmp_path / "sup.log", "supervisor", "--listen", sup, "--data", str(tmp_path / "sup"), "--overlay", "tco",
        "--interval", "0.2",
    ))
    wait_answering(procs[-1], sup)
    import asyncio

    from pubsub.kernel.control import Reply
    from pubsub.publications.messages import JoinTopic
    from pubsub.runtime.client import request

    reply = asyncio.run(request(ref, JoinTopic("news"), 5.0))
    assert isinstance(reply, Reply), reply

    def problems() -> list[str]:
        body = status(ref) or {}
        return [] if body.get("table_topics") == ["news"] else [f"table {body.get('table_topics')}"]

    poll(problems, 30.0, "the node's table to hold it in news")
