"""docker-compose.yml for real: a supervisor, 4 nodes, Prometheus and the Spark analysis in
containers (podman + podman-compose), driven through the `cli` service.

FIRST-TIME SETUP IS EXPENSIVE.  Before the cluster test, `podman_env` runs
deploy/podman-setup.sh, which is idempotent and cached: on a fresh machine it installs
podman, runc and debootstrap (apt-get) and podman-compose (pip), debootstraps the Debian base
image (1-2 minutes), builds the Prometheus image from Debian's package and the project's
image from host-built wheels (about a minute, more when pyspark's wheel has to be
downloaded); afterwards it only rebuilds the project's image when the sources changed
(seconds to a minute: the dependency layers are cached) and otherwise takes a few seconds.
The test skips -- saying why -- only when that script reports that podman cannot be
installed or run on this machine (exit 77).

The cluster test itself (about 2 minutes on a quiet 2-core machine, most of it Spark's
first micro-batch; several minutes when the machine is loaded): ``up -d --scale node=4``
under a project name unique to this run; wait until the 4 nodes form exactly SR(4) (the
independent oracle, tests/checker.py); run every healthcheck; check that a node runs the
compiled trie; publish twice through ``run
--rm cli pubsub publish`` (once via the service name ``node:7001``); see both publications
held by every node (client library, one ``podman exec`` per look), in ``pubsub history``
and in ``pubsub subscribe`` through the cli container; see Prometheus scrape every daemon;
kill a node container and see the other three form exactly SR(3) with no reference to the
dead one, and a new publication reach them; see the analysis service's summary of the
event stream in the shared volume.  Every wait is bounded; ``down -v`` (and a forced
removal by project label) runs in a ``finally``, and the test checks that nothing of the
project is left.

The static tests at the end check the compose file and the container entry point without
podman.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from pubsub.ops.members import members_of
from pubsub.ops.processes import pick_free_ports, poll, terminate
from tests.checker import compare
from tests.cluster_checks import referenced

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
#: The override for the overlays that run one supervisor (clique, tco, omen).
ONE_SUPERVISOR = ROOT / "deploy" / "compose.one-supervisor.yml"
SETUP = ROOT / "deploy" / "podman-setup.sh"
IMAGE = "localhost/pubsub-skipring:latest"
PROMETHEUS_IMAGE = "localhost/pubsub-prometheus:bookworm"
TOPIC = "news"
N_NODES = 4
NODE_PORT = 7001
SUPERVISOR = "supervisor:7000"
#: The sharded supervisors of the compose file (each topic at the one hashing assigns).
SUPERVISORS = [SUPERVISOR, "supervisor-2:7000", "supervisor-3:7000"]
#: Seconds the one-time setup may take on a fresh machine (apt, debootstrap, image builds).
SETUP_TIMEOUT = 1800
#: Seconds for the rings to form / repair, publications to spread, the analysis to report.
CONVERGE_TIMEOUT = 90.0
DELIVERY_TIMEOUT = 60.0
#: Spark's first micro-batch takes ~1 min on a quiet 2-core machine, several on a loaded one.
ANALYSIS_TIMEOUT = 480.0

#: Run inside a container: the status of every reference given, as one JSON object.
STATUS_SCRIPT = """
import asyncio, json, sys
from pubsub.kernel.control import Reply, StatusRequest
from pubsub.runtime.client import request

async def one(ref):
    try:
        reply = await request(ref, StatusRequest(), 3.0)
    except Exception as exc:
        return {"error": str(exc)}
    return reply.body if isinstance(reply, Reply) else {"error": repr(reply)}

async def every(refs):
    return await asyncio.gather(*(one(r) for r in refs))

refs = sys.argv[1:]
print(json.dumps(dict(zip(refs, asyncio.run(every(refs))))))
"""

#: Run inside a container: the keys (hex) of what each node holds for a topic, as JSON.
HISTORY_SCRIPT = """
import asyncio, json, sys
from pubsub.client.library import Client

async def one(ref, topic):
    try:
        return sorted(d.key.hex() for d in await Client(ref, timeout=3.0).history(topic))
    except Exception as exc:
        return {"error": str(exc)}

async def every(topic, refs):
    return await asyncio.gather(*(one(r, topic) for r in refs))

topic, refs = sys.argv[1], sys.argv[2:]
print(json.dumps(dict(zip(refs, asyncio.run(every(topic, refs))))))
"""

#: Run inside a container: Prometheus' active targets as [job, instance, health].
TARGETS_SCRIPT = """
import json, urllib.request
with urllib.request.urlopen("http://prometheus:9090/api/v1/targets", timeout=5) as r:
    doc = json.load(r)
print(json.dumps([[t["labels"]["job"], t["labels"]["instance"], t["health"]]
                  for t in doc["data"]["activeTargets"]]))
