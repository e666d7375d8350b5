"""A local SCOT of real broker processes on 127.0.0.1 (integration tests, demonstrations).

``with LocalScot(workdir, scot3x3()) as scot: ...`` picks a free port per broker
(`pubsub.ops.processes.pick_free_ports`), writes the topology with those addresses to
``workdir/topology.json``, starts one ``python -m pubsub.cli.main broker --topology ... --id x,i``
process per broker and waits until every one answers ``status``; leaving the block stops
them all (SIGTERM, bounded wait, SIGKILL), whatever happened inside.

Process handling is every local cluster's (`pubsub.ops.daemongroup.DaemonGroup`): `Daemon`
records, launching with a log file per broker (``workdir/logs/broker-<x>-<i>.log``), `kill`,
`stop`, `wait_answering` and `cli`, and on request an admin listener (`pubsub chaos`) and a
Prometheus endpoint per broker.  Brokers are named ``broker-<x>-<i>`` and addressed by
index, by reference or by broker id.  The manifest ``workdir/cluster.json`` lists them.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from broker.cores.topology import BrokerId, Scot
from pubsub.ops.daemongroup import DaemonGroup
from pubsub.ops.processes import HOST, START_TIMEOUT, ClusterError, Daemon, pick_free_ports
from pubsub.ops.tlsfiles import ClusterCerts


class LocalScot(DaemonGroup):
    """Every broker of a SCOT as an OS process on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self,
        workdir: Path | str,
        topo: Scot,
        *,
        protocol: str = "octopia",
        routing: str | None = None,
        tau: float | None = None,
        tw: float | None = None,
        heartbeat: float | None = None,
        suspect_after: int | None = None,
        link_rates: Mapping[BrokerId, Mapping[BrokerId, float]] | None = None,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        start_timeout: float = START_TIMEOUT,
        log_level: str = "info",
        metrics: bool = False,
        admin: bool = False,
        events_dir: Path | str | None = None,
        tls: bool = False,
        keep_state: bool = True,
    ) -> None:
        """Describe the SCOT (nothing starts before `start` or entering ``with``).

        `link_rates` maps a broker to its initial ``--link-rate`` limits (neighbour ->
        messages per second).  `env` adds environment variables for the brokers.
        `metrics`, `admin` and `events_dir` give every broker a Prometheus endpoint, an
        admin listener and an event stream, as `LocalCluster` does for its daemons; `tls`
        starts them with mutual TLS and certificates made in ``workdir/tls``, as there.
        `keep_state` gives every broker ``--state-dir`` in its data directory, so that its
        clients' advertisements and sessions survive `kill_broker` and `restart_broker`.
        """
        self.workdir = Path(workdir).resolve()
        self.python = python or sys.executable
        self.env = dict(env or {})
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.logs_dir = self.workdir / "logs"
        self.events_dir = None if events_dir is None else Path(events_dir).resolve()
        self.prometheus_targets_dir = None
        ports = pick_free_ports(len(topo))
        self.topology = topo.with_addresses(
            {bid: f"{HOST}:{port}" for bid, port in zip(topo.brokers, ports, strict=True)}
        )
        self.topology_path = self.workdir / "topology.json"
        self.protocol = protocol
        self.routing = routing
        self.brokers: dict[BrokerId, Daemon] = {}
        self.certs: ClusterCerts | None = None
        if tls:
            refs = {self.topology.address(bid): "broker" for bid in self.topology.brokers}
            self.certs = ClusterCerts.create(self.workdir / "tls", refs)
        for bid in self.topology.brokers:
            x, i = self.topology.locate(bid)
            name = f"broker-{x}-{i}"
            args = [
                "broker", "--topology", str(self.topology_path), "--id", bid,
                "--protocol", protocol,
            ]
            if routing is not None:  # else the protocol's default (OctopiA: idr; PADRES: tid-s)
                args += ["--routing", routing]
            for flag, value in (("--tau", tau), ("--tw", tw), ("--heartbeat", heartbeat),
                                ("--suspect-after", suspect_after)):
                if value is not None:
                    args += [flag, repr(value)]
            for link, rate in (link_rates or {}).get(bid, {}).items():
                args += ["--link-rate", f"{link}={rate!r}"]
            if self.certs is not None:
                args += self.certs.daemon_args(self.topology.address(bid))
            data_dir = self.workdir / "brokers" / name
            if keep_state:
                args += ["--state-dir", str(data_dir / "state")]
            self.brokers[bid] = Daemon(
                name=name,
                ref=self.topology.address(bid),
                args=args,
                data_dir=data_dir,
                log_path=self.logs_dir / f"{name}.log",
            )
        self._by_ref = {d.ref: d for d in self.brokers.values()}
        self._bid_of = {d.ref: bid for bid, d in self.brokers.items()}
        self._setup_telemetry(metrics, None)
        self._setup_admin(admin, None)

    def daemons(self) -> list[Daemon]:
        """Every broker, in the topology's order."""
        return list(self.brokers.values())

    def daemon(self, which: int | str) -> Daemon:
        """A broker by index, reference or broker id ("x,i")."""
        if isinstance(which, int):
            return self.daemons()[which]
        found = self._by_ref.get(which) or self.brokers.get(which)
        if found is None:
            raise ClusterError(f"no broker {which!r} in this SCOT")
        return found

    def prometheus_targets(self) -> list[dict[str, Any]]:
        """One file_sd target group: every broker's metrics endpoint."""
        targets = [f"{HOST}:{d.metrics_port}" for d in self.daemons() if d.metrics_port]
        return [{"targets": targets, "labels": {"role": "broker", "cluster": str(self.workdir)}}] if targets else []

    # --- naming ----------------------------------------------------------------------------------
    def address(self, bid: BrokerId) -> str:
        """The HOST:PORT of broker `bid`."""
        return self.topology.address(bid)

    def daemon_of(self, bid: BrokerId) -> Daemon:
        try:
            return self.brokers[bid]
        except KeyError:
            raise ClusterError(f"no broker {bid!r} in this SCOT") from None

    def bid_of(self, ref: str) -> BrokerId:
        """The broker id listening on `ref`."""
        return self._bid_of[ref]

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> LocalScot:
        """Write the topology file, start every broker, wait until all answer status."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if self.certs is not None:
            self.certs.install_client_env()
        if not self._atexit_registered:  # like LocalCluster: stopped at exit if never stopped
            atexit.register(self.stop)
            self._atexit_registered = True
        tmp = self.topology_path.with_name(".topology.json.tmp")
        tmp.write_text(self.topology.to_json() + "\n", encoding="utf-8")
        os.replace(tmp, self.topology_path)
        try:
            for daemon in self.daemons():
                self._launch(daemon)
            self.wait_answering(self.daemons())
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> LocalScot:
        return self.start()

    def stop(self) -> None:
        """Stop every broker (`DaemonGroup.stop`); with TLS, restore the environment."""
        super().stop()
        if self.certs is not None:
            self.certs.restore_env()

    def kill_broker(self, bid: BrokerId, sig: int | None = None) -> None:
        """kill -9 (or `sig`) broker `bid` and reap it (bounded)."""
        if sig is None:
            self.kill(self.daemon_of(bid).ref)
        else:
            self.kill(self.daemon_of(bid).ref, sig)

    def restart_broker(self, bid: BrokerId) -> None:
        """Start broker `bid` again (after `kill_broker`) on the same data directory, and
        wait until it answers status."""
        daemon = self.daemon_of(bid)
        self._launch(daemon)
        self.wait_answering([daemon])

    def manifest(self) -> dict[str, Any]:
        return {
            "topology": str(self.topology_path),
            "protocol": self.protocol,
            "routing": self.routing,
            "brokers": [
                {
                    "id": bid,
                    "name": d.name,
                    "ref": d.ref,
                    "pid": d.pid if d.running else None,
                    "log": str(d.log_path),
                }
                for bid, d in self.brokers.items()
            ],
        }

    # --- requests --------------------------------------------------------------------------------
    def broker_status(self, bid: BrokerId, via_cli: bool = False) -> dict[str, Any]:
        """One broker's status body (``pubsub status --broker --json`` with `via_cli`)."""
        ref = self.address(bid)
        if via_cli:
            out = self.cli("status", "--broker", ref, "--json")
            try:
                body = json.loads(out)
            except ValueError as exc:
                raise ClusterError(f"`pubsub status --broker {ref} --json` printed no JSON: {exc}") from None
            return body
        return self.status_of(ref)

    def broker_statuses(self, bids: Iterable[BrokerId] | None = None) -> dict[BrokerId, dict[str, Any]]:
        """Status bodies of `bids` (default: every running broker), asked concurrently;
        ClusterError if one does not answer."""
        wanted = list(bids) if bids is not None else [b for b, d in self.brokers.items() if d.running]
        results = self._statuses([self.address(b) for b in wanted])
        out: dict[BrokerId, dict[str, Any]] = {}
        for bid in wanted:
            result = results[self.address(bid)]
            if isinstance(result, Exception):
                raise ClusterError(f"broker {bid}: {result}") from result
            out[bid] = result
        return out


__all__ = ["LocalScot"]
