"""`pick_free_ports`: free ports, and leases so that callers starting side by side (tests on
parallel workers, two local clusters) never get the same port before their daemons bind it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from pubsub.ops.processes import pick_free_ports, port_is_free, port_leases_path

PICK = """
import json, random, sys
from pathlib import Path
from pubsub.ops.processes import pick_free_ports
print(json.dumps(pick_free_ports(int(sys.argv[2]), rng=random.Random(7), leases_file=Path(sys.argv[1]))))
"""


def test_picked_ports_are_distinct_free_and_below_the_ephemeral_range(tmp_path: Path) -> None:
    ports = pick_free_ports(20, leases_file=tmp_path / "leases.json")
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert len(set(ports)) == 20
    assert all(10000 <= port < low and port_is_free(port) for port in ports)


def test_a_leased_port_is_not_handed_out_again_even_while_still_free(tmp_path: Path) -> None:
    leases = tmp_path / "leases.json"
    first = pick_free_ports(5, rng=random.Random(7), leases_file=leases)
    second = pick_free_ports(5, rng=random.Random(7), leases_file=leases)  # the same draws
    assert all(port_is_free(port) for port in first)  # nobody bound them
    assert not set(first) & set(second)
    assert set(json.loads(leases.read_text())) == {str(port) for port in first + second}


def test_processes_picking_at_once_share_the_leases(tmp_path: Path) -> None:
    leases = tmp_path / "leases.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    pickers = [
        subprocess.Popen([sys.executable, "-c", PICK, str(leases), "40"], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(4)
    ]
    try:
        outputs = [picker.communicate(timeout=60)[0] for picker in pickers]
    finally:
        for picker in pickers:
            picker.kill()
            picker.wait(timeout=10)
    assert [picker.returncode for picker in pickers] == [0, 0, 0, 0]
    picked = [port for output in outputs for port in json.loads(output)]
    assert len(picked) == 160 and len(set(picked)) == 160  # four callers with the same draws


def test_expired_leases_are_dropped_and_their_ports_given_out_again(tmp_path: Path) -> None:
    leases = tmp_path / "leases.json"
    first = pick_free_ports(3, rng=random.Random(7), leases_file=leases, lease=0.0)
    again = pick_free_ports(3, rng=random.Random(7), leases_file=leases)
    assert again == first
    assert set(json.loads(leases.read_text())) == {str(port) for port in first}


def test_a_damaged_leases_file_counts_as_empty_and_is_rewritten(tmp_path: Path) -> None:
    leases = tmp_path / "leases.json"
    for damaged in ("not json", "[1, 2]", '{"x": "y"}'):
        leases.write_text(damaged)
        ports = pick_free_ports(2, leases_file=leases)
        assert set(json.loads(leases.read_text())) == {str(port) for port in ports}


def test_a_symlink_in_place_of_the_leases_file_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    (tmp_path / "leases.json").symlink_to(target)
    ports = pick_free_ports(3, leases_file=tmp_path / "leases.json")  # picks without leases
    assert len(set(ports)) == 3 and all(port_is_free(port) for port in ports)
    assert target.read_text() == "keep me"


def test_the_default_leases_file_is_per_user_and_private() -> None:
    pick_free_ports(1)
    path = port_leases_path()
    assert str(os.getuid()) in path.name
    assert path.stat().st_mode & 0o077 == 0


def test_local_cluster_ports_for_the_web_view_and_the_http_apis(tmp_path: Path) -> None:
    """Describing a cluster (nothing starts): the web view alone (as `make demo` asks; the
    first version of `http` broke it), the HTTP APIs alone and both get distinct ports, and
    only `http` gives the nodes an HTTP API."""
    from pubsub.ops.localcluster import LocalCluster

    for web, http in ((True, False), (False, True), (True, True), (False, False)):
        cluster = LocalCluster(tmp_path / f"{web}-{http}", 3, web=web, http=http)
        apis = [node.http_ref for node in cluster.nodes]
        assert (cluster.web_port is not None) == web
        assert all(apis) if http else apis == [None, None, None]
        used = [d.port for d in cluster.daemons()] + [d.metrics_port for d in cluster.daemons() if d.metrics_port]
        used += [int(d.admin_ref.rpartition(":")[2]) for d in cluster.daemons() if d.admin_ref]
        used += [int(a.rpartition(":")[2]) for a in apis if a] + ([cluster.web_port] if cluster.web_port else [])
        assert len(used) == len(set(used)), used
        assert all(["--http-listen", a] == n.args[-2:] for n, a in zip(cluster.nodes, apis, strict=True) if a)


def test_make_demo_runs_to_its_end() -> None:
    """The README's first command, as `make demo` runs it: it ends, says so, and stops
    every process it started."""
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.ops.demo"], capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert "every process stopped" in done.stdout, done.stdout[-2000:]
