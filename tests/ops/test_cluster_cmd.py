"""`pubsub cluster up|status|down` with real processes (pubsub/cli/cluster.py).

Every command runs as its own OS process (``python -m pubsub.cli.main cluster ...``), as an
operator runs it, so the daemons `up` starts outlive the command that started them.  A
fixture stops whatever a test left running, and each test checks that nothing it started
is still alive.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pubsub.ops.detached import DaemonEntry, daemons_of, is_running, read_manifest
from pubsub.ops.processes import poll, port_is_free
from tests.attackers import contiguous_base_port

pytestmark = pytest.mark.integration

#: Seconds one `pubsub cluster ...` command may take (start-up of N daemons included).
COMMAND_TIMEOUT = 90.0


def cluster_cmd(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``pubsub cluster ARGS --dir DIRECTORY``; its exit code is the caller's to check."""
    return subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "cluster", *args, "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def entries(directory: Path) -> list[DaemonEntry]:
    return daemons_of(read_manifest(directory))


def exited(pid: int | None) -> bool:
    """The process is gone, or a zombie waiting for its parent to reap it (the daemons
    `up` leaves behind are re-parented to PID 1, which need not reap promptly)."""
    assert pid is not None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def status_json(directory: Path) -> tuple[int, dict[str, Any]]:
    done = cluster_cmd(directory, "status", "--json")
    assert done.returncode in (0, 3), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for one cluster; afterwards every daemon still running there is killed."""
    directory = tmp_path / "cluster"
    seen: dict[int, DaemonEntry] = {}
    try:
        yield directory
    finally:
        try:
            for entry in entries(directory):
                if entry.pid is not None:
                    seen[entry.pid] = entry
        except Exception:  # noqa: BLE001 - no manifest: nothing was started
            pass
        for entry in seen.values():
            if is_running(entry):
                assert entry.pid is not None
                os.kill(entry.pid, signal.SIGKILL)


def test_up_status_down_with_a_dead_node(cluster_dir: Path) -> None:
    """up starts supervisor + 3 nodes that outlive it; status shows them and legitimate
    rings; after kill -9 of a node status reports it and the repaired ring; down stops
    the rest, is idempotent, and leaves no process and no bound port behind."""
    done = cluster_cmd(cluster_dir, "up", "-n", "3", "--topics", "news,sports", "--interval", "0.2")
    assert done.returncode == 0, done.stderr
    assert "cluster up in" in done.stdout and "topic 'news': 3 members" in done.stdout
    daemons = entries(cluster_dir)
    assert [d.name for d in daemons] == ["supervisor", "node-00", "node-01", "node-02"]
    assert all(is_running(d) for d in daemons), daemons  # the `up` process has exited

    code, report = status_json(cluster_dir)
    assert code == 0 and report["healthy"] and report["all_running"]
    assert [d["running"] and d["answering"] for d in report["daemons"]] == [True] * 4
    assert set(report["topics"]) == {"news", "sports"}
    for topic in ("news", "sports"):
        assert report["topics"][topic]["members"] == 3
        assert report["topics"][topic]["legitimate"], report["topics"][topic]["problems"]
    text = cluster_cmd(cluster_dir, "status")
    assert text.returncode == 0
    assert "3 of 3 nodes running" in text.stdout
    assert "topic news: 3 members, database legitimate, ring legitimate" in text.stdout
    for d in report["daemons"]:  # the admin address `pubsub chaos --admin` takes, on its row
        assert d["admin"] and any(d["ref"] in line and d["admin"] in line for line in text.stdout.splitlines())

    again = cluster_cmd(cluster_dir, "up", "-n", "2")
    assert again.returncode == 1
    assert "a cluster is already up" in again.stderr and "cluster down" in again.stderr

    victim = daemons[2]
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    poll(lambda: [victim.name] if is_running(victim) else [], 10.0, "the node to die")

    def repaired() -> list[str]:
        code, report = status_json(cluster_dir)
        problems = [] if code == 3 else [f"exit code {code}, expected 3 (a daemon is down)"]
        node = next(d for d in report["daemons"] if d["name"] == victim.name)
        if node["running"]:
            problems.append(f"{victim.name} still reported running")
        for topic in ("news", "sports"):
            entry = report["topics"].get(topic, {})
            if entry.get("members") != 2 or not entry.get("legitimate"):
                problems.append(f"{topic}: {entry}")
        return problems

    poll(repaired, 30.0, "the ring repaired without the dead node", 0.5)
    text = cluster_cmd(cluster_dir, "status")
    assert text.returncode == 3
    assert f"{victim.name}" in text.stdout and "not running" in text.stdout

    down = cluster_cmd(cluster_dir, "down")
    assert down.returncode == 0, down.stderr
    assert "stopped 3 daemons" in down.stdout
    assert not any(is_running(d) for d in daemons)
    assert all(exited(d.pid) for d in daemons)
    assert all(port_is_free(int(d.ref.rpartition(":")[2])) for d in daemons)
    assert all(d.pid is None for d in entries(cluster_dir))

    again = cluster_cmd(cluster_dir, "down")
    assert again.returncode == 0 and "nothing was running" in again.stdout
    gone = cluster_cmd(cluster_dir, "status")
    assert gone.returncode == 1 and "is not running" in gone.stderr
    assert f"pubsub cluster up --dir {cluster_dir.resolve()}`" in gone.stderr


def test_status_checks_a_member_the_cluster_did_not_start(cluster_dir: Path, tmp_path: Path) -> None:
    """A node run by hand against the cluster's supervisor is a member of its rings: status
    asks it too, lists it as a member the cluster did not start, and finds the ring whole
    (it used to report it as "member reports no state" and the ring as not legitimate)."""
    import asyncio

    from pubsub.client.library import Client
    from pubsub.ops.processes import pick_free_ports, terminate

    done = cluster_cmd(cluster_dir, "up", "-n", "2", "--topics", "news", "--interval", "0.2")
    assert done.returncode == 0, done.stderr
    supervisor = entries(cluster_dir)[0].ref
    (port,) = pick_free_ports(1)
    ref = f"127.0.0.1:{port}"
    extra = subprocess.Popen(
        [sys.executable, "-m", "pubsub.cli.main", "--log-level", "warning", "node", "--listen", ref,
         "--supervisor", supervisor, "--interval", "0.2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        async def join() -> None:
            async with Client(ref) as client:
                await client.join("news")

        def joined() -> list[str]:
            if extra.poll() is not None:
                return [f"the extra node exited: {extra.stderr.read() if extra.stderr else ''}"]
            try:
                asyncio.run(join())
            except Exception as exc:  # noqa: BLE001 - not listening yet: try again
                return [str(exc)]
            return []

        poll(joined, 30.0, "the extra node to join news", 0.2)

        def whole() -> list[str]:
            code, report = status_json(cluster_dir)
            news = report["topics"].get("news", {})
            if code != 0 or news.get("members") != 3 or not news.get("legitimate"):
                return [f"exit {code}: {news}"]
            return []

        poll(whole, 30.0, "a legitimate ring of three with the extra node", 0.5)
        code, report = status_json(cluster_dir)
        assert report["other_members"] == [{"ref": ref, "answering": True, "error": None}]
        text = cluster_cmd(cluster_dir, "status")
        assert text.returncode == 0, text.stdout
        assert f"member {ref} (not started by this cluster): answering" in text.stdout
        assert "topic news: 3 members, database legitimate, ring legitimate" in text.stdout
    finally:
        terminate(extra)
        cluster_cmd(cluster_dir, "down")


def test_up_with_http_gives_every_node_its_http_api(cluster_dir: Path) -> None:
    """`up --http`: every node serves its HTTP API on a free port, named by `up`, the
    manifest and `status`; a publication through one node's API is in another's history."""
    done = cluster_cmd(cluster_dir, "up", "-n", "2", "--topics", "news", "--interval", "0.2", "--http")
    assert done.returncode == 0, done.stderr
    try:
        code, report = status_json(cluster_dir)
        assert code == 0, report
        apis = [d["http"] for d in report["daemons"] if d["role"] == "node"]
        assert len(apis) == 2 and all(apis) and len(set(apis)) == 2
        assert [d["http"] for d in report["daemons"] if d["role"] == "supervisor"] == [None]
        for api in apis:
            assert f"HTTP API http://{api}/v1/status" in done.stdout
        text = cluster_cmd(cluster_dir, "status")
        assert "HTTP API" in text.stdout and all(api in text.stdout for api in apis)
        body = json.dumps({"payload": "over http", "msg_id": "http-1"}).encode()
        publish = urllib.request.Request(
            f"http://{apis[0]}/v1/topics/news/publications", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(publish, timeout=10) as answer:
            assert answer.status == 200

        def held() -> list[str]:
            with urllib.request.urlopen(f"http://{apis[1]}/v1/topics/news/publications", timeout=10) as answer:
                payloads = [p["payload"] for p in json.loads(answer.read())["publications"]]
            return [] if payloads == ["over http"] else [f"node-01 holds {payloads}"]

        poll(held, 20.0, "the publication at the other node's API", 0.2)
    finally:
        down = cluster_cmd(cluster_dir, "down")
    assert down.returncode == 0, down.stderr
    assert all(port_is_free(int(api.rpartition(":")[2])) for api in apis)


def test_down_removes_the_clusters_file_from_the_directory_prometheus_watches(cluster_dir: Path, tmp_path: Path) -> None:
    """With PUBSUB_PROMETHEUS_TARGETS_DIR, `up --metrics` writes the cluster's scrape targets
    there and `down` (another process) removes that file, so Prometheus stops scraping."""
    watched = tmp_path / "targets"
    watched.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "cluster", "up", "-n", "1", "--metrics", "--no-wait",
         "--dir", str(cluster_dir)],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "PUBSUB_PROMETHEUS_TARGETS_DIR": str(watched)},
    )
    assert done.returncode == 0, done.stderr
    try:
        [written] = list(watched.glob("*.json"))
        targets = {t for group in json.loads(written.read_text()) for t in group["targets"]}
        assert len(targets) == 2, targets  # the supervisor's and the node's endpoints
        assert read_manifest(cluster_dir)["prometheus_targets_file"] == str(written)
    finally:
        assert cluster_cmd(cluster_dir, "down").returncode == 0
    assert list(watched.iterdir()) == []


def test_up_again_after_down_starts_afresh(cluster_dir: Path) -> None:
    """A directory whose cluster was stopped takes a new one: new data, the new size; with
    --metrics and --events its daemons serve metrics and write the event stream."""
    assert cluster_cmd(cluster_dir, "up", "-n", "2", "--topics", "a").returncode == 0
    first = entries(cluster_dir)
    assert cluster_cmd(cluster_dir, "down").returncode == 0
    done = cluster_cmd(
        cluster_dir, "up", "-n", "1", "--topics", "b", "--no-wait", "--metrics", "--events"
    )
    assert done.returncode == 0, done.stderr
    try:
        second = entries(cluster_dir)
        assert len(second) == 2 and all(is_running(d) for d in second)
        assert not any(is_running(d) for d in first)
        _, report = status_json(cluster_dir)
        ports = [d["metrics_port"] for d in report["daemons"]]
        assert all(isinstance(p, int) for p in ports), report["daemons"]
        with urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/metrics", timeout=5) as r:
            assert b"pubsub_" in r.read()
        # where to scrape is shown, by `up` and by `status`
        assert f"metrics http://127.0.0.1:{ports[1]}/metrics" in done.stdout, done.stdout
        text = cluster_cmd(cluster_dir, "status").stdout
        assert "METRICS" in text and f"127.0.0.1:{ports[0]}" in text, text
        poll(
            lambda: [] if list((cluster_dir / "events").glob("*.jsonl")) else ["no event file"],
            20.0, "an event file in DIR/events", 0.3,
        )

        def only_b() -> list[str]:
            code, report = status_json(cluster_dir)
            return [] if set(report["topics"]) == {"b"} and code == 0 else [str(report["topics"])]

        # the old supervisor database (topic "a") is gone; "b" becomes legitimate
        poll(only_b, 20.0, "topic b alone, legitimate", 0.3)
        assert "topic b: 1 member, database legitimate" in cluster_cmd(cluster_dir, "status").stdout
    finally:
        assert cluster_cmd(cluster_dir, "down").returncode == 0
    assert not any(is_running(d) for d in second)


def test_up_on_ports_another_cluster_holds_fails_and_leaves_that_cluster_alone(tmp_path: Path) -> None:
    """A second cluster given the first one's ports stops with the reason, instead of taking
    the first cluster's answers for its own (and making its nodes join its topics)."""
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    base = str(contiguous_base_port(3))
    started: list[DaemonEntry] = []
    try:
        done = cluster_cmd(first_dir, "up", "-n", "2", "--topics", "a", "--base-port", base)
        assert done.returncode == 0, done.stderr
        started += entries(first_dir)
        done = cluster_cmd(second_dir, "up", "-n", "2", "--topics", "b", "--base-port", base)
        started += entries(second_dir)
        assert done.returncode == 1, done.stdout
        assert "is answered by another process" in done.stderr and "the port is in use" in done.stderr
        assert "Traceback" not in done.stderr
        assert not any(is_running(d) for d in entries(second_dir))
        code, report = status_json(first_dir)
        assert code == 0 and set(report["topics"]) == {"a"}, report["topics"]
    finally:
        cluster_cmd(first_dir, "down")
        for entry in started:
            if is_running(entry):
                assert entry.pid is not None
                os.kill(entry.pid, signal.SIGKILL)


