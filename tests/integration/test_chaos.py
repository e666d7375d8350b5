"""Fault injection (`pubsub chaos`, `pubsub.runtime.admin`) on real daemons as OS processes.

One cluster (a supervisor and 4 nodes on 127.0.0.1, each with an admin listener, all
writing one event stream) is shared by the module; every test leaves the topic at exactly
SR(n) over the running nodes, and the crash comes last.  Each injection must have its
visible effect, the ring must come back to SR(n) by itself (the independent oracle,
`tests.cluster_checks`), and a marker event must be written.  Operator requests that
arrive on a daemon's peer port instead of its admin listener are refused and counted.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pubsub.cli.chaos import _about, _print
from pubsub.cli.main import main
from pubsub.kernel import wire
from pubsub.kernel.control import ChaosRequest, ErrorReply, Hello
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.members import members_of
from pubsub.ops.processes import ClusterError, pick_free_ports
from pubsub.runtime.admin import admin_request
from pubsub.runtime.adminparams import ChaosError
from pubsub.runtime.client import request
from pubsub.runtime.settings import AdminSettings, SettingsError, load
from pubsub.skipring.statuscheck import ring_order
from tests.cluster_checks import ring_problems

# The tests share one cluster: tests/conftest.py keeps this module on one xdist worker.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

N_NODES = 4
INTERVAL = 0.2
TOPIC = "t"
#: Seconds allowed for any convergence or for an event file to be moved into place.
CONVERGE = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    work = tmp_path_factory.mktemp("chaos")
    with LocalCluster(work, N_NODES, interval=INTERVAL, events_dir=work / "events") as c:
        for i in range(N_NODES):
            c.subscribe(i, TOPIC)
        settle(c)
        yield c


def members(c: LocalCluster) -> dict[str, list[str]]:
    return {TOPIC: c.running_node_refs()}


def settle(c: LocalCluster, gone: list[str] | None = None) -> None:
    what = f"SR({len(c.running_node_refs())})"
    c.poll(lambda: ring_problems(c, members(c), gone or []), CONVERGE, what)


def events(c: LocalCluster) -> list[dict[str, Any]]:
    """Every event in the run directory (whole files only)."""
    assert c.events_dir is not None
    return [
        json.loads(line)
        for path in sorted(c.events_dir.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def markers(c: LocalCluster) -> dict[str, dict[str, Any]]:
    """Every marker event in the run directory (whole files only), by id."""
    return {e["id"]: e for e in events(c) if e.get("kind") == "marker"}


def wait_marker(c: LocalCluster, marker_id: str) -> dict[str, Any]:
    c.poll(lambda: [] if marker_id in markers(c) else [f"no marker {marker_id}"], CONVERGE,
           f"marker {marker_id}")
    return markers(c)[marker_id]


def chaos_cli(c: LocalCluster, *args: str) -> dict[str, Any]:
    """`pubsub chaos ARGS --json` as the operator runs it; the printed JSON."""
    return dict(json.loads(c.cli("chaos", *args, "--json")))


def stats(c: LocalCluster, which: int | str) -> dict[str, Any]:
    return dict(c.node_status(which)["stats"])


# --- who may inject -----------------------------------------------------------------------------
def test_admin_listener_is_loopback_only_unless_allowed() -> None:
    with pytest.raises(SettingsError, match="not a loopback address"):
        load(AdminSettings, admin_listen="10.1.2.3:7000")
    assert load(AdminSettings, admin_listen="10.1.2.3:7000", admin_allow_remote=True).admin_listen
    assert load(AdminSettings, admin_listen="127.0.0.1:7000").admin_listen == "127.0.0.1:7000"
    result = CliRunner().invoke(
        main,
        ["node", "--listen", "127.0.0.1:1", "--supervisor", "127.0.0.1:2",
         "--admin-listen", "10.1.2.3:7000"],
    )
    assert result.exit_code == 2, result.output
    assert "not a loopback address" in result.output


def test_an_unreachable_admin_address_is_named_once() -> None:
    (port,) = pick_free_ports(1)
    admin = f"127.0.0.1:{port}"
    result = CliRunner().invoke(main, ["chaos", "info", "--admin", admin, "--timeout", "2"])
    assert result.exit_code == 1
    assert f"Error: cannot reach {admin}: connection refused" in result.output
    assert result.output.count(admin) == 1


def test_an_address_is_not_taken_as_named_by_a_longer_one() -> None:
    assert _about("127.0.0.1:1", "cannot reach 127.0.0.1:1: refused") == "cannot reach 127.0.0.1:1: refused"
    assert _about("127.0.0.1:1", "127.0.0.1:18080 sent garbage") == "127.0.0.1:1: 127.0.0.1:18080 sent garbage"


def test_no_marker_id_is_printed_when_no_daemon_wrote_one(capsys: pytest.CaptureFixture[str]) -> None:
    body = {"admin": "127.0.0.1:9", "ref": "127.0.0.1:8", "role": "node", "marker_written": False}
    _print("drop", "drop-1", [body], False, lambda b: "dropping")
    assert capsys.readouterr().out == "drop 127.0.0.1:8 (node, admin 127.0.0.1:9): dropping; no marker written here\n"
    _print("drop", "drop-2", [body, {**body, "marker_written": True}], False, lambda b: "dropping")
    assert capsys.readouterr().out.splitlines()[-1] == "marker drop-2"


def test_chaos_requests_on_the_peer_port_are_refused_and_counted(cluster: LocalCluster) -> None:
    node = cluster.node(0)
    before = stats(cluster, 0)["errors"].get("forbidden", 0)

    async def as_peer() -> Any:
        """Say Hello as a peer, then ask for a crash; return the first frame back."""
        reader, writer = await asyncio.open_connection(*node.ref.split(":"))
        try:
            writer.write(wire.encode(Hello(ref="127.0.0.1:1", role="peer")))
            writer.write(wire.encode(ChaosRequest(action="crash", params={})))
            await writer.drain()
            async with asyncio.timeout(10):
                length = wire.frame_length(await reader.readexactly(wire.HEADER_SIZE))
                return wire.decode(await reader.readexactly(length))
        finally:
            writer.close()

    as_client = asyncio.run(request(node.ref, ChaosRequest(action="crash", params={}), 10))
    peer_reply = asyncio.run(as_peer())
    for reply in (as_client, peer_reply):
        assert isinstance(reply, ErrorReply) and reply.code == "forbidden", reply
    assert node.running
    assert stats(cluster, 0)["errors"].get("forbidden", 0) == before + 2
    # Junk on the admin listener is refused too, and the daemon stays up.
    async def junk_to_admin() -> Any:
        reader, writer = await asyncio.open_connection(*cluster.admin_ref(0).split(":"))
        try:
            writer.write(wire.encode(Hello(ref=None, role="client")) + b"\x00\x00\x00\x02\xc1\xc1")
            await writer.drain()
            async with asyncio.timeout(10):
                length = wire.frame_length(await reader.readexactly(wire.HEADER_SIZE))
                return wire.decode(await reader.readexactly(length))
        finally:
            writer.close()

    reply = asyncio.run(junk_to_admin())
    assert isinstance(reply, ErrorReply) and reply.code == "bad_msgpack", reply
    assert stats(cluster, 0)["errors"].get("admin_bad_msgpack", 0) >= 1
    assert node.running
    settle(cluster)


def test_bad_requests_get_a_clear_error_and_change_nothing(cluster: LocalCluster) -> None:
    admin = cluster.admin_ref(0)
    refused: list[tuple[str, dict[str, Any], str]] = [
        ("drop", {"fraction": 2.0, "duration": 1.0}, "bad_params"),
        ("drop", {"fraction": 0.5}, "bad_params"),
        ("partition", {"members": ["127.0.0.1:1"], "duration": 1.0}, "bad_params"),
        ("corrupt_node", {"topic": "no-such-topic"}, "unknown_topic"),
        ("corrupt_node", {"colour": "red"}, "bad_params"),
        ("corrupt_supervisor", {}, "unsupported"),
        ("explode", {}, "unsupported"),
    ]
    for action, params, code in refused:
        with pytest.raises(ChaosError) as caught:
            asyncio.run(admin_request(admin, action, params))
        assert caught.value.code == code, (action, params, caught.value)
    info = asyncio.run(admin_request(admin, "info"))
    assert info["faults"] == {} and info["injections"] == {}
    runner = CliRunner()
    usage = runner.invoke(
        main, ["chaos", "drop", "--admin", admin, "--fraction", "0", "--duration", "1"]
    )
    assert usage.exit_code == 2, usage.output
    wrong_role = runner.invoke(main, ["chaos", "corrupt-supervisor", "--admin", admin])
    assert wrong_role.exit_code == 1, wrong_role.output
    assert "unsupported" in wrong_role.output
    assert not ring_problems(cluster, members(cluster))


# --- the injections -----------------------------------------------------------------------------
def test_corrupt_node_breaks_the_ring_which_converges_back(cluster: LocalCluster) -> None:
    targets = [1, 2]

    async def corrupt() -> list[dict[str, Any]]:
        return [
            await admin_request(
                cluster.admin_ref(i), "corrupt_node",
                {"seed": 11 + i, "junk": 3, "marker_id": f"corrupt-node-{i}"},
            )
            for i in targets
        ]

    replies = asyncio.run(corrupt())
    right_after = ring_problems(cluster, members(cluster))
    assert right_after, "status right after corrupt_node should not show SR(n)"
    for reply in replies:
        assert reply["ok"] and reply["junk"] == 3 and set(reply["topics"]) == {TOPIC}
    settle(cluster)
    for i in targets:
        event = wait_marker(cluster, f"corrupt-node-{i}")
        assert event["action"] == "corrupt_node" and event["targets"] == [cluster.node_refs[i]]
        assert event["params"]["seed"] == 11 + i


def test_corrupt_supervisor_database_recovers(cluster: LocalCluster) -> None:
    out = chaos_cli(
        cluster, "corrupt-supervisor", "--admin", cluster.admin_ref("supervisor"), "--seed", "4"
    )
    (result,) = out["results"]
    assert result["topics"][TOPIC]["legitimate_database"] is False
    assert result["topics"][TOPIC]["n"] > N_NODES  # extra tuples: (i), (ii), (iv)
    settle(cluster)
    assert cluster.supervisor_status()["topics"][TOPIC]["legitimate_database"] is True
    event = wait_marker(cluster, out["marker"])
    assert event["action"] == "corrupt_supervisor" and event["role"] == "supervisor"


def test_drop_discards_frames_for_a_while_and_the_ring_stays_sr(cluster: LocalCluster) -> None:
    out = chaos_cli(
        cluster, "drop", "--admin", cluster.admin_ref(0), "--fraction", "0.5", "--duration", "1.5"
    )
    cluster.poll(
        lambda: [] if stats(cluster, 0)["fault_drops"].get("drop", 0) > 0 else ["nothing dropped"],
        CONVERGE, "dropped frames",
    )
    heal = wait_marker(cluster, f"{out['marker']}-heal")  # the drop ended by itself
    assert heal["action"] == "heal" and heal["params"] == {"after": "drop", "of": out["marker"]}
    assert asyncio.run(admin_request(cluster.admin_ref(0), "info"))["faults"] == {}
    dropped = stats(cluster, 0)["fault_drops"]["drop"]
    settle(cluster)
    assert stats(cluster, 0)["fault_drops"]["drop"] == dropped  # no more after the end
    assert wait_marker(cluster, out["marker"])["params"] == {"fraction": 0.5, "duration": 1.5}
    shown = cluster.cli("chaos", "info", "--admin", cluster.admin_ref(0))
    assert f"no faults; dropped frames: {dropped} by drop" in shown


def test_partition_stops_traffic_across_the_cut_then_heals(cluster: LocalCluster) -> None:
    # Two ring neighbours on each side, so each side can still spread its own publication.
    order = ring_order(members_of(cluster.supervisor_status(), TOPIC))
    side_a, side_b = order[:2], order[2:]
    out = chaos_cli(
        cluster, "partition", "--admin", cluster.admin_ref(side_a[0]),
        "--admin", cluster.admin_ref(side_a[1]), "--duration", "8",
    )
    assert all(sorted(r["members"]) == sorted(side_a) for r in out["results"])
    tag = f"{random.random():.9f}"
    cluster.publish(side_a[0], TOPIC, f"from A {tag}")
    cluster.publish(side_b[0], TOPIC, f"from B {tag}")

    def held() -> dict[str, set[str]]:
        return {
            ref: {d["payload"] for d in rows if tag in d["payload"]}
            for ref, rows in cluster.histories(cluster.node_refs, TOPIC).items()
        }

    both = {f"from A {tag}", f"from B {tag}"}

    def each_side_has_its_own() -> list[str]:
        now = held()
        own = {ref: f"from {'A' if ref in side_a else 'B'} {tag}" for ref in order}
        return [f"{ref} holds {sorted(now[ref])}" for ref, p in own.items() if p not in now[ref]]

    cluster.poll(each_side_has_its_own, CONVERGE, "each side to hold its own publication")
    during = held()
    still_cut = [
        asyncio.run(admin_request(cluster.admin_ref(ref), "info"))["faults"].get("partition")
        for ref in side_a
    ]
    assert all(still_cut), "the partition ended before the check; it must span it"
    for ref in side_a:
        assert during[ref] == {f"from A {tag}"}, (ref, during[ref])
    for ref in side_b:
        assert during[ref] == {f"from B {tag}"}, (ref, during[ref])
    for ref in side_a:
        assert stats(cluster, ref)["fault_drops"].get("partition", 0) > 0
    wait_marker(cluster, f"{out['marker']}-heal")
    cluster.poll(
        lambda: [f"{ref} holds {sorted(v)}" for ref, v in held().items() if v != both],
        CONVERGE, "both publications everywhere after the heal",
    )
    settle(cluster)
    marker = wait_marker(cluster, out["marker"])
    assert marker["action"] == "partition" and sorted(marker["targets"]) == sorted(side_a)
    assert sum(m["id"] == out["marker"] for m in markers(cluster).values()) == 1


def test_a_partition_of_one_daemon_is_reported_in_the_singular(cluster: LocalCluster) -> None:
    ref = cluster.running_node_refs()[0]
    out = cluster.cli("chaos", "partition", "--admin", cluster.admin_ref(ref), "--duration", "0.5")
    lines = out.splitlines()
    assert f"partition {ref} " in lines[0] and "cut off from every other daemon for 0.5 s;" in lines[0], out
    marker_id = lines[-1].removeprefix("marker ")
    wait_marker(cluster, f"{marker_id}-heal")
    settle(cluster)


def test_crash_kills_the_processes_and_the_supervisor_removes_them(cluster: LocalCluster) -> None:
    """Two daemons crash under one marker; the supervisor removes both, and neither wrote
    an event later than the marker (the analysis ends a crashed node's state there)."""
    victims = [cluster.node(2), cluster.node(3)]
    out = chaos_cli(
        cluster, "crash", "--admin", cluster.admin_ref(2), "--admin", cluster.admin_ref(3)
    )
    assert [r["pid"] for r in out["results"]] == [v.pid for v in victims]
    for victim in victims:
        assert victim.process is not None
        try:
            code = victim.process.wait(timeout=CONVERGE)
        except Exception as exc:  # noqa: BLE001 - report as a failure, not a hang
            raise AssertionError(f"{victim.name} is still running after the crash request") from exc
        assert code == -signal.SIGKILL
    refs = [v.ref for v in victims]
    settle(cluster, gone=refs)
    listed = cluster.supervisor_status()["topics"][TOPIC]["members"]
    assert not set(refs) & {m["ref"] for m in listed}
    event = wait_marker(cluster, out["marker"])
    assert event["action"] == "crash" and event["targets"] == sorted(refs)  # markers sort them
    assert event["source"] == refs[-1], "the last daemon asked writes the crash marker"
    later = [e for e in events(cluster) if e.get("source") in refs and e["ts"] > event["ts"]]
    assert not later, f"crashed daemons wrote events after their crash marker: {later[:3]}"
    for admin in (cluster.admin_ref(2), cluster.admin_ref(3)):
        with pytest.raises(ClusterError):  # the admin listeners died with them
            cluster.cli("chaos", "info", "--admin", admin, "--timeout", "2")
    assert Path(cluster.events_dir or "").is_dir()