"""


# --- podman ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def podman_env() -> dict[str, str]:
    """The environment for podman and podman-compose, after the (cached) one-time setup."""
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(ROOT / "deploy" / "containers.conf"))
    env["PYTHON"] = sys.executable
    env["PUBSUB_IMAGE"] = IMAGE
    done = subprocess.run(
        ["bash", str(SETUP)],
        env=env,
        capture_output=True,
        text=True,
        timeout=SETUP_TIMEOUT,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    if done.returncode == 77:
        reason = (done.stderr.strip().splitlines() or ["(no reason given)"])[-1]
        pytest.skip(f"deploy/podman-setup.sh: {reason}")
    assert done.returncode == 0, f"deploy/podman-setup.sh failed:\n{done.stdout}\n{done.stderr}"
    return env


class Compose:
    """One compose project: podman-compose and podman commands, bounded in time."""

    def __init__(self, env: Mapping[str, str], project: str, files: Sequence[Path] = (COMPOSE_FILE,)) -> None:
        self.project = project
        self.env = dict(env)
        self.files = list(files)

    def compose(
        self, *args: str, timeout: float = 180.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "podman_compose", "-p", self.project,
                   *(arg for file in self.files for arg in ("-f", str(file))), *args]
        return self._run(command, timeout, check)

    def podman(
        self, *args: str, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self._run(["podman", *args], timeout, check)

    def _run(
        self, command: Sequence[str], timeout: float, check: bool
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            list(command), env=self.env, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL, cwd=ROOT,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"`{' '.join(command[:8])} ...` exited {done.returncode}:\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def cli(self, *args: str, timeout: float = 120.0) -> str:
        """``podman-compose run --rm cli ARGS`` (the documented client path); its stdout."""
        return self.compose("--profile", "cli", "run", "--rm", "-T", "cli", *args,
                            timeout=timeout).stdout

    def containers(self, service: str | None = None, *, all_states: bool = False) -> list[str]:
        """Names of this project's containers (of one service), sorted."""
        args = ["ps", "--format", "{{.Names}}",
                "--filter", f"label=io.podman.compose.project={self.project}"]
        if service is not None:
            args += ["--filter", f"label=com.docker.compose.service={service}"]
        if all_states:
            args.insert(1, "-a")
        return sorted(self.podman(*args).stdout.split())

    def ip(self, container: str) -> str:
        out = self.podman(
            "inspect", "--format",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container,
        ).stdout.split()
        assert out, f"{container} has no IP address"
        return out[0]

    def exec(self, container: str, *args: str, timeout: float = 60.0) -> str:
        done = self.podman("exec", container, *args, timeout=timeout, check=False)
        if done.returncode != 0:
            raise AssertionError(
                f"`podman exec {container} {' '.join(args)[:200]} ...` exited {done.returncode}:"
                f"\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}\n{self.post_mortem(container)}"
            )
        return done.stdout

    def post_mortem(self, container: str) -> str:
        """The container's state and last log lines, for a failed exec (an exec is killed
        with status 137 when the container's main process exits under it)."""
        state = self.podman(
            "inspect", "--format",
            "status={{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}} "
            "started={{.State.StartedAt}} finished={{.State.FinishedAt}} "
            "restarts={{.RestartCount}}",
            container, check=False,
        )
        logs = self.podman("logs", "--tail", "30", container, check=False)
        return (f"{container}: {state.stdout.strip()} {state.stderr.strip()}\n"
                f"last log lines:\n{logs.stdout}{logs.stderr}")

    def statuses(self, via: str, refs: Sequence[str]) -> dict[str, dict[str, Any]]:
        out = self.exec(via, "python", "-c", STATUS_SCRIPT, *refs)
        return dict(json.loads(out))

    def leftovers(self) -> list[str]:
        """Containers, volumes and networks of this project that still exist."""
        label = f"label=io.podman.compose.project={self.project}"
        found = self.containers(all_states=True)
        found += self.podman("volume", "ls", "-q", "--filter", label, check=False).stdout.split()
        networks = self.podman("network", "ls", "--format", "{{.Name}}", check=False).stdout
        found += [n for n in networks.split() if n.startswith(f"{self.project}_")]
        return found

    def tear_down(self) -> None:
        """``down -v``, then remove by label whatever it left (podman-compose's down only
        knows the first replica of a scaled service), bounded."""
        self.compose("down", "-v", "--remove-orphans", "-t", "3", timeout=180, check=False)
        for name in self.containers(all_states=True):
            self.podman("rm", "-f", "-t", "0", name, check=False)
        label = f"label=io.podman.compose.project={self.project}"
        for volume in self.podman("volume", "ls", "-q", "--filter", label, check=False).stdout.split():
            self.podman("volume", "rm", "-f", volume, check=False)
        self.podman("network", "rm", "-f", f"{self.project}_default", check=False)


