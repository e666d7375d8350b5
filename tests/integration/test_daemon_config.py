"""Daemon operations with real processes: configuration files (``--config`` /
``PUBSUB_CONFIG``) for the supervisor, the node and the broker, JSON log lines, and the
retention of event files.

Every daemon listens on free ports of 127.0.0.1, every wait is a bounded poll, and every
process is stopped by its pid (SIGTERM, then SIGKILL) whatever the test's outcome.
Before this work none of it existed: ``--config`` was an unknown option, log lines were
text only, and event files piled up (a daemon rotates every 2 s by default: about 30
files a minute) without ever being deleted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pubsub.kernel.control import Reply, StatusRequest
from pubsub.ops.processes import pick_free_ports, poll
from pubsub.runtime.client import RequestError, request

pytestmark = pytest.mark.integration

START_TIMEOUT = 30.0


class Proc:
    """One `pubsub` process with its output in a file."""

    def __init__(self, log: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.args = args
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSUB_")}
        full_env.update(env or {})
        full_env["PYTHONUNBUFFERED"] = "1"
        self.out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pubsub.cli.main", *args],
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.out.close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    try:
        yield started
    finally:
        for p in reversed(started):
            p.stop()


def status(ref: str) -> dict[str, Any] | None:
    import asyncio

    try:
        reply = asyncio.run(request(ref, StatusRequest(), 1.0))
    except RequestError:
        return None
    return reply.body if isinstance(reply, Reply) else None


def wait_answering(proc: Proc, ref: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def problems() -> list[str]:
        if proc.proc.poll() is not None:
            raise AssertionError(f"{proc.args} exited {proc.proc.returncode}:\n{proc.text()}")
        body = status(ref)
        if body is None:
            return [f"{ref} does not answer yet"]
        found.update(body)
        return []

    poll(problems, START_TIMEOUT, f"{ref} to answer")
    return found


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


# ------------------------------------------------------------------ configuration files
def test_a_supervisor_and_a_node_run_from_configuration_files_alone(tmp_path: Path, procs: list[Proc]) -> None:
    sup_port, node_port, metrics_port = pick_free_ports(3)
    sup_ref, node_ref = f"127.0.0.1:{sup_port}", f"127.0.0.1:{node_port}"
    (tmp_path / "sup.yaml").write_text(
        f"listen: {sup_ref}\ndata_dir: sup-data\ntimeout_interval: 0.2\nconfig-budget: 2\n"
    )
    (tmp_path / "node.toml").write_text(
        f'listen = "{node_ref}"\nsupervisor = "{sup_ref}"\ndata_dir = "node-data"\n'
        f"metrics_port = {metrics_port}\ndissemination = \"flood\"\nlog_format = \"json\"\n"
    )
    sup = Proc(tmp_path / "sup.log", "supervisor", "--config", str(tmp_path / "sup.yaml"))
    procs.append(sup)
    node = Proc(tmp_path / "node.log", "node", env={"PUBSUB_CONFIG": str(tmp_path / "node.toml")})
    procs.append(node)
    assert wait_answering(sup, sup_ref)["config_budget"] == 2
    body = wait_answering(node, node_ref)
    assert body["supervisor"] == sup_ref
    assert body["publications"]["dissemination"] == "flood"
    assert body["publications"]["store"].startswith(str(tmp_path / "node-data"))  # relative to the file
    assert (tmp_path / "sup-data").is_dir()
    assert f'pubsub_daemon_info{{ref="{node_ref}",role="node"}} 1.0' in scrape(metrics_port)
    node.stop()
    lines = [line for line in node.text().splitlines() if line.strip()]
    assert lines, "the node logged nothing"
    for line in lines:  # log_format json from the file: every line is one JSON object
        entry = json.loads(line)
        assert {"ts", "time", "level", "logger", "message", "pid"} <= set(entry), entry


def test_one_daemon_per_data_directory(tmp_path: Path, procs: list[Proc]) -> None:
    """A second supervisor or node on a data directory in use stops with one line naming the
    holder, and the first goes on; once the holder is gone, even killed, the directory is
    free (a newer node converting the store under an older one was found this way)."""
    sup_port, sup2_port, node_port, node2_port = pick_free_ports(4)
    sup_ref, node_ref = f"127.0.0.1:{sup_port}", f"127.0.0.1:{node_port}"
    sup = Proc(tmp_path / "sup.log", "supervisor", "--listen", sup_ref, "--data", str(tmp_path / "s"))
    procs.append(sup)
    node = Proc(tmp_path / "node.log", "node", "--listen", node_ref, "--supervisor", sup_ref, "--data", str(tmp_path / "n"))
    procs.append(node)
    wait_answering(sup, sup_ref)
    wait_answering(node, node_ref)
    sup2 = Proc(tmp_path / "sup2.log", "supervisor", "--listen", f"127.0.0.1:{sup2_port}", "--data", str(tmp_path / "s"))
    procs.append(sup2)
    node2_args = ("node", "--listen", f"127.0.0.1:{node2_port}", "--supervisor", sup_ref, "--data", str(tmp_path / "n"))
    node2 = Proc(tmp_path / "node2.log", *node2_args)
    procs.append(node2)
    for second, first in ((sup2, sup), (node2, node)):
        assert second.wait_exit() != 0
        assert f"is in use by another process (pid {first.proc.pid}): one daemon per data directory" in second.text()
        assert len([line for line in second.text().splitlines() if line.strip()]) == 1, second.text()
    wait_answering(sup, sup_ref)
    wait_answering(node, node_ref)
    node.proc.kill()  # SIGKILL: the kernel releases the lock with the process
    node.proc.wait(timeout=10)
    again = Proc(tmp_path / "node3.log", *node2_args)
    procs.append(again)
    wait_answering(again, f"127.0.0.1:{node2_port}")


def test_flags_beat_the_environment_which_beats_the_file(tmp_path: Path, procs: list[Proc]) -> None:
    sup_port, node_port, file_port, env_port, flag_port = pick_free_ports(5)
    sup_ref, node_ref = f"127.0.0.1:{sup_port}", f"127.0.0.1:{node_port}"
    config = tmp_path / "node.yaml"
    config.write_text(f"listen: {node_ref}\nsupervisor: {sup_ref}\nmetrics_port: {file_port}\n")
    sup = Proc(tmp_path / "sup.log", "supervisor", "--listen", sup_ref, "--data", str(tmp_path / "s"))
    procs.append(sup)
    wait_answering(sup, sup_ref)
    for env, flags, port in (
        ({}, (), file_port),
        ({"PUBSUB_METRICS_PORT": str(env_port)}, (), env_port),
        ({"PUBSUB_METRICS_PORT": str(env_port)}, ("--metrics-port", str(flag_port)), flag_port),
    ):
        node = Proc(tmp_path / f"node-{port}.log", "node", "--config", str(config), *flags, env=env)
        procs.append(node)
        wait_answering(node, node_ref)
        assert f'ref="{node_ref}"' in scrape(port), (env, flags)
        node.stop()


@pytest.mark.parametrize(
    ("command", "content", "message"),
    [
        ("node", "listen: 127.0.0.1:1\nsupervisor: 127.0.0.1:2\ntimeout_intervall: 0.5\n",
         "unknown setting timeout_intervall for a node"),
        ("supervisor", "listen: 127.0.0.1:1\ndata_dir: d\nflooding: false\n",
         "unknown setting flooding for the supervisor"),
        ("node", "listen: 127.0.0.1:1\nsupervisor: 127.0.0.1:2\ntimeout_interval: -3\n",
         "timeout_interval (--interval / PUBSUB_TIMEOUT_INTERVAL / config file"),
        ("node", "listen: nowhere\nsupervisor: 127.0.0.1:2\n", "listen (--listen / config file"),
        ("node", "listen: [1, 2\n", "is not valid YAML (line 2, column 1)"),
        ("supervisor", "- listen\n", "must be a mapping of setting names to values"),
        ("node", "supervisor: 127.0.0.1:2\n", "Missing option '--listen' (or listen in the --config file)"),
        ("supervisor", "listen: 127.0.0.1:1\ndata_dir: d\nlog_level: loud\n", "log_level (--log-level"),
        ("broker", "broker_topology: t.json\nbroker_id: a,0\nbroker_tua: 3\n", "unknown setting broker_tua for a broker"),
    ],
)
def test_bad_configuration_files_stop_a_daemon_with_one_line(
    tmp_path: Path, command: str, content: str, message: str
) -> None:
    config = tmp_path / "daemon.yaml"
    config.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", command, "--config", str(config)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("PUBSUB_")},
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith("Error:")]) == 1


@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        ("node", ["--http-listen", "127.0.0.1:{a}"], "the node's --http-listen 127.0.0.1:{a} takes the port of its --listen"),
        ("node", ["--metrics-port", "{b}", "--admin-listen", "127.0.0.1:{b}"],
         "the node's --admin-listen 127.0.0.1:{b} takes the port of its --metrics-port 127.0.0.1:{b}"),
        ("supervisor", ["--data", "{tmp}", "--web-listen", "127.0.0.1:{a}"],
         "the supervisor's --web-listen 127.0.0.1:{a} takes the port of its --listen"),
    ],
)
def test_two_listeners_of_one_daemon_on_one_port_are_a_configuration_error(
    tmp_path: Path, command: str, extra: list[str], message: str
) -> None:
    """Refused before anything listens (exit 2, one line), instead of "address already in
    use" once the first listener is up."""
    a, b = pick_free_ports(2)
    fill = {"a": a, "b": b, "tmp": tmp_path / "data"}
    argv = [command, "--listen", f"127.0.0.1:{a}", *(["--supervisor", f"127.0.0.1:{b}"] if command == "node" else [])]
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", *argv, *(arg.format(**fill) for arg in extra)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("PUBSUB_")},
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message.format(**fill) in done.stderr and "give each listener its own port" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "listening" not in done.stderr


