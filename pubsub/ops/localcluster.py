"""A local cluster of real daemons: one supervisor and N subscriber nodes as OS processes.

With ``supervisors=K`` it runs K sharded supervisors (`pubsub.kernel.shards`) instead of
one; the nodes are given the first one's address only and find the rest themselves.

`LocalCluster` is what the integration tests, ``make demo`` (`pubsub.ops.demo`) and, later,
``pubsub cluster up|down|status`` run.  Every daemon is a separate ``python -m pubsub.cli.main``
process listening on its own port of 127.0.0.1, with its own data directory and log file
under the cluster's work directory::

    workdir/
      cluster.json                who runs where (references, pids, paths)
      supervisor/data/            the supervisor's durable database
      nodes/node-03/data/         node 3's topics file
      logs/supervisor.log         stderr+stdout of every run of the supervisor (appended)
      logs/node-03.log

Ports.  Without `base_port` the cluster picks free ports *below the kernel's ephemeral
range*: the daemons' own outgoing connections take their local ports from that range, and
a port one of them happens to hold would stop a daemon from being restarted on its old
port.  Each candidate is checked by binding it.

Queries.  The cluster talks to the daemons with the client library (`pubsub.runtime.client.request`
and `pubsub.client.library`, fast, several daemons at once on one event loop) or, with
``via_cli=True``, through the ``pubsub`` command itself (``subscribe --detach``,
``unsubscribe``, ``status --json``, ``publish``, ``history --json``), so that the
operator's path is exercised too.

Waiting.  Nothing here sleeps and hopes: `poll` re-evaluates a condition (a function that
returns the list of what is still wrong) until it holds or a deadline passes, and then
raises `ClusterTimeout` naming what was still wrong.

Metrics and events.  With ``metrics=True`` every daemon also serves Prometheus metrics
(``--metrics-port``) on 127.0.0.1: on free ports picked like the daemons' own, or, with
`base_port`, on base_port + 1000 (the supervisor) and base_port + 1001 + i (node i).  The
ports are in the manifest, and ``workdir/prometheus-targets.json`` lists them in
Prometheus' file_sd format (deploy/prometheus.yml reads it).  With ``events_dir`` every
daemon writes its event stream into that one run directory (``--events-dir``).

Admin addresses.  Unless ``admin=False``, every daemon also opens an admin listener
(``--admin-listen``) on 127.0.0.1, where `pubsub chaos` injects faults: on free ports, or,
with `base_port`, on base_port + 2000 (the supervisor) and base_port + 2001 + i (node i).
`admin_ref` names it; the manifest lists it as ``admin``.

A manifest, ``workdir/cluster.json``, records every daemon's reference, pid, data
directory and log file; it is rewritten whenever a daemon is started.

Stopping.  `stop` sends SIGTERM to every daemon still running, waits a bounded time, sends
SIGKILL to the rest and reaps them all.  It runs on leaving the ``with`` block, whatever
happened inside, and as an ``atexit`` hook if the cluster was never stopped.

Checks.  `snapshot` pairs one topic's members as the supervisor lists them
(`pubsub.ops.members.members_of`) with the states its nodes report; `problems` judges them
by the cluster's overlay's own check (`Overlay.legitimate`: for the skip ring a light
consistency test of labels, left/right/ring and shortcut entries against the supervisor's
membership; the test suite has an independent oracle for the full skip ring,
tests/checker.py).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pubsub.client.library import Ack, Client, ClientError
from pubsub.kernel import registry
from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Message, Topic
from pubsub.kernel.shards import merged_topics
from pubsub.ops.daemongroup import DaemonGroup
from pubsub.ops.members import members_of
from pubsub.ops.processes import (
    HOST,
    REQUEST_TIMEOUT,
    START_TIMEOUT,
    ClusterError,
    Daemon,
    pick_free_ports,
    poll,
)
from pubsub.ops.tlsfiles import ClusterCerts
from pubsub.publications.messages import JoinTopic, LeaveTopic
from pubsub.runtime.client import RequestError, request


# --- the cluster ---------------------------------------------------------------------------------
class LocalCluster(DaemonGroup):
    """A supervisor and `n_nodes` subscriber daemons as OS processes on 127.0.0.1.

    ``with LocalCluster(workdir, 8) as cluster: ...`` starts everything and waits until
    every daemon answers `status`; leaving the block stops every process it started.
    Nodes are named by index (0..n-1) or by reference ("127.0.0.1:port") everywhere a
    node is expected.
    """

    def __init__(
        self,
        workdir: Path | str,
        n_nodes: int,
        interval: float = 0.2,
        config_budget: int = 1,
        base_port: int | None = None,
        *,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        start_timeout: float = START_TIMEOUT,
        log_level: str = "info",
        flooding: bool = True,
        metrics: bool = False,
        events_dir: Path | str | None = None,
        admin: bool = True,
        prometheus_targets_dir: Path | str | None = None,
        memory_nodes: Collection[int] = (),
        tls: bool = False,
        node_args: Mapping[int, Sequence[str]] | None = None,
        web: bool = False,
        http: bool = False,
        supervisors: int = 1,
        peer_timeout: float | None = None,
        overlay: str = registry.DEFAULT_OVERLAY,
    ) -> None:
        """Describe the cluster (nothing starts before `start` or entering ``with``).

        `base_port` puts the supervisor on that port and node i on base_port + 1 + i;
        without it free ports are picked.  `env` adds environment variables for the
        daemons (e.g. ``PUBSUB_HELLO_TIMEOUT``); `python` is the interpreter that runs
        them (default: this one).  `metrics` gives every daemon a Prometheus endpoint
        (``--metrics-port``, ports chosen as the module docstring says) and writes
        ``workdir/prometheus-targets.json`` for Prometheus' file_sd; `events_dir` makes every
        daemon write its event stream there (``--events-dir``, docs/events.md).
        `prometheus_targets_dir` (default: env PUBSUB_PROMETHEUS_TARGETS_DIR) is a directory
        Prometheus watches (deploy/prometheus.yml: deploy/targets/): with metrics, the
        cluster puts its target file there while it runs and removes it at `stop`.
        `flooding` False starts the nodes with
        ``--no-flooding`` (anti-entropy alone spreads publications).  `admin` False starts
        the daemons without an admin listener (no fault injection).  `web` gives the
        supervisor its web view (``--web-listen``) on a free port of 127.0.0.1 (`web_url`);
        `http` every node its HTTP API (``--http-listen``, `Daemon.http_ref`) likewise.
        The nodes whose indexes are in `memory_nodes` run without ``--data``: their store lives in memory
        and a restart begins a new incarnation with nothing in it.  `tls` creates a cluster
        CA and certificates in ``workdir/tls`` (`pubsub.ops.tlsfiles`), starts every daemon
        with mutual TLS, and, while the cluster runs, puts the client certificate in this
        process's ``PUBSUB_TLS_*`` environment (for the queries and `cli`).  `node_args` adds
        command-line arguments to the nodes it names by index (e.g. ``{0: ["--http-listen",
        "127.0.0.1:PORT"]}``).  `supervisors` > 1 starts that many sharded supervisors
        (`pubsub.kernel.shards`), each given the others with ``--peers`` (and
        ``--peer-timeout`` if `peer_timeout` is set); the first is `supervisor`, every node is
        given its address only; with `base_port`, supervisor j > 0 listens on
        base_port + n_nodes + j.
        """
        if n_nodes < 0:
            raise ValueError("n_nodes must not be negative")
        if supervisors < 1:
            raise ValueError("supervisors must be at least 1")
        self.peer_timeout = peer_timeout
        self.workdir = Path(workdir).resolve()
        self.n_nodes = n_nodes
        self.interval = interval
        self.config_budget = config_budget
        #: The overlay every daemon runs (``--overlay``), and the supervisor status the last
        #: `snapshots` read (what `problems` judges with).
        self.overlay = registry.overlay(overlay)
        self.last_supervisor_status: Mapping[str, Any] = {}
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.log_level = log_level
        self.env = dict(env or {})
        if base_port is None:
            ports = pick_free_ports(n_nodes + supervisors)
        else:
            ports = [base_port + i for i in range(n_nodes + supervisors)]
            if ports[-1] > 65535:
                raise ValueError(f"base_port {base_port} leaves no room for {n_nodes} nodes")
        self.logs_dir = self.workdir / "logs"
        sup_ref = f"{HOST}:{ports[0]}"
        sup_refs = [sup_ref, *(f"{HOST}:{p}" for p in ports[n_nodes + 1 :])]
        self.certs: ClusterCerts | None = None
        if tls:
            roles = {ref: "supervisor" for ref in sup_refs}
            roles |= {f"{HOST}:{p}": "node" for p in ports[1 : n_nodes + 1]}
            self.certs = ClusterCerts.create(self.workdir / "tls", roles)
        #: Every supervisor (sharded when more than one); `supervisor` is the first.
        self.supervisors: list[Daemon] = [
            self._supervisor_daemon(j, ref, [r for r in sup_refs if r != ref])
            for j, ref in enumerate(sup_refs)
        ]
        self.supervisor = self.supervisors[0]
        self.nodes: list[Daemon] = []
        for i in range(n_nodes):
            ref = f"{HOST}:{ports[i + 1]}"
            data = self.workdir / "nodes" / f"node-{i:02d}" / "data"
            self.nodes.append(
                Daemon(
                    name=f"node-{i:02d}",
                    ref=ref,
                    args=[
                        "node",
                        "--listen",
                        ref,
                        "--supervisor",
                        sup_ref,
                        *([] if i in memory_nodes else ["--data", str(data)]),
                        "--interval",
                        repr(interval),
                        "--overlay",
                        overlay,
                        *([] if flooding else ["--no-flooding"]),
                        *self._tls_args(ref),
                        *(node_args or {}).get(i, ()),
                    ],
                    data_dir=data,
                    log_path=self.logs_dir / f"node-{i:02d}.log",
                )
            )
        self._by_ref: dict[str, Daemon] = {d.ref: d for d in [*self.supervisors, *self.nodes]}
        self.events_dir = None if events_dir is None else Path(events_dir).resolve()
        shared = prometheus_targets_dir or os.environ.get("PUBSUB_PROMETHEUS_TARGETS_DIR")
        self.prometheus_targets_dir = Path(shared).resolve() if shared else None
        self._setup_telemetry(metrics, base_port)
        self._setup_admin(admin, base_port)
        self.web_port: int | None = None
        wanted = (1 if web else 0) + (n_nodes if http else 0)
        if wanted:
            taken = {d.port for d in self.daemons()}
            taken |= {d.metrics_port for d in self.daemons() if d.metrics_port}
            taken |= {int(d.admin_ref.rpartition(":")[2]) for d in self.daemons() if d.admin_ref}
            fresh = [p for p in pick_free_ports(len(taken) + wanted) if p not in taken][:wanted]
            if web:
                self.web_port = fresh.pop()
                self.supervisor.args += ["--web-listen", f"{HOST}:{self.web_port}"]
            for node, port in zip(self.nodes if http else (), fresh, strict=True):
                node.http_ref = f"{HOST}:{port}"
                node.args += ["--http-listen", node.http_ref]
        self._atexit_registered = False

    def _supervisor_daemon(self, j: int, ref: str, peers: Sequence[str], join: bool = False) -> Daemon:
        """Supervisor `j` ("supervisor", then "supervisor-1", ...) on `ref`, given `peers`
        (with `join`: ``--join`` the first of them instead of ``--peers``)."""
        name = "supervisor" if j == 0 else f"supervisor-{j}"
        data = self.workdir / name / "data"
        sharding: list[str] = []
        if peers:
            sharding = ["--join", peers[0]] if join else ["--peers", ",".join(peers)]
            if self.peer_timeout is not None:
                sharding += ["--peer-timeout", repr(self.peer_timeout)]
        return Daemon(
            name=name,
            ref=ref,
            args=[
                "supervisor",
                "--listen",
                ref,
                "--data",
                str(data),
                "--interval",
                repr(self.interval),
                "--config-budget",
                str(self.config_budget),
                "--overlay",
                self.overlay.name,
                *sharding,
                *self._tls_args(ref),
            ],
            data_dir=data,
            log_path=self.logs_dir / f"{name}.log",
        )

    def add_supervisor(self) -> Daemon:
        """Start one more sharded supervisor (``--join`` the first) on a free port and wait
        until it answers; the supervisors then hand it its share of the topics.  Without
        TLS only (its certificate would have to be made first); no admin or metrics port."""
        if self.certs is not None:
            raise ClusterError("add_supervisor is not supported with TLS")
        taken = {d.port for d in self.daemons()}
        port = next(p for p in pick_free_ports(len(taken) + 1) if p not in taken)
        daemon = self._supervisor_daemon(len(self.supervisors), f"{HOST}:{port}", [self.supervisor.ref], join=True)
        self.supervisors.append(daemon)
        self._by_ref[daemon.ref] = daemon
        self._launch(daemon)
        self.wait_answering([daemon])
        return daemon


    def prometheus_targets(self) -> list[dict[str, Any]]:
        """Prometheus file_sd target groups: the supervisor and the nodes, labelled with
        their role and the cluster's work directory."""
        cluster = str(self.workdir)
        groups = []
        for role, daemons in (("supervisor", self.supervisors), ("node", self.nodes)):
            targets = [f"{HOST}:{d.metrics_port}" for d in daemons if d.metrics_port]
            if targets:
                groups.append(
                    {"targets": targets, "labels": {"role": role, "cluster": cluster}}
                )
        return groups

    # --- naming ----------------------------------------------------------------------------
    @property
    def supervisor_ref(self) -> str:
        return self.supervisor.ref

    @property
    def node_refs(self) -> list[str]:
        """Every node's reference, by index."""
        return [d.ref for d in self.nodes]

    @property
    def web_url(self) -> str | None:
        """The address of the supervisor's web view (``web=True``), else None."""
        return None if self.web_port is None else f"http://{HOST}:{self.web_port}/"

    def running_node_refs(self) -> list[str]:
        """References of the nodes whose process is running now."""
        return [d.ref for d in self.nodes if d.running]

    def node(self, which: int | str) -> Daemon:
        """The node with index `which` or reference `which`."""
        if isinstance(which, int):
            return self.nodes[which]
        daemon = self._by_ref.get(which)
        if daemon is None or daemon in self.supervisors:
            raise KeyError(f"no node {which!r} in this cluster")
        return daemon


    # --- lifecycle -------------------------------------------------------------------------

    def daemons(self) -> list[Daemon]:
        """The supervisor, then the nodes, then any further supervisors."""
        return [self.supervisor, *self.nodes, *self.supervisors[1:]]

    def daemon(self, which: int | str) -> Daemon:
        """A node by index or reference, or a supervisor by its reference or name
        ("supervisor", "supervisor-1", ...)."""
        for sup in self.supervisors:
            if which in (sup.name, sup.ref):
                return sup
        return self.node(which)

    def _tls_args(self, ref: str) -> list[str]:
        return [] if self.certs is None else self.certs.daemon_args(ref)

    def start(self) -> LocalCluster:
        """Start the supervisor, then every node, and wait until all answer status."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if self.certs is not None:
            self.certs.install_client_env()
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            if self.metrics:
                self.write_prometheus_targets()
                if self.prometheus_targets_dir is not None:
                    self.write_prometheus_targets(self._shared_targets_file())
            for sup in self.supervisors:
                self._launch(sup)
            self.wait_answering(self.supervisors)
            for node in self.nodes:
                self._launch(node)
            self.wait_answering(self.nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> LocalCluster:
        return self.start()

    def stop(self) -> None:
        """Stop every daemon (`DaemonGroup.stop`); with TLS, restore the environment."""
        super().stop()
        if self.certs is not None:
            self.certs.restore_env()


    def manifest(self) -> dict[str, Any]:
        """Who runs where: references, pids, data and log paths (JSON-able)."""

        def entry(d: Daemon) -> dict[str, Any]:
            return {
                "name": d.name,
                "ref": d.ref,
                "pid": d.pid if d.running else None,
                "data": str(d.data_dir),
                "log": str(d.log_path),
                "metrics_port": d.metrics_port,
                "admin": d.admin_ref,
                "http": d.http_ref,
            }

        return {
            "supervisor": entry(self.supervisor),
            "supervisors": [entry(d) for d in self.supervisors],
            "nodes": [entry(d) for d in self.nodes],
            "interval": self.interval,
            "config_budget": self.config_budget,
            "overlay": self.overlay.name,
            "events_dir": None if self.events_dir is None else str(self.events_dir),
            "tls": None if self.certs is None else self.certs.client_env(),
            "web": self.web_url,
            # this cluster's file in the directory Prometheus watches: `cluster down` removes it
            "prometheus_targets_file": (
                str(self._shared_targets_file()) if self.metrics and self.prometheus_targets_dir is not None else None
            ),
        }


    def restart_node(self, which: int | str) -> None:
        """Stop a node if it runs (SIGTERM) and start it again: same port, same data dir."""
        self.restart_nodes([which])

    def restart_nodes(self, which: Iterable[int | str]) -> None:
        """`restart_node` for several nodes at once: all start, then all are waited for."""
        daemons = [self.node(w) for w in which]
        for daemon in daemons:
            self._terminate(daemon)
        for daemon in daemons:
            self._launch(daemon)
        self.wait_answering(daemons)

    def restart_supervisor(self, empty_data: bool = False) -> None:
        """Stop the supervisor (SIGTERM) and start it again on the same port.

        With `empty_data` its data directory is wiped first, so it starts with an empty
        database and the subscribers alone must drive the system back to SR(n).
        """
        self._terminate(self.supervisor)
        if empty_data:
            shutil.rmtree(self.supervisor.data_dir, ignore_errors=True)
        self._launch(self.supervisor)
        self.wait_answering([self.supervisor])


    def _status(self, ref: str, via_cli: bool) -> dict[str, Any]:
        if via_cli:
            flag = "--supervisor" if any(ref == s.ref for s in self.supervisors) else "--node"
            out = self.cli("status", flag, ref, "--json")
            try:
                body = json.loads(out)
            except ValueError as exc:
                raise ClusterError(f"`pubsub status {flag} {ref} --json` printed no JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ClusterError(f"`pubsub status {flag} {ref} --json` printed {body!r}")
            return body
        return self.status_of(ref)

    def supervisor_status(self, via_cli: bool = False) -> dict[str, Any]:
        """The supervisor's status reply body (topics, members, stats)."""
        return self._status(self.supervisor.ref, via_cli)

    def supervisor_statuses(self, via_cli: bool = False) -> dict[str, dict[str, Any]]:
        """Status bodies of every running supervisor, keyed by reference."""
        running = [s.ref for s in self.supervisors if s.running]
        if via_cli:
            return {ref: self._status(ref, True) for ref in running}
        out: dict[str, dict[str, Any]] = {}
        for ref, result in self._statuses(running).items():
            if isinstance(result, Exception):
                raise ClusterError(str(result)) from result
            out[ref] = result
        return out

    def merged_supervisor_status(self, via_cli: bool = False) -> dict[str, Any]:
        """One supervisor status whose topics are every running supervisor's (a topic
        several hold is taken from its owner in the first supervisor's live set)."""
        bodies = self.supervisor_statuses(via_cli)
        if len(self.supervisors) == 1:
            return next(iter(bodies.values()), {"topics": {}})
        topics, live = merged_topics(bodies)
        return {"topics": topics, "supervisors": {"live": live}}

    def node_status(self, which: int | str, via_cli: bool = False) -> dict[str, Any]:
        """A node's status reply body (per-topic label, left, right, ring, shortcuts; stats)."""
        return self._status(self.node(which).ref, via_cli)

    def node_statuses(
        self, refs: Iterable[str] | None = None, via_cli: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Status bodies of `refs` (default: every running node), keyed by reference.

        ClusterError if a running node does not answer.
        """
        wanted = list(self.running_node_refs() if refs is None else refs)
        if via_cli:
            return {ref: self._status(ref, True) for ref in wanted}
        out: dict[str, dict[str, Any]] = {}
        for ref, result in self._statuses(wanted).items():
            if isinstance(result, Exception):
                raise ClusterError(str(result)) from result
            out[ref] = result
        return out

    def _control(self, which: int | str, msg: Message, via_cli: bool) -> dict[str, Any]:
        daemon = self.node(which)
        if via_cli:
            topic = msg.topic  # type: ignore[attr-defined]
            if isinstance(msg, JoinTopic):
                out = self.cli("subscribe", topic, "--node", daemon.ref, "--detach")
            else:
                out = self.cli("unsubscribe", topic, "--node", daemon.ref)
            return {"ok": True, "output": out}
        try:
            reply = asyncio.run(request(daemon.ref, msg, REQUEST_TIMEOUT))
        except RequestError as exc:
            raise ClusterError(str(exc)) from None
        if isinstance(reply, ErrorReply):
            raise ClusterError(f"{daemon.name} refused {msg.kind}: {reply.code}: {reply.detail}")
        if not isinstance(reply, Reply):
            raise ClusterError(f"{daemon.name} answered {msg.kind} with {reply!r}")
        return reply.body

    def subscribe(self, which: int | str, topic: str, via_cli: bool = False) -> dict[str, Any]:
        """Ask a node to subscribe to `topic` (``pubsub subscribe`` with `via_cli`)."""
        return self._control(which, JoinTopic(topic=Topic(topic)), via_cli)

    def unsubscribe(self, which: int | str, topic: str, via_cli: bool = False) -> dict[str, Any]:
        """Ask a node to unsubscribe from `topic` (``pubsub unsubscribe`` with `via_cli`)."""
        return self._control(which, LeaveTopic(topic=Topic(topic)), via_cli)

    def publish(
        self, which: int | str, topic: str, payload: bytes | str, via_cli: bool = False
    ) -> dict[str, Any]:
        """Publish through a node; returns the acknowledgement as a dict (``pubsub publish
        --json`` with `via_cli`).  ClusterError if it is not acknowledged."""
        daemon = self.node(which)
        if via_cli:
            text = payload.decode("utf-8") if isinstance(payload, bytes) else payload
            out = self.cli("publish", topic, text, "--node", daemon.ref, "--json")
            return dict(json.loads(out.splitlines()[-1]))

        async def one() -> Ack:
            async with Client(daemon.ref) as client:
                return await client.publish(topic, payload)

        try:
            ack = asyncio.run(one())
        except ClientError as exc:
            raise ClusterError(f"publish through {daemon.name} failed: {exc}") from None
        return ack.as_dict()

    def history(self, which: int | str, topic: str, via_cli: bool = False) -> list[dict[str, Any]]:
        """What a node holds for `topic`, in local order: dicts with local_seq, publisher,
        seq, key (hex), published_ms, payload and msg_id (``pubsub history --json`` with
        `via_cli`)."""
        return self.histories([self.node(which).ref], topic, via_cli)[self.node(which).ref]

    def histories(
        self, refs: Iterable[str], topic: str, via_cli: bool = False
    ) -> dict[str, list[dict[str, Any]]]:
        """`history` of several nodes (concurrently unless `via_cli`)."""
        wanted = list(refs)
        if via_cli:
            return {
                ref: [json.loads(line) for line in self.cli("history", topic, "--node", ref, "--json").splitlines()]
                for ref in wanted
            }

        async def one(ref: str) -> list[dict[str, Any]]:
            found = await Client(ref).history(topic)
            return [
                {
                    "local_seq": d.local_seq,
                    "publisher": d.publisher,
                    "seq": d.seq,
                    "key": d.key.hex(),
                    "published_ms": d.published_ms or None,
                    "payload": d.payload.decode("utf-8", "replace"),
                    "msg_id": d.msg_id or None,
                }
                for d in found
            ]

        async def every() -> list[list[dict[str, Any]] | BaseException]:
            return await asyncio.gather(*(one(ref) for ref in wanted), return_exceptions=True)

        out: dict[str, list[dict[str, Any]]] = {}
        for ref, result in zip(wanted, asyncio.run(every()), strict=True):
            if isinstance(result, BaseException):
                raise ClusterError(f"history of {topic} at {self.name_of(ref)}: {result}")
            out[ref] = result
        return out

    # --- views for checkers ----------------------------------------------------------------
    def snapshot(
        self, topic: str, via_cli: bool = False
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """(members, node_states) of one topic, the input of a ring checker.

        ``members`` maps each reference the supervisor lists for `topic` to its label bits;
        ``node_states`` maps every *running* node that reports state for `topic` (member or
        not) to that state.  A label the supervisor holds for nobody appears under the key
        ``"<none:BITS>"`` so a checker sees it as a member that reports nothing.
        """
        return self.snapshots([topic], via_cli)[topic]

    def snapshots(
        self, topics: Iterable[str], via_cli: bool = False
    ) -> dict[str, tuple[dict[str, str], dict[str, dict[str, Any]]]]:
        """`snapshot` of several topics from one status pass (each daemon asked once)."""
        topics = list(topics)
        supervisor_body = (
            self.supervisor_status(via_cli) if len(self.supervisors) == 1 else self.merged_supervisor_status(via_cli)
        )
        bodies = self.node_statuses(via_cli=via_cli)
        self.last_supervisor_status = supervisor_body
        out: dict[str, tuple[dict[str, str], dict[str, dict[str, Any]]]] = {}
        for topic in topics:
            states: dict[str, dict[str, Any]] = {}
            for ref, body in bodies.items():
                entry = (body.get("topics") or {}).get(topic)
                if entry is not None:
                    states[ref] = entry
            out[topic] = (members_of(supervisor_body, topic), states)
        return out

    def problems(self, topic: str, states: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """What keeps `topic` from its overlay's legitimate state, judged by the overlay's
        own check (`Overlay.legitimate`) on the supervisor status of the last `snapshots`."""
        return self.overlay.legitimate(self.last_supervisor_status, states, topic)

    def poll(
        self,
        problems: Callable[[], list[str]],
        timeout: float,
        what: str,
        interval: float | None = None,
    ) -> float:
        """Re-evaluate `problems` until it returns an empty list; return the seconds it took.

        Raises ClusterTimeout after `timeout` seconds with the last problems found.  A
        ClusterError raised by `problems` (a daemon not answering) fails at once.
        """
        return poll(problems, timeout, what, self.interval / 2 if interval is None else interval)