def project(podman_env: Mapping[str, str], files: Sequence[Path] = (COMPOSE_FILE,), **extra: str) -> Iterator[Compose]:
    """A compose project with a unique name, torn down (down -v) whatever happens."""
    env = dict(podman_env)
    env.update(
        PUBSUB_IMAGE=IMAGE,
        PROMETHEUS_IMAGE=PROMETHEUS_IMAGE,
        PROMETHEUS_PORT=str(pick_free_ports(1)[0]),
        PUBSUB_TOPICS=TOPIC,
        PUBSUB_TIMEOUT_INTERVAL="0.2",
        PUBSUB_ANALYSIS_ARGS="--until-idle 900 --trigger 5",
        **extra,
    )
    c = Compose(env, f"pubsubtest{uuid.uuid4().hex[:10]}", files)
    try:
        yield c
    finally:
        c.tear_down()
    left = c.leftovers()
    assert not left, f"left behind after down -v: {left}"


@pytest.fixture
def compose(podman_env: dict[str, str]) -> Iterator[Compose]:
    """docker-compose.yml as it is: the skip ring, three sharded supervisors."""
    yield from project(podman_env)


# --- checks ------------------------------------------------------------------------------------
def ring_problems(
    c: Compose, via: str, wanted: Sequence[str], gone: Sequence[str] = ()
) -> list[str]:
    """Why the topic is not exactly SR(len(wanted)) over the nodes `wanted` ([] if it is)."""
    bodies = c.statuses(via, [*SUPERVISORS, *wanted])
    for ref in SUPERVISORS:
        if "error" in bodies[ref]:
            return [f"supervisor {ref}: {bodies[ref]['error']}"]
    holders = [ref for ref in SUPERVISORS if TOPIC in (bodies[ref].get("topics") or {})]
    if len(holders) != 1:
        return [f"{TOPIC} is held by supervisors {holders}, not by exactly one"]
    members = members_of(bodies[holders[0]], TOPIC)
    problems = []
    if set(members) != set(wanted):
        problems.append(f"supervisor lists {sorted(members)}, expected {sorted(wanted)}")
    states: dict[str, Any] = {}
    for ref in wanted:
        body = bodies[ref]
        if "error" in body:
            problems.append(f"{ref}: {body['error']}")
        elif TOPIC in (body.get("topics") or {}):
            states[ref] = body["topics"][TOPIC]
    problems += compare(members, states)
    for ref, state in states.items():
        stale = referenced(state) & set(gone)
        if stale:
            problems.append(f"{ref} still references {sorted(stale)}")
    return problems


def wait_for_ring(c: Compose, via: str, wanted: Sequence[str], gone: Sequence[str] = ()) -> None:
    """Poll until exactly SR(n) over `wanted` holds on two consecutive looks."""
    streak = [0]

    def problems() -> list[str]:
        found = ring_problems(c, via, wanted, gone)
        streak[0] = 0 if found else streak[0] + 1
        return found or ([] if streak[0] >= 2 else ["exact; looking once more"])

    poll(problems, CONVERGE_TIMEOUT, f"SR({len(wanted)}) over {len(wanted)} node containers", 1.0)


def wait_for_deliveries(c: Compose, via: str, refs: Sequence[str], keys: set[str]) -> None:
    """Poll (one exec per look) until every node in `refs` holds every key in `keys`."""

    def problems() -> list[str]:
        held = json.loads(c.exec(via, "python", "-c", HISTORY_SCRIPT, TOPIC, *refs))
        found = []
        for ref in refs:
            if isinstance(held[ref], dict):
                found.append(f"{ref}: {held[ref]['error']}")
            elif not keys <= set(held[ref]):
                found.append(f"{ref} holds {len(set(held[ref]) & keys)} of {len(keys)}")
        return found

    poll(problems, DELIVERY_TIMEOUT, "every node to hold every publication", 1.0)


def publish(c: Compose, node: str, text: str) -> dict[str, Any]:
    """Publish through the cli container; the acknowledgement."""
    out = c.cli("pubsub", "publish", TOPIC, text, "--node", node, "--json")
    ack = json.loads(out.strip().splitlines()[-1])
    assert ack["topic"] == TOPIC and ack["stored_by"], ack
    return dict(ack)


def host_pubsub(
    c: Compose, tls: Mapping[str, str] | None, *args: str
) -> subprocess.CompletedProcess[str]:
    """The host's ``pubsub ARGS`` (this virtual env), with the client certificate files
    `tls` (PUBSUB_TLS_*) or, with None, none at all (plain TCP)."""
    env = {k: v for k, v in c.env.items() if not k.startswith("PUBSUB_")}
    env.update(tls or {})
    return subprocess.run(
        [str(Path(sys.executable).with_name("pubsub")), *args], env=env, capture_output=True,
        text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=ROOT,
    )