def test_a_broker_runs_from_a_configuration_file(tmp_path: Path, procs: list[Proc]) -> None:
    a_port, b_port = pick_free_ports(2)
    (tmp_path / "topo.json").write_text(json.dumps({
        "factor": [["a", "b"]], "m": 1,
        "addresses": {"a,0": f"127.0.0.1:{a_port}", "b,0": f"127.0.0.1:{b_port}"},
    }))
    (tmp_path / "a.yaml").write_text("broker_topology: topo.json\nbroker_id: a,0\nbroker_tau: 7\nbroker_heartbeat: 0\n")
    broker = Proc(tmp_path / "a.log", "broker", "--config", str(tmp_path / "a.yaml"))
    procs.append(broker)
    body = wait_answering(broker, f"127.0.0.1:{a_port}")
    assert body["settings"]["tau"] == 7 and body["settings"]["heartbeat"] == 0


# ------------------------------------------------------------------ JSON logs
def test_json_log_lines_from_the_flag(tmp_path: Path, procs: list[Proc]) -> None:
    (port,) = pick_free_ports(1)
    sup = Proc(tmp_path / "sup.log", "--log-format", "json", "--log-level", "debug", "supervisor",
               "--listen", f"127.0.0.1:{port}", "--data", str(tmp_path / "d"))
    procs.append(sup)
    wait_answering(sup, f"127.0.0.1:{port}")
    sup.stop()
    entries = [json.loads(line) for line in sup.text().splitlines() if line.strip()]
    assert entries and all(e["pid"] == sup.proc.pid for e in entries)
    assert any(e["level"] == "debug" for e in entries) or any(e["level"] == "info" for e in entries)


