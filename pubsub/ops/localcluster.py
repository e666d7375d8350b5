"""A local cluster of real daemons: one supervisor and N subscriber nodes as OS processes.

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

Queries.  The cluster talks to the daemons with the client library (`pubsub.runtime.net.request`
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

`ring_problems` is a light consistency test of one topic's ring against the supervisor's
membership (labels, left/right/ring in the supervisor's order, shortcut entries resolved to
the nodes the supervisor lists).  It does not compute which shortcut labels a node should
have; the test suite has an independent oracle for the full skip ring (tests/checker.py).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pubsub.client.library import Ack, Client, ClientError
from pubsub.skipring.labels import Label, LabelError
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Topic
from pubsub.skipring.messages import JoinTopic, LeaveTopic
from pubsub.runtime.net import RequestError, request

HOST = "127.0.0.1"
#: Seconds a daemon may take from its start until it answers `status`.
START_TIMEOUT = 20.0
#: Seconds `stop` waits after SIGTERM before it sends SIGKILL.
TERM_TIMEOUT = 5.0
#: Seconds a single status / subscribe request may take.
REQUEST_TIMEOUT = 5.0
#: Seconds a CLI invocation may take (interpreter start-up included).
CLI_TIMEOUT = 30.0
#: With `base_port`, daemon i (0 = the supervisor) serves metrics on base_port + this + i.
METRICS_PORT_OFFSET = 1000
#: With `base_port`, daemon i (0 = the supervisor) has its admin listener on base_port + this + i.
ADMIN_PORT_OFFSET = 2000
#: The Prometheus file_sd target file a cluster with metrics writes into its work dir.
PROMETHEUS_TARGETS = "prometheus-targets.json"


class ClusterError(RuntimeError):
    """The cluster could not do what was asked (a daemon did not start, a request failed)."""


class ClusterTimeout(ClusterError):
    """A condition did not hold within its deadline; the message says what was still wrong."""


# --- ports ---------------------------------------------------------------------------------------
def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for automatically chosen local ports (Linux), else a safe guess."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether a listening socket could bind `host:port` now (as the daemons bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def pick_free_ports(count: int, *, rng: random.Random | None = None) -> list[int]:
    """`count` distinct ports on 127.0.0.1 that are free now, outside the ephemeral range.

    Ports are drawn at random from 10000 up to the start of the ephemeral range, so two
    clusters started side by side are unlikely to pick the same ones; each is verified by
    binding it.  (Another program may still take a port before the daemon binds it; the
    daemon then fails to start and says so in its log.)
    """
    rng = rng or random.Random()
    low_ephemeral, high_ephemeral = _ephemeral_range()
    if low_ephemeral > 10000 + 4 * count:
        lo, hi = 10000, low_ephemeral - 1
    else:  # an unusual configuration: fall back to the ports above the ephemeral range
        lo, hi = high_ephemeral + 1, 65535
    chosen: list[int] = []
    for _ in range(200 * max(count, 1)):
        if len(chosen) == count:
            return chosen
        port = rng.randint(lo, hi)
        if port not in chosen and port_is_free(port):
            chosen.append(port)
    if len(chosen) == count:
        return chosen
    raise ClusterError(f"found only {len(chosen)} of {count} free ports in {lo}..{hi}")


# --- one daemon ----------------------------------------------------------------------------------
@dataclass
class Daemon:
    """One daemon of the cluster: how to start it, and its current process (if any)."""

    name: str
    ref: str
    args: list[str]
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)
    starts: int = 0
    #: Port of the daemon's Prometheus endpoint on 127.0.0.1, or None (metrics off).
    metrics_port: int | None = None
    #: The daemon's admin address (`pubsub chaos`), or None (admin listener off).
    admin_ref: str | None = None

    @property
    def port(self) -> int:
        return int(self.ref.rpartition(":")[2])

    @property
    def running(self) -> bool:
        """Started and not (yet) exited."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def log_of_current_run(self) -> str:
        """What the daemon logged since it was last started (after the cluster's banner)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text.rpartition(f" start #{self.starts} of {self.name} ---\n")[2]

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the daemon's log file (for error messages)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _status_problem(daemon: Daemon, exc: Exception) -> str:
    return f"{daemon.name} ({daemon.ref}) does not answer status: {exc}"


# --- the cluster ---------------------------------------------------------------------------------
class LocalCluster:
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
        the daemons without an admin listener (no fault injection).
        """
        if n_nodes < 0:
            raise ValueError("n_nodes must not be negative")
        self.workdir = Path(workdir).resolve()
        self.n_nodes = n_nodes
        self.interval = interval
        self.config_budget = config_budget
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.log_level = log_level
        self.env = dict(env or {})
        if base_port is None:
            ports = pick_free_ports(n_nodes + 1)
        else:
            ports = [base_port + i for i in range(n_nodes + 1)]
            if ports[-1] > 65535:
                raise ValueError(f"base_port {base_port} leaves no room for {n_nodes} nodes")
        self.logs_dir = self.workdir / "logs"
        sup_ref = f"{HOST}:{ports[0]}"
        self.supervisor = Daemon(
            name="supervisor",
            ref=sup_ref,
            args=[
                "supervisor",
                "--listen",
                sup_ref,
                "--data",
                str(self.workdir / "supervisor" / "data"),
                "--interval",
                repr(interval),
                "--config-budget",
                str(config_budget),
            ],
            data_dir=self.workdir / "supervisor" / "data",
            log_path=self.logs_dir / "supervisor.log",
        )
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
                        "--data",
                        str(data),
                        "--interval",
                        repr(interval),
                        *([] if flooding else ["--no-flooding"]),
                    ],
                    data_dir=data,
                    log_path=self.logs_dir / f"node-{i:02d}.log",
                )
            )
        self._by_ref: dict[str, Daemon] = {d.ref: d for d in [self.supervisor, *self.nodes]}
        self.events_dir = None if events_dir is None else Path(events_dir).resolve()
        shared = prometheus_targets_dir or os.environ.get("PUBSUB_PROMETHEUS_TARGETS_DIR")
        self.prometheus_targets_dir = Path(shared).resolve() if shared else None
        self._setup_telemetry(metrics, base_port)
        self._setup_admin(admin, base_port)
        self._atexit_registered = False

    def _setup_admin(self, admin: bool, base_port: int | None) -> None:
        """Give every daemon an admin listener on 127.0.0.1 (see the module docstring)."""
        if not admin:
            return
        daemons = [self.supervisor, *self.nodes]
        if base_port is None:
            taken = {d.port for d in daemons} | {d.metrics_port for d in daemons if d.metrics_port}
            fresh = [p for p in pick_free_ports(len(daemons) + len(taken)) if p not in taken]
            ports = fresh[: len(daemons)]
        else:
            ports = [base_port + ADMIN_PORT_OFFSET + i for i in range(len(daemons))]
            if ports[-1] > 65535:
                raise ValueError(f"base_port {base_port} leaves no room for admin ports")
        for daemon, port in zip(daemons, ports, strict=True):
            daemon.admin_ref = f"{HOST}:{port}"
            daemon.args += ["--admin-listen", daemon.admin_ref]

    def admin_ref(self, which: int | str) -> str:
        """The admin address of a node (index or reference) or of the supervisor
        ("supervisor"), for `pubsub chaos --admin`; ClusterError if it has none."""
        daemon = self.daemon(which)
        if daemon.admin_ref is None:
            raise ClusterError(f"{daemon.name} has no admin listener (admin=False)")
        return daemon.admin_ref

    # --- telemetry -------------------------------------------------------------------------
    def _setup_telemetry(self, metrics: bool, base_port: int | None) -> None:
        daemons = [self.supervisor, *self.nodes]
        self.metrics = metrics
        if metrics:
            if base_port is None:
                taken = {d.port for d in daemons}
                ports = []
                while len(ports) < len(daemons):  # distinct from the daemons' own ports
                    fresh = pick_free_ports(len(daemons) + len(taken))
                    ports += [p for p in fresh if p not in taken and p not in ports]
                ports = ports[: len(daemons)]
            else:
                ports = [base_port + METRICS_PORT_OFFSET + i for i in range(len(daemons))]
                if ports[-1] > 65535:
                    raise ValueError(
                        f"base_port {base_port} leaves no room for metrics ports "
                        f"(base_port + {METRICS_PORT_OFFSET} + i)"
                    )
            for daemon, port in zip(daemons, ports, strict=True):
                daemon.metrics_port = port
                daemon.args += ["--metrics-port", str(port), "--metrics-host", HOST]
        if self.events_dir is not None:
            for daemon in daemons:
                daemon.args += ["--events-dir", str(self.events_dir)]

    def metrics_url(self, which: int | str) -> str:
        """``http://127.0.0.1:PORT/metrics`` of a daemon (ClusterError if metrics are off)."""
        daemon = self.daemon(which)
        if daemon.metrics_port is None:
            raise ClusterError("this cluster was started without metrics (metrics=True)")
        return f"http://{HOST}:{daemon.metrics_port}/metrics"

    def prometheus_targets(self) -> list[dict[str, Any]]:
        """Prometheus file_sd target groups: the supervisor and the nodes, labelled with
        their role and the cluster's work directory."""
        cluster = str(self.workdir)
        groups = []
        for role, daemons in (("supervisor", [self.supervisor]), ("node", self.nodes)):
            targets = [f"{HOST}:{d.metrics_port}" for d in daemons if d.metrics_port]
            if targets:
                groups.append(
                    {"targets": targets, "labels": {"role": role, "cluster": cluster}}
                )
        return groups

    def _shared_targets_file(self) -> Path:
        assert self.prometheus_targets_dir is not None
        tag = f"{self.supervisor.port}-{os.getpid()}"
        return self.prometheus_targets_dir / f"pubsub-cluster-{tag}.json"

    def write_prometheus_targets(self, path: Path | str | None = None) -> Path:
        """Write `prometheus_targets` as JSON (atomically) to `path`, default
        ``workdir/prometheus-targets.json``; returns the path."""
        target = Path(path) if path is not None else self.workdir / PROMETHEUS_TARGETS
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(json.dumps(self.prometheus_targets(), indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        return target

    # --- naming ----------------------------------------------------------------------------
    @property
    def supervisor_ref(self) -> str:
        return self.supervisor.ref

    @property
    def node_refs(self) -> list[str]:
        """Every node's reference, by index."""
        return [d.ref for d in self.nodes]

    def running_node_refs(self) -> list[str]:
        """References of the nodes whose process is running now."""
        return [d.ref for d in self.nodes if d.running]

    def node(self, which: int | str) -> Daemon:
        """The node with index `which` or reference `which`."""
        if isinstance(which, int):
            return self.nodes[which]
        daemon = self._by_ref.get(which)
        if daemon is None or daemon is self.supervisor:
            raise KeyError(f"no node {which!r} in this cluster")
        return daemon

    def daemon(self, which: int | str) -> Daemon:
        """A node by index or reference, or the supervisor by its reference or "supervisor"."""
        if which in ("supervisor", self.supervisor.ref):
            return self.supervisor
        return self.node(which)

    def name_of(self, ref: str) -> str:
        """A short name for a reference ("node-03", "supervisor"), else the reference."""
        daemon = self._by_ref.get(ref)
        return ref if daemon is None else daemon.name

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> LocalCluster:
        """Start the supervisor, then every node, and wait until all answer status."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            if self.metrics:
                self.write_prometheus_targets()
                if self.prometheus_targets_dir is not None:
                    self.write_prometheus_targets(self._shared_targets_file())
            self._launch(self.supervisor)
            self.wait_answering([self.supervisor])
            for node in self.nodes:
                self._launch(node)
            self.wait_answering(self.nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _launch(self, daemon: Daemon) -> None:
        if daemon.running:
            raise ClusterError(f"{daemon.name} is already running (pid {daemon.pid})")
        self._reap(daemon)
        daemon.data_dir.mkdir(parents=True, exist_ok=True)
        daemon.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(daemon.log_path, "ab")  # noqa: SIM115 - closed when the process is reaped
        daemon.starts += 1
        banner = f"--- {time.strftime('%H:%M:%S')} start #{daemon.starts} of {daemon.name} ---\n"
        log_file.write(banner.encode())
        log_file.flush()
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        env["PUBSUB_LOG_LEVEL"] = self.log_level
        command = [self.python, "-m", "pubsub.cli.main", *daemon.args]
        try:
            daemon.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                # Own session: a Ctrl-C in the terminal reaches only us, and `stop` decides
                # how the daemons end.
                start_new_session=True,
            )
        except OSError:
            log_file.close()
            raise
        daemon.log_file = log_file
        self.write_manifest()

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
            }

        return {
            "supervisor": entry(self.supervisor),
            "nodes": [entry(d) for d in self.nodes],
            "interval": self.interval,
            "config_budget": self.config_budget,
            "events_dir": None if self.events_dir is None else str(self.events_dir),
        }

    def write_manifest(self) -> None:
        """Write `manifest` to workdir/cluster.json atomically (for operators and tools)."""
        path = self.workdir / "cluster.json"
        tmp = path.with_name(".cluster.json.tmp")
        with contextlib.suppress(OSError):  # best effort: the work dir may be gone at exit
            tmp.write_text(json.dumps(self.manifest(), indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, path)

    def wait_answering(self, daemons: Sequence[Daemon], timeout: float | None = None) -> None:
        """Wait until every daemon in `daemons` answers status; ClusterError if one exits."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        pending = list(daemons)
        while pending:
            for daemon in pending:
                if not daemon.running:
                    code = None if daemon.process is None else daemon.process.returncode
                    raise ClusterError(
                        f"{daemon.name} ({daemon.ref}) exited with code {code} before it "
                        f"answered status; log tail:\n{daemon.log_tail()}"
                    )
            results = self._statuses([d.ref for d in pending], timeout=1.0)
            pending = [d for d in pending if isinstance(results[d.ref], Exception)]
            if pending and time.monotonic() > deadline:
                problems = [
                    _status_problem(d, results[d.ref])  # type: ignore[arg-type]
                    for d in pending
                ]
                raise ClusterTimeout("; ".join(problems))
            if pending:
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop every daemon: SIGTERM, up to TERM_TIMEOUT seconds, then SIGKILL; reap all."""
        daemons = [self.supervisor, *self.nodes]
        for daemon in daemons:
            if daemon.running:
                self._signal(daemon, signal.SIGTERM)
                self._signal(daemon, signal.SIGCONT)  # a daemon stopped by SIGSTOP must run to exit
        deadline = time.monotonic() + TERM_TIMEOUT
        for daemon in daemons:
            if daemon.process is None:
                continue
            try:
                daemon.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(daemon, signal.SIGKILL)
                daemon.process.wait()
            self._reap(daemon)
        if self.workdir.exists():
            self.write_manifest()
        if self.metrics and self.prometheus_targets_dir is not None:
            with contextlib.suppress(OSError):
                self._shared_targets_file().unlink()
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    def _signal(self, daemon: Daemon, sig: int) -> None:
        assert daemon.process is not None
        with contextlib.suppress(ProcessLookupError):
            daemon.process.send_signal(sig)

    def _reap(self, daemon: Daemon) -> None:
        """Forget an exited process and close its log file."""
        if daemon.process is not None and daemon.process.poll() is None:
            return
        if daemon.log_file is not None:
            daemon.log_file.close()
            daemon.log_file = None

    def kill(
        self, which: int | str, sig: int = signal.SIGKILL, timeout: float = TERM_TIMEOUT
    ) -> None:
        """Send `sig` to a daemon (a node by index/reference, or the supervisor).

        For SIGKILL, SIGTERM and SIGINT, wait (bounded) until the process has exited and
        reap it; other signals (SIGSTOP, SIGCONT, ...) are only sent.
        """
        daemon = self.daemon(which)
        if not daemon.running:
            raise ClusterError(f"{daemon.name} is not running")
        self._signal(daemon, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            assert daemon.process is not None
            try:
                daemon.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ClusterError(
                    f"{daemon.name} did not exit within {timeout:g} s of signal {sig}"
                ) from None
            self._reap(daemon)
            self.write_manifest()

    def wait_exited(self, which: int | str, timeout: float = TERM_TIMEOUT) -> None:
        """Wait (bounded) until a daemon that was told to die has exited, and reap it.

        For crashes caused from outside the cluster object (`pubsub chaos crash`).
        ClusterError if it is still running after `timeout` seconds.
        """
        daemon = self.daemon(which)
        if daemon.process is None:
            return
        try:
            daemon.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{daemon.name} still runs {timeout:g} s after it was told to exit") from None
        self._reap(daemon)
        self.write_manifest()

    def _terminate(self, daemon: Daemon) -> None:
        """SIGTERM, bounded wait, SIGKILL if it will not go; no error when not running."""
        if not daemon.running:
            self._reap(daemon)
            return
        assert daemon.process is not None
        self._signal(daemon, signal.SIGTERM)
        try:
            daemon.process.wait(timeout=TERM_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._signal(daemon, signal.SIGKILL)
            daemon.process.wait()
        self._reap(daemon)

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

    # --- requests --------------------------------------------------------------------------
    def _statuses(
        self, refs: Sequence[str], timeout: float = REQUEST_TIMEOUT
    ) -> dict[str, dict[str, Any] | Exception]:
        """Ask every ref in `refs` for its status concurrently; failures come back as values."""

        async def one(ref: str) -> dict[str, Any] | Exception:
            try:
                reply = await request(ref, StatusRequest(), timeout)
            except RequestError as exc:
                return exc
            if not isinstance(reply, Reply):
                return ClusterError(f"{ref} answered status with {reply!r}")
            return reply.body

        async def every() -> list[dict[str, Any] | Exception]:
            return await asyncio.gather(*(one(ref) for ref in refs))

        return dict(zip(refs, asyncio.run(every()), strict=True))

    def _status(self, ref: str, via_cli: bool) -> dict[str, Any]:
        if via_cli:
            flag = "--supervisor" if ref == self.supervisor.ref else "--node"
            out = self.cli("status", flag, ref, "--json")
            try:
                body = json.loads(out)
            except ValueError as exc:
                raise ClusterError(f"`pubsub status {flag} {ref} --json` printed no JSON: {exc}")
            if not isinstance(body, dict):
                raise ClusterError(f"`pubsub status {flag} {ref} --json` printed {body!r}")
            return body
        result = self._statuses([ref])[ref]
        if isinstance(result, Exception):
            raise ClusterError(str(result)) from result
        return result

    def supervisor_status(self, via_cli: bool = False) -> dict[str, Any]:
        """The supervisor's status reply body (topics, members, stats)."""
        return self._status(self.supervisor.ref, via_cli)

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
        seq, key (hex), published_ms and payload (``pubsub history --json`` with `via_cli`)."""
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

    def cli(self, *args: str, timeout: float = CLI_TIMEOUT, stdin: str | None = None) -> str:
        """Run ``python -m pubsub.cli.main ARGS`` (with `stdin` as its input, else none) and
        return its stdout; ClusterError if it fails."""
        command = [self.python, "-m", "pubsub.cli.main", *args]
        feed: dict[str, Any] = (
            {"stdin": subprocess.DEVNULL} if stdin is None else {"input": stdin}
        )
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, **feed
            )
        except subprocess.TimeoutExpired:
            raise ClusterError(f"`pubsub {' '.join(args)}` took over {timeout:g} s") from None
        if done.returncode != 0:
            raise ClusterError(
                f"`pubsub {' '.join(args)}` exited {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()}"
            )
        return done.stdout

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
        supervisor_body = self.supervisor_status(via_cli)
        bodies = self.node_statuses(via_cli=via_cli)
        out: dict[str, tuple[dict[str, str], dict[str, dict[str, Any]]]] = {}
        for topic in topics:
            states: dict[str, dict[str, Any]] = {}
            for ref, body in bodies.items():
                entry = (body.get("topics") or {}).get(topic)
                if entry is not None:
                    states[ref] = entry
            out[topic] = (members_of(supervisor_body, topic), states)
        return out

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


def poll(
    problems: Callable[[], list[str]], timeout: float, what: str, interval: float = 0.1
) -> float:
    """Call `problems` every `interval` seconds until it returns []; the seconds it took.

    ClusterTimeout (with the last problems, at most 15 of them) after `timeout` seconds.
    """
    start = time.monotonic()
    deadline = start + timeout
    while True:
        found = problems()
        if not found:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            shown = "\n  ".join(found[:15])
            more = f"\n  ... and {len(found) - 15} more" if len(found) > 15 else ""
            raise ClusterTimeout(
                f"timed out after {timeout:g} s waiting for {what}; still wrong:\n  {shown}{more}"
            )
        time.sleep(interval)


def members_of(supervisor_body: Mapping[str, Any], topic: str) -> dict[str, str]:
    """ref -> label bits of one topic, from a supervisor status body."""
    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    members: dict[str, str] = {}
    for member in entry.get("members", []):
        bits = str(member.get("label"))
        ref = member.get("ref")
        members[str(ref) if ref is not None else f"<none:{bits}>"] = bits
    return members


# --- a light consistency test ------------------------------------------------------------------
def _label_or_none(bits: object) -> Label | None:
    try:
        return Label(str(bits))
    except LabelError:
        return None


def ring_order(members: Mapping[str, str]) -> list[str]:
    """Member references sorted by their labels' place on the ring (by r, then length)."""
    keyed = [(lab, ref) for ref, bits in members.items() if (lab := _label_or_none(bits))]
    return [ref for _, ref in sorted(keyed, key=lambda pair: pair[0])]


def ring_problems(
    members: Mapping[str, str], states: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """What keeps one topic's ring from agreeing with the supervisor's membership.

    Checks that every member reports a state with the supervisor's label; that left, right
    and ring are the neighbours in the supervisor's ring order (ring only at the two ends);
    that every shortcut entry is resolved to the member holding that label; and that no
    non-member reports a state.  Which shortcut *labels* a node should have is not checked
    here.  Returns [] when everything agrees.
    """
    problems: list[str] = []
    order = ring_order(members)
    if len(order) != len(members):
        problems.append("the supervisor lists a malformed label")
    holder = {bits: ref for ref, bits in members.items()}
    n = len(order)
    for position, ref in enumerate(order):
        state = states.get(ref)
        if state is None:
            problems.append(f"{ref}: member reports no state")
            continue
        if state.get("label") != members[ref]:
            problems.append(
                f"{ref}: label {state.get('label')!r}, supervisor says {members[ref]!r}"
            )

        def contact(r: str) -> list[str]:
            return [members[r], r]

        want = {
            "left": contact(order[position - 1]) if position > 0 else None,
            "right": contact(order[position + 1]) if position < n - 1 else None,
            "ring": (
                contact(order[-1])
                if n > 1 and position == 0
                else contact(order[0])
                if n > 1 and position == n - 1
                else None
            ),
        }
        for key, expected in want.items():
            got = state.get(key)
            got = list(got) if isinstance(got, (list, tuple)) else got
            if got != expected:
                problems.append(f"{ref}: {key} is {got}, expected {expected}")
        shortcuts = state.get("shortcuts") or {}
        if not isinstance(shortcuts, Mapping):
            problems.append(f"{ref}: shortcuts is not a map")
            continue
        for bits, target in shortcuts.items():
            if target is None:
                problems.append(f"{ref}: shortcut {bits} not resolved yet")
            elif holder.get(bits) != target:
                problems.append(
                    f"{ref}: shortcut {bits} points to {target}, the supervisor says "
                    f"{holder.get(bits)}"
                )
    for ref in sorted(set(states) - set(members)):
        problems.append(f"{ref}: reports a state but is not a member")
    return problems


__all__ = [
    "ClusterError",
    "ClusterTimeout",
    "Daemon",
    "LocalCluster",
    "members_of",
    "pick_free_ports",
    "poll",
    "port_is_free",
    "ring_order",
    "ring_problems",
]