# --- the cluster ---------------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.timeout(SETUP_TIMEOUT + 900)
def test_compose_cluster_under_podman(compose: Compose, tmp_path: Path) -> None:
    """Supervisor + 4 nodes + Prometheus + analysis in containers, every connection mutual
    TLS with certificates made on the fly: SR(4) of nodes running the compiled trie, publications through the cli container
    and from the host (a client certificate taken out with client-bundle; plain TCP is
    refused) and through a node's HTTPS API reach every node, a killed node container is
    repaired around (exactly SR(3)),
    and the analysis reports on the shared event volume."""
    c = compose
    c.compose("--profile", "analysis", "up", "-d", "--scale", f"node={N_NODES}", timeout=300)
    (sup,) = c.containers("supervisor")
    nodes = c.containers("node")
    assert len(nodes) == N_NODES, nodes
    assert len(c.containers("prometheus")) == 1 and len(c.containers("analysis")) == 1
    refs = {name: f"{c.ip(name)}:{NODE_PORT}" for name in nodes}

    # 1. the nodes found the supervisor by its service name and form exactly SR(4)
    wait_for_ring(c, sup, list(refs.values()))

    # 2. the healthchecks pass (podman runs them on demand here: no systemd timers)
    for name in [sup, *nodes]:
        poll(
            lambda name=name: [] if c.podman("healthcheck", "run", name, check=False).returncode == 0
            else [f"{name} unhealthy"],
            30.0, f"{name} healthy", 1.0,
        )

    # 2b. the image's nodes run the compiled trie (its wheel was built with it, setup.py)
    compiled = c.podman("exec", nodes[0], "/opt/pubsub/bin/python", "-c",
                        "from pubsub.publications import trie; print(trie.COMPILED)")
    assert compiled.stdout.strip() == "True", compiled

    # 3. publish through the cli container, once via the service name (any node)
    first = publish(c, f"node:{NODE_PORT}", "hello through node:7001")
    second = publish(c, refs[nodes[0]], f"hello through {refs[nodes[0]]}")
    keys = {first["key"], second["key"]}
    assert len(keys) == 2

    # 3b. from the host, through node 0's published port: a client certificate of its own
    # taken out of the tls volume (README, "Containers"); without one the node says nothing
    raw = subprocess.run(["podman", "exec", sup, "pubsub-entrypoint", "client-bundle", "hosttest"],
                         env=c.env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert raw.returncode == 0, raw.stderr
    with tarfile.open(fileobj=io.BytesIO(raw.stdout)) as tar:
        tar.extractall(tmp_path, filter="data")
    tls = {"PUBSUB_TLS_CA": str(tmp_path / "ca.crt"),
           "PUBSUB_TLS_CERT": str(tmp_path / "client-hosttest.crt"),
           "PUBSUB_TLS_KEY": str(tmp_path / "client-hosttest.key")}
    host_port = c.podman("port", nodes[0], f"{NODE_PORT}/tcp").stdout.split()[0]
    plain = host_pubsub(c, None, "publish", TOPIC, "plain TCP", "--node", host_port, "--json")
    assert plain.returncode != 0 and "PUBSUB_TLS_CA" in plain.stderr, plain
    done = host_pubsub(c, tls, "publish", TOPIC, "hello from the host", "--node", host_port, "--json")
    assert done.returncode == 0, done.stderr
    from_host = json.loads(done.stdout.strip().splitlines()[-1])
    assert from_host["topic"] == TOPIC and from_host["stored_by"], from_host
    keys.add(from_host["key"])

    # 3c. the node's HTTP API is HTTPS under TLS, with the same client certificate
    # (its certificate names the container's IP: the CA is checked, not the host name)
    https = ssl.create_default_context(cafile=tls["PUBSUB_TLS_CA"])
    https.check_hostname = False
    https.load_cert_chain(tls["PUBSUB_TLS_CERT"], tls["PUBSUB_TLS_KEY"])
    api = c.podman("port", nodes[1], "8080/tcp").stdout.split()[0]
    post = urllib.request.Request(
        f"https://{api}/v1/topics/{TOPIC}/publications", method="POST",
        data=json.dumps({"payload": "over HTTPS"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(post, timeout=30, context=https) as response:
        over_https = json.load(response)
    assert over_https["topic"] == TOPIC and over_https["stored_by"], over_https
    keys.add(over_https["key"])
    wait_for_deliveries(c, sup, list(refs.values()), keys)
    history = c.exec(sup, "pubsub", "history", TOPIC, "--node", refs[nodes[2]], "--json")
    assert {json.loads(line)["key"] for line in history.splitlines()} == keys
    streamed = c.cli("pubsub", "subscribe", TOPIC, "--node", refs[nodes[-1]],
                     "--count", "4", "--json")
    lines = [json.loads(line) for line in streamed.splitlines() if line.startswith("{")]
    assert {d["key"] for d in lines} == keys
    assert [d["local_seq"] for d in lines] == [1, 2, 3, 4]

    # 4. Prometheus (from the same compose file) scrapes every daemon it finds by DNS
    def scraped() -> list[str]:
        targets = json.loads(c.exec(sup, "python", "-c", TARGETS_SCRIPT))
        up = {(job, instance) for job, instance, health in targets if health == "up"}
        want = {("supervisor", f"{c.ip(sup)}:9100")}
        want |= {("node", ref.replace(f":{NODE_PORT}", ":9100")) for ref in refs.values()}
        return [f"{job} {instance} not scraped (targets: {targets})"
                for job, instance in sorted(want - up)]

    poll(scraped, 60.0, "Prometheus to scrape the supervisor and every node", 2.0)

    # 5. kill a node container: the other three repair the ring around it
    victim = nodes[1]
    c.podman("kill", victim)
    alive = [refs[n] for n in nodes if n != victim]
    wait_for_ring(c, sup, alive, gone=[refs[victim]])
    third = publish(c, f"node:{NODE_PORT}", "after the crash")
    wait_for_deliveries(c, sup, alive, keys | {third["key"]})

    # 6. the analysis service follows the event stream in the shared volume
    summary_path = "/var/lib/pubsub/run/analysis/summary.json"

    def analysed() -> list[str]:
        if not c.containers("analysis"):
            logs = c.podman("logs", "--tail", "20", f"{c.project}_analysis_1", check=False)
            return [f"the analysis container exited: {logs.stdout}{logs.stderr}"]
        done = c.podman("exec", sup, "cat", summary_path, check=False)
        if done.returncode != 0:
            return [f"no {summary_path} yet"]
        topic = (json.loads(done.stdout).get("topics") or {}).get(TOPIC)
        if not topic or not topic.get("observed_seconds"):
            return [f"{TOPIC} not (yet) observed in the summary: {topic}"]
        return []

    poll(analysed, ANALYSIS_TIMEOUT, "the analysis service's summary", 3.0)


def topic_graph_problems(c: Compose, via: str, wanted: Sequence[str], overlay: str) -> list[str]:
    """Why the node containers `wanted` do not hold a `tco` or `omen` overlay of TOPIC ([] if
    they do): the supervisor's record names exactly them (tco: each node mirrors its table;
    omen: its membership), each node reaches its neighbours, every edge is held from both
    ends, and the edges connect the topic's subscribers (the independent checker,
    tests/tco/checker.py); then the overlay's own check."""
    from pubsub.kernel import registry
    from tests.tco.checker import split_topics

    bodies = c.statuses(via, [SUPERVISOR, *wanted])
    sup = bodies[SUPERVISOR]
    if "error" in sup:
        return [f"supervisor: {sup['error']}"]
    if sup.get("overlay") != overlay:
        return [f"the supervisor runs {sup.get('overlay')}, not {overlay}"]
    record = (sup.get("tables") if overlay == "tco" else sup.get("node_topics")) or {}
    problems = [] if set(record) == set(wanted) else [f"the supervisor's record names {sorted(record)}"]
    edges: set[tuple[str, str]] = set()
    states: dict[str, Any] = {}
    for ref in wanted:
        body = bodies[ref]
        if "error" in body:
            problems.append(f"{ref}: {body['error']}")
            continue
        if overlay == "tco" and body.get("neighbours") != (record.get(ref) or {}).get("neighbours"):
            problems.append(f"{ref} holds {body.get('neighbours')}, its table {record.get(ref)}")
        state = (body.get("topics") or {}).get(TOPIC) or {}
        if not state.get("configured") or state.get("unreachable"):
            problems.append(f"{ref}: {TOPIC} is not configured or cannot reach a neighbour: {state}")
        states[ref] = state
        for other in body.get("neighbours") or {}:
            if ref not in (bodies.get(other, {}).get("neighbours") or {}):
                problems.append(f"{ref} holds {other}, which does not hold it back")
            edges.add((min(ref, other), max(ref, other)))
    if not problems:
        split = split_topics({ref: [TOPIC] for ref in wanted}, edges)
        if split:
            problems.append(f"the nodes' edges split {TOPIC}: {split}")
        problems += registry.overlay(overlay).legitimate(sup, states, TOPIC)
    return problems


@pytest.mark.integration
@pytest.mark.timeout(SETUP_TIMEOUT + 600)
@pytest.mark.parametrize("overlay", ["tco", "omen"])
def test_topic_graph_compose_cluster_under_podman(podman_env: dict[str, str], overlay: str) -> None:
    """`PUBSUB_OVERLAY=tco` or `omen` with the one-supervisor override: one supervisor and 4
    node containers; the nodes learn the overlay from their supervisor and their edges
    connect the topic (tco: mirroring the supervisor's tables; omen: mended by the nodes
    themselves, the supervisor holding membership only); publications through the cli
    container reach every node; a killed node container is repaired around and the next
    publication reaches the other three."""
    with contextlib.contextmanager(project)(podman_env, (COMPOSE_FILE, ONE_SUPERVISOR), PUBSUB_OVERLAY=overlay) as c:
        c.compose("up", "-d", "--scale", f"node={N_NODES}", timeout=300)
        supervisors = c.containers("supervisor") + c.containers("supervisor-2") + c.containers("supervisor-3")
        assert len(supervisors) == 1, f"the override runs one supervisor: {supervisors}"
        sup = supervisors[0]
        nodes = c.containers("node")
        assert len(nodes) == N_NODES, nodes
        refs = {name: f"{c.ip(name)}:{NODE_PORT}" for name in nodes}

        def settled(wanted: Sequence[str], c: Compose = c, sup: str = sup) -> None:
            poll(lambda: topic_graph_problems(c, sup, wanted, overlay), CONVERGE_TIMEOUT,
                 f"the {overlay} overlay over {len(wanted)} node containers", 1.0)

        settled(list(refs.values()))
        status = c.cli("pubsub", "status", "--node", refs[nodes[0]])
        if overlay == "tco":
            assert "tco table: degree" in status and "NEIGHBOUR" in status, status
        else:
            assert "omen is not self-stabilizing" in status, status
        keys = {publish(c, f"node:{NODE_PORT}", f"{overlay} through node:7001")["key"],
                publish(c, refs[nodes[0]], f"{overlay} through a node's address")["key"]}
        wait_for_deliveries(c, sup, list(refs.values()), keys)

        victim = nodes[1]
        c.podman("kill", victim)
        alive = [refs[n] for n in nodes if n != victim]
        settled(alive)
        keys.add(publish(c, refs[nodes[0]], f"{overlay} after the crash")["key"])
        wait_for_deliveries(c, sup, alive, keys)


# --- without podman ------------------------------------------------------------------------------
def load_entrypoint() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pubsub_entrypoint", ROOT / "deploy" / "entrypoint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compose_file_describes_the_cluster() -> None:
    """Services, their roles, shared volumes, healthchecks and environment settings."""
    doc = yaml.safe_load(COMPOSE_FILE.read_text())
    services = doc["services"]
    assert set(services) == {"supervisor", "supervisor-2", "supervisor-3", "node", "prometheus", "analysis", "cli"}
    for name in ("supervisor", "supervisor-2", "supervisor-3"):  # sharded supervisors
        assert services[name]["command"] == ["supervisor"]
        listen = services[name]["environment"].get("PUBSUB_LISTEN", SUPERVISOR)
        assert listen == f"{name}:7000"
        assert sorted(services[name]["environment"]["PUBSUB_PEERS"].split(",")) == sorted(
            set(SUPERVISORS) - {listen}
        )
        assert f"{name}-data:/var/lib/pubsub/supervisor" in services[name]["volumes"]
    assert services["node"]["command"] == ["node"]
    assert services["analysis"]["command"] == ["analysis"]
    assert services["cli"]["profiles"] == ["cli"]
    assert services["analysis"]["profiles"] == ["analysis"]  # Spark is opt-in
    node_env = services["node"]["environment"]
    assert node_env["PUBSUB_HTTP_LISTEN"] == "0.0.0.0:8080" and node_env["PUBSUB_HTTP_ALLOW_REMOTE"] == "1"
    # published on ports the engine picks per replica (a fixed host port cannot be scaled)
    assert services["node"]["ports"] == ["${PUBSUB_PUBLISH_HOST:-127.0.0.1}::8080",
                                         "${PUBSUB_PUBLISH_HOST:-127.0.0.1}::7001"]
    for name in ("supervisor", "node"):
        assert services[name]["healthcheck"]["test"] == ["CMD", "pubsub-entrypoint", "health", name]
        env = services[name]["environment"]
        assert env["PUBSUB_SUPERVISOR"] == SUPERVISOR
        assert env["PUBSUB_EVENTS_DIR"] == "/var/lib/pubsub/run/events"
        assert env["PUBSUB_METRICS_PORT"] == "9100" and env["PUBSUB_METRICS_HOST"] == "0.0.0.0"
    assert "PUBSUB_TOPICS" in services["node"]["environment"]
    assert "container_name" not in services["node"]  # --scale needs generated names
    for name in ("supervisor", "node", "analysis"):
        assert "events:/var/lib/pubsub/run" in services[name]["volumes"]
    assert set(doc["volumes"]) >= {"supervisor-data", "supervisor-2-data", "supervisor-3-data", "node-data", "events", "tls"}
    # mutual TLS with certificates made on the fly in the shared volume `tls`; nothing plain
    for name in ("supervisor", "node", "cli"):
        env = services[name]["environment"]
        assert "tls:/var/lib/pubsub/tls" in services[name]["volumes"]
        assert env["PUBSUB_CERTS_DIR"] == "/var/lib/pubsub/tls"
        assert env["PUBSUB_TLS_CERT"] == "/var/lib/pubsub/tls/admin-compose.crt"
    for name, service in services.items():
        assert "PUBSUB_INSECURE" not in (service.get("environment") or {}), name
    build = services["node"]["build"]
    assert build["dockerfile"] == "deploy/Dockerfile"
    assert build["args"]["BASE_IMAGE"] == "${BASE_IMAGE:-python:3.11-slim-bookworm}"
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in dockerfile
    assert "--no-index" in dockerfile and "openjdk-17-jre-headless" in dockerfile
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus-compose.yml").read_text())
    jobs = {j["job_name"]: j["dns_sd_configs"][0] for j in prometheus["scrape_configs"]}
    assert jobs["node"]["names"] == ["node"] and jobs["node"]["port"] == 9100


def test_entrypoint_builds_each_role(tmp_path: Path) -> None:
    """The container entry point: listen addresses, data directories, the topic list."""
    ep = load_entrypoint()
    env = {"PUBSUB_ADVERTISE_HOST": "10.0.0.7", "PUBSUB_DATA_ROOT": str(tmp_path),
           "PUBSUB_TOPICS": "news, sports,news"}
    argv = ep.command_for("node", [], env)
    data = argv[-1]
    assert os.path.dirname(data) == os.path.join(str(tmp_path), "nodes")
    assert argv == ["pubsub", "node", "--listen", "10.0.0.7:7001", "--supervisor", SUPERVISOR,
                    "--data", data]
    from pubsub.node.topicfile import TopicFile

    assert TopicFile(data).load() == {"news", "sports"}
    env["PUBSUB_TOPICS"] = "weather"  # added to what the node already remembers
    ep.command_for("node", [], {**env, "PUBSUB_DATA_DIR": data})
    assert TopicFile(data).load() == {"news", "sports", "weather"}

    sup = ep.command_for("supervisor", ["--interval", "0.5"], {"PUBSUB_DATA_ROOT": str(tmp_path)})
    assert sup == ["pubsub", "supervisor", "--listen", SUPERVISOR, "--data",
                   os.path.join(str(tmp_path), "supervisor"), "--interval", "0.5"]
    run_dir = tmp_path / "run"
    analysis = ep.command_for(
        "analysis", [], {"PUBSUB_RUN_DIR": str(run_dir), "PUBSUB_ANALYSIS_ARGS": "--until-idle 600"}
    )
    assert analysis == ["pubsub", "analyze", str(run_dir), "--stream", "--until-idle", "600"]
    assert (run_dir / "events").is_dir()
    assert ep.listen_ref("node", {"PUBSUB_LISTEN": "n1:7009"}) == "n1:7009"
    assert ep.command_for("broker", [], {}) == ["pubsub", "broker"]  # address from the topology
    assert ep.command_for("broker", ["--id", "a,0"], {"PUBSUB_LISTEN": "b-a-0:7100"}) == [
        "pubsub", "broker", "--listen", "b-a-0:7100", "--id", "a,0"]
    with pytest.raises(ep.EntrypointError, match="PUBSUB_TOPICS"):
        ep.command_for("node", [], {**env, "PUBSUB_TOPICS": "bad\x01topic"})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ep.EntrypointError, match="a-file"):
        ep.command_for("node", [], {**env, "PUBSUB_DATA_DIR": str(blocker)})
    assert ep.main(["health", "nowhere"]) == 2


def test_entrypoint_makes_certificates_on_the_fly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With PUBSUB_CERTS_DIR: one CA in the shared directory, a certificate per daemon
    naming its reference (kept out of the shared directory), the operator's (admin)
    certificate for client commands inside, and a client bundle for a client outside."""
    import io
    import tarfile

    from cryptography import x509

    from pubsub.runtime.certificates import identity_of
    from pubsub.runtime.identity import Identity
    from pubsub.runtime.settings import RuntimeSettings
    from pubsub.runtime.tls import check_own

    ep = load_entrypoint()
    certs = tmp_path / "tls"
    env = {"PUBSUB_ADVERTISE_HOST": "10.0.0.7", "PUBSUB_DATA_ROOT": str(tmp_path / "n1"),
           "PUBSUB_CERTS_DIR": str(certs), "PUBSUB_TOPICS": "news"}
    argv = ep.command_for("node", [], env)
    flags = dict(zip(argv[-6::2], argv[-5::2], strict=True))
    assert argv[:4] == ["pubsub", "node", "--listen", "10.0.0.7:7001"]
    assert flags["--tls-ca"] == str(certs / "ca.crt")
    own = Path(flags["--tls-cert"])
    assert own.parent == tmp_path / "n1" / "identity"  # not in the shared volume
    settings = RuntimeSettings(tls_ca=certs / "ca.crt", tls_cert=own, tls_key=Path(flags["--tls-key"]))
    check_own(settings, "10.0.0.7:7001")  # what the daemon checks before it listens
    ca = (certs / "ca.crt").read_bytes()

    sup = ep.command_for("supervisor", [], {**env, "PUBSUB_DATA_ROOT": str(tmp_path / "s")})
    sup_cert = x509.load_pem_x509_certificate(Path(sup[sup.index("--tls-cert") + 1]).read_bytes())
    assert identity_of(sup_cert) == Identity("supervisor", SUPERVISOR)
    assert (certs / "ca.crt").read_bytes() == ca  # one CA for the cluster
    shared = x509.load_pem_x509_certificate((certs / "admin-compose.crt").read_bytes())
    assert identity_of(shared) == Identity("admin", "compose")

    # a client command gets PUBSUB_TLS_* naming the shared certificate, unless they are set
    client_env: dict[str, str] = {"PUBSUB_CERTS_DIR": str(certs)}
    ep.client_env(client_env)
    assert client_env["PUBSUB_TLS_CERT"] == str(certs / "admin-compose.crt")
    mine = {"PUBSUB_CERTS_DIR": str(certs), "PUBSUB_TLS_CA": "a", "PUBSUB_TLS_CERT": "b", "PUBSUB_TLS_KEY": "c"}
    ep.client_env(mine)
    assert mine["PUBSUB_TLS_CERT"] == "b"

    bundle = ep.client_bundle("alice", {"PUBSUB_CERTS_DIR": str(certs)})
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        assert sorted(tar.getnames()) == ["ca.crt", "client-alice.crt", "client-alice.key"]
        alice = tar.extractfile("client-alice.crt")
        assert alice is not None
        assert identity_of(x509.load_pem_x509_certificate(alice.read())) == Identity("client", "alice")
    with pytest.raises(ep.EntrypointError, match="PUBSUB_LISTEN"):
        ep.command_for("broker", [], {"PUBSUB_CERTS_DIR": str(certs)})
    with pytest.raises(ep.EntrypointError, match="PUBSUB_CERTS_DIR"):
        ep.client_bundle("alice", {})


def test_containers_starting_together_make_one_ca(tmp_path: Path) -> None:
    """Several entry points creating the shared certificates at once agree on one CA."""
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "import entrypoint as ep; ep.ensure_shared(Path(sys.argv[2])); "
        "print(Path(sys.argv[2], 'ca.crt').read_text().replace(chr(10), ''))"
    )
    certs = tmp_path / "tls"
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(ROOT / "deploy"), str(certs)],
                         stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    try:
        outputs = {proc.communicate(timeout=120)[0].strip() for proc in procs}
    finally:
        for proc in procs:
            terminate(proc)
    assert all(proc.returncode == 0 for proc in procs)
    assert outputs == {(certs / "ca.crt").read_text().replace("\n", "")}


def test_node_slots_are_held_while_a_node_runs_and_taken_over_after(tmp_path: Path) -> None:
    """Replicas sharing the node volume each claim a slot of their own; a container
    recreated after its node exited takes the free slot, and with it the node's store."""
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import entrypoint as ep; "
        "print(ep.claim_slot(sys.argv[2]), flush=True); sys.stdin.read()"
    )
    nodes = str(tmp_path / "nodes")

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", script, str(ROOT / "deploy"), nodes],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    first, second = start(), None
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == os.path.join(nodes, "slot-0")
        second = start()
        assert second.stdout is not None
        assert second.stdout.readline().strip() == os.path.join(nodes, "slot-1")  # slot-0 is held
        first.communicate("", timeout=30)  # the node in slot-0 exits
        third = subprocess.run(
            [sys.executable, "-c", script, str(ROOT / "deploy"), nodes],
            input="", capture_output=True, text=True, timeout=30,
        )
        assert third.stdout.strip() == os.path.join(nodes, "slot-0")  # taken over
    finally:
        for proc in (first, second):
            if proc is not None:
                terminate(proc)


def test_entrypoint_finds_its_own_address() -> None:
    """Without PUBSUB_ADVERTISE_HOST a node listens on an IPv4 address of its own (in a
    container: the container's IP; test_compose_cluster_under_podman shows that one)."""
    ep = load_entrypoint()
    address = ep.own_address({"PUBSUB_SUPERVISOR": "127.0.0.1:7000"})
    assert address.count(".") == 3
    assert ep.own_address({"PUBSUB_ADVERTISE_HOST": "node-7"}) == "node-7"


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_setup_script_reports_unavailability_with_77(tmp_path: Path) -> None:
    """Where podman is missing and cannot be installed (not root here: a fake `id`), the
    setup script exits 77 with the reason, which is what makes the compose test skip."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "id").write_text("#!/bin/sh\necho 1000\n")
    (fake_bin / "id").chmod(0o755)
    env = {"PYTHON": sys.executable, "HOME": str(tmp_path),
           "PUBSUB_SETUP_LOCK": str(tmp_path / "setup.lock")}
    # A PATH without podman (which may be installed in /usr/bin): just the basics the
    # script uses, and the fake `id`.
    basics = tmp_path / "basics"
    basics.mkdir()
    for tool in ("bash", "date", "dirname", "uname", "mktemp", "flock", "cat", "grep", "tail", "rm"):
        found = shutil.which(tool)
        if found:
            (basics / tool).symlink_to(found)
    env["PATH"] = f"{fake_bin}:{basics}"
    done = subprocess.run(
        [str(basics / "bash"), str(SETUP)], env=env, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 77, done.stderr
    assert "podman cannot be used on this machine" in done.stderr and "not root" in done.stderr