# ------------------------------------------------------------------ event retention
def test_event_files_are_pruned_as_the_daemons_rotate(tmp_path: Path, procs: list[Proc]) -> None:
    """Daemons rotating every 0.1 s keep at most PUBSUB_EVENTS_RETAIN_FILES files each,
    and never touch a file that is not theirs."""
    events = tmp_path / "events"
    events.mkdir()
    foreign = events / "chaos-chaos-1-000000.jsonl"
    foreign.write_text('{"ts": 1, "kind": "marker"}\n')
    sup_port, node_port = pick_free_ports(2)
    sup_ref, node_ref = f"127.0.0.1:{sup_port}", f"127.0.0.1:{node_port}"
    env = {
        "PUBSUB_EVENTS_DIR": str(events),
        "PUBSUB_EVENTS_ROTATE_SECONDS": "0.1",
        "PUBSUB_EVENTS_RETAIN_FILES": "4",
        "PUBSUB_TIMEOUT_INTERVAL": "0.05",
    }
    sup = Proc(tmp_path / "sup.log", "supervisor", "--listen", sup_ref, "--data", str(tmp_path / "s"), env=env)
    procs.append(sup)
    node = Proc(tmp_path / "node.log", "node", "--listen", node_ref, "--supervisor", sup_ref, env=env)
    procs.append(node)
    wait_answering(sup, sup_ref)
    wait_answering(node, node_ref)
    pattern = re.compile(r"(supervisor|node)-127\.0\.0\.1_(\d+)-\d+-(\d{6})\.jsonl")

    def highest_seq() -> dict[str, int]:
        seqs: dict[str, int] = {}
        for path in events.glob("*.jsonl"):
            m = pattern.fullmatch(path.name)
            if m:
                seqs[m.group(1)] = max(seqs.get(m.group(1), 0), int(m.group(3)))
        return seqs

    def not_enough_rotations() -> list[str]:
        seqs = highest_seq()
        return [f"{role}: {seqs.get(role, 0)} rotations" for role in ("supervisor", "node") if seqs.get(role, 0) < 15]

    poll(not_enough_rotations, 60, "15 rotations of each daemon")
    for role in ("supervisor", "node"):
        kept = list(events.glob(f"{role}-*.jsonl"))
        assert len(kept) <= 4, (role, sorted(p.name for p in kept))
    assert foreign.exists()
    sup.stop()
    node.stop()
    for role in ("supervisor", "node"):
        assert len(list(events.glob(f"{role}-*.jsonl"))) <= 4