def test_no_cluster_errors(tmp_path: Path) -> None:
    """status without a cluster and with a broken manifest fail with one clear line; down
    without a cluster succeeds (idempotent)."""
    empty = tmp_path / "empty"
    done = cluster_cmd(empty, "status")
    assert done.returncode == 1
    assert "no cluster in" in done.stderr and f"pubsub cluster up --dir {empty.resolve()}`" in done.stderr
    assert "Traceback" not in done.stderr
    down = cluster_cmd(empty, "down")
    assert down.returncode == 0 and "nothing to stop" in down.stdout

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "cluster.json").write_text("{not json")
    for args in (("status", "--json"), ("down",)):
        done = cluster_cmd(broken, *args)
        assert done.returncode == 1, args
        assert "is not a cluster manifest" in done.stderr and "Traceback" not in done.stderr

    # `cluster status` without --dir in the directory of a cluster started with --dir DIR
    # looks in DIR/.pubsub-cluster: it says that DIR itself holds one
    done = cluster_cmd(broken / ".pubsub-cluster", "status")
    assert done.returncode == 1 and f"; {broken} holds one: --dir {broken};" in done.stderr, done.stderr


def test_a_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    """A manifest pid that now belongs to another program does not count as running, so
    down leaves that program alone."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        directory = tmp_path / "reused"
        directory.mkdir()
        entry = {"name": "supervisor", "ref": "127.0.0.1:1", "pid": other.pid, "log": None}
        (directory / "cluster.json").write_text(json.dumps({"supervisor": entry, "nodes": []}))
        assert not is_running(DaemonEntry("supervisor", "127.0.0.1:1", other.pid, None))
        done = cluster_cmd(directory, "down")
        assert done.returncode == 0 and "nothing was running" in done.stdout
        assert other.poll() is None, "down signalled a process that is not a daemon"
    finally:
        other.kill()
        other.wait()
