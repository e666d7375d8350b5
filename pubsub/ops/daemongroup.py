"""The process handling every local cluster shares, whatever its mode: launching daemons
with a log file each, waiting until they answer status, signalling, killing, reaping and
stopping them, their admin listeners and Prometheus endpoints, and the manifest.

A mode's launcher (`pubsub.ops.localcluster.LocalCluster` for the skip ring,
`broker.localscot.LocalScot` for SCOT brokers) subclasses `DaemonGroup`, describes its
daemons in `__init__` and names them through `daemons`, `daemon` and `manifest`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pubsub.kernel.control import Reply, StatusRequest
from pubsub.ops.processes import (
    ADMIN_PORT_OFFSET,
    CLI_TIMEOUT,
    HOST,
    METRICS_PORT_OFFSET,
    PROMETHEUS_TARGETS,
    REQUEST_TIMEOUT,
    TERM_TIMEOUT,
    ClusterError,
    ClusterTimeout,
    Daemon,
    _check_answered_by,
    _status_problem,
    pick_free_ports,
)
from pubsub.runtime.client import RequestError, request


class DaemonGroup:
    """Daemons as OS processes on 127.0.0.1 (see the module docstring).

    A subclass sets, in its `__init__`: `workdir`, `python`, `env`, `log_level`,
    `start_timeout`, `logs_dir`, `events_dir`, `prometheus_targets_dir` and `_by_ref`
    (reference -> Daemon), calls `_setup_telemetry` and `_setup_admin` once its daemons
    exist, and implements `daemons`, `daemon` and `manifest`.
    """

    workdir: Path
    python: str
    env: dict[str, str]
    log_level: str
    start_timeout: float
    logs_dir: Path
    events_dir: Path | None
    prometheus_targets_dir: Path | None
    metrics: bool
    _by_ref: dict[str, Daemon]
    _atexit_registered: bool = False

    def daemons(self) -> list[Daemon]:
        """Every daemon of the group, in the order they start."""
        raise NotImplementedError

    def daemon(self, which: int | str) -> Daemon:
        """One daemon, by the names the subclass accepts (index, reference, ...)."""
        raise NotImplementedError

    def manifest(self) -> dict[str, Any]:
        """What workdir/cluster.json says about the group."""
        raise NotImplementedError

    def prometheus_targets(self) -> list[dict[str, Any]]:
        """Prometheus file_sd target groups, one per role, labelled with the cluster."""
        raise NotImplementedError

    def _setup_admin(self, admin: bool, base_port: int | None) -> None:
        """Give every daemon an admin listener on 127.0.0.1 (see the module docstring)."""
        if not admin:
            return
        daemons = self.daemons()
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
        daemons = self.daemons()
        self.metrics = metrics
        if metrics:
            if base_port is None:
                taken = {d.port for d in daemons}
                ports: list[int] = []
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

    def write_prometheus_targets(self, path: Path | str | None = None) -> Path:
        """Write `prometheus_targets` as JSON (atomically) to `path`, default
        ``workdir/prometheus-targets.json``; returns the path."""
        target = Path(path) if path is not None else self.workdir / PROMETHEUS_TARGETS
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(json.dumps(self.prometheus_targets(), indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        return target

    def name_of(self, ref: str) -> str:
        """A short name for a reference ("node-03", "supervisor"), else the reference."""
        daemon = self._by_ref.get(ref)
        return ref if daemon is None else daemon.name

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

    def write_manifest(self) -> None:
        """Write `manifest` to workdir/cluster.json atomically (for operators and tools)."""
        path = self.workdir / "cluster.json"
        tmp = path.with_name(".cluster.json.tmp")
        with contextlib.suppress(OSError):  # best effort: the work dir may be gone at exit
            tmp.write_text(json.dumps(self.manifest(), indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, path)

    def wait_answering(self, daemons: Sequence[Daemon], timeout: float | None = None) -> None:
        """Wait until every daemon in `daemons` answers status; ClusterError if one exits,
        ClusterTimeout if `timeout` (default `start_timeout`) seconds pass without another
        daemon answering.

        The clock restarts whenever one more daemon answers: daemons started together share
        the machine's cores while they import and open their stores, so the last of many
        answers later than one alone would, on a busy machine well past `start_timeout`.  A
        daemon that is stuck still ends the wait, after at most len(daemons) × timeout.
        """
        patience = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + patience
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
            for daemon in pending:
                _check_answered_by(daemon, results[daemon.ref])
            waiting = len(pending)
            pending = [d for d in pending if isinstance(results[d.ref], Exception)]
            if len(pending) < waiting:
                deadline = time.monotonic() + patience
            elif pending and time.monotonic() > deadline:
                problems = [
                    _status_problem(d, results[d.ref])  # type: ignore[arg-type]
                    for d in pending
                ]
                raise ClusterTimeout("; ".join(problems))
            if pending:
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop every daemon: SIGTERM, up to TERM_TIMEOUT seconds, then SIGKILL; reap all."""
        daemons = self.daemons()
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

    def _shared_targets_file(self) -> Path:
        """This group's file in the directory Prometheus watches (named by its first port)."""
        assert self.prometheus_targets_dir is not None
        tag = f"{self.daemons()[0].port}-{os.getpid()}"
        return self.prometheus_targets_dir / f"pubsub-cluster-{tag}.json"

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

    def status_of(self, ref: str) -> dict[str, Any]:
        """One daemon's status body; ClusterError if it does not answer."""
        result = self._statuses([ref])[ref]
        if isinstance(result, Exception):
            raise ClusterError(str(result)) from result
        return result

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
