"""`pubsub cluster up|status|down`: a local cluster of real processes that outlives the command.

``pubsub cluster up`` starts a supervisor and N subscriber nodes as OS processes on
127.0.0.1 (`pubsub.ops.localcluster.LocalCluster`: free ports, one data directory and log per
daemon), makes every node join the given topics, waits (bounded) until every topic's ring
agrees with the supervisor, prints the rings and returns, leaving the daemons running.
Everything lives in one directory (``--dir``, default ``./.pubsub-cluster``, env
``PUBSUB_CLUSTER_DIR``); its manifest ``cluster.json`` names every daemon's reference, pid,
data directory and log.  The same topology as docker-compose.yml, without containers.

With ``--tls`` every daemon and client speaks mutual TLS with certificates made on the
fly in ``DIR/tls`` (`pubsub.ops.tlsfiles`); the manifest names the client certificate, which
``status`` uses.

``pubsub cluster status`` reads the manifest and shows every daemon (running or not, pid,
reference, answering `status` or not) and, per topic, the supervisor's member count,
whether its database is legitimate and whether the overlay is, by the overlay's own check
(`pubsub.kernel.contracts.Overlay.legitimate`; the manifest names the overlay).  For the
skip ring ``legitimate`` means the supervisor's database is, and every member's label,
left, right, ring and shortcut entries agree with the supervisor's membership
(`pubsub.skipring.statuscheck.ring_problems`; the test suite has the independent oracle that also
recomputes which shortcut labels each node must have).  Members of the rings that the
cluster did not start (a node run by hand against its supervisor) are asked too and listed
as such (``other_members``), so the rings are checked whole.  ``--json`` prints the same as
one JSON object.  Exit status 0 when every daemon runs and every ring is legitimate, 3 when
the cluster is up but something is not, 1 when there is no cluster.

``pubsub cluster down`` stops every daemon of the manifest that still runs (SIGTERM, then
SIGKILL after a bounded wait) and records that in the manifest.  It is idempotent: with
nothing running (a daemon that died, a cluster already stopped) it stops what is left
and succeeds.  Data and logs stay in the directory; the next ``up`` there starts afresh
(it removes the previous cluster's data).

A daemon is only signalled when its pid still runs the command the manifest recorded
(``/proc/PID/cmdline`` names ``pubsub.cli.main`` and its reference), so a pid reused by another
program after a crash or reboot is never touched.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from pubsub.cli.common import overlay_option
from pubsub.kernel import registry
from pubsub.kernel.control import Reply, StatusRequest
from pubsub.kernel.shards import merged_topics
from pubsub.kernel.wire import WireError, validate_topic
from pubsub.ops.detached import (
    MANIFEST,
    NoCluster,
    daemons_of,
    is_running,
    manifest_path,
    read_manifest,
    stop_daemons,
    write_manifest,
)
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.members import members_of
from pubsub.ops.processes import ClusterError
from pubsub.runtime.client import RequestError, request

DEFAULT_DIR = ".pubsub-cluster"
#: Seconds one status request may take in `status`.
STATUS_TIMEOUT = 3.0
#: Exit status of `status` when the cluster is up but not everything runs or is legitimate.
EXIT_DEGRADED = 3


# --- status --------------------------------------------------------------------------------------
def _statuses(refs: Sequence[str], timeout: float) -> dict[str, dict[str, Any] | str]:
    """Status bodies by reference, or the error text for a daemon that did not answer."""

    async def one(ref: str) -> dict[str, Any] | str:
        try:
            reply = await request(ref, StatusRequest(), timeout)
        except RequestError as exc:
            return str(exc)
        if not isinstance(reply, Reply):
            return f"answered status with {reply.kind}"
        return reply.body

    async def every() -> list[dict[str, Any] | str]:
        return await asyncio.gather(*(one(ref) for ref in refs))

    return dict(zip(refs, asyncio.run(every()), strict=True)) if refs else {}


def cluster_status(directory: Path, timeout: float = STATUS_TIMEOUT) -> dict[str, Any]:
    """Everything `pubsub cluster status` shows, as a JSON-able dict (see the module doc)."""
    doc = read_manifest(directory)
    overlay = registry.overlay(str(doc.get("overlay") or registry.DEFAULT_OVERLAY))
    if isinstance(doc.get("tls"), dict):  # a cluster started with --tls: use its client certificate
        os.environ.update({str(k): str(v) for k, v in doc["tls"].items()})
    entries = daemons_of(doc)
    running = {e.name: is_running(e) for e in entries}
    bodies = _statuses([e.ref for e in entries if running[e.name]], timeout)
    daemons = []
    for entry in entries:
        body = bodies.get(entry.ref)
        daemons.append(
            {
                "name": entry.name,
                "role": entry.role,
                "ref": entry.ref,
                "pid": entry.pid if running[entry.name] else None,
                "running": running[entry.name],
                "answering": isinstance(body, dict),
                "error": body if isinstance(body, str) else None,
                "log": entry.log,
                "metrics_port": entry.metrics_port,
                "admin": entry.admin,
                "http": entry.http,
            }
        )
    sup_refs = {e.ref for e in entries if e.role == "supervisor"}
    sup_body = _merged_supervisors(
        {ref: body for ref, body in bodies.items() if ref in sup_refs and isinstance(body, dict)}
    )
    topics: dict[str, Any] = {}
    others: dict[str, dict[str, Any] | str] = {}
    if isinstance(sup_body, dict):
        # members this cluster did not start (a node run by hand against its supervisor)
        # are asked too: the rings are checked whole
        listed = {e.ref for e in entries}
        others = _statuses(sorted({
            ref for topic in (sup_body.get("topics") or {}) for ref in members_of(sup_body, topic)
            if ref not in listed and not ref.startswith("<none:")
        }), timeout)
        node_bodies = {
            ref: body for ref, body in (bodies | others).items() if isinstance(body, dict) and ref not in sup_refs
        }
        for topic, entry in sorted((sup_body.get("topics") or {}).items()):
            members = members_of(sup_body, topic)
            states = {
                ref: body["topics"][topic]
                for ref, body in node_bodies.items()
                if isinstance(body.get("topics"), dict) and topic in body["topics"]
            }
            problems = overlay.legitimate(sup_body, states, topic)
            legit_db = bool(isinstance(entry, dict) and entry.get("legitimate_database"))
            topics[topic] = {
                "members": len(members),
                "legitimate_database": legit_db,
                "legitimate": legit_db and not problems,
                "problems": problems,
            }
    all_running = all(running.values())
    return {
        "dir": str(directory),
        "overlay": overlay.name,
        "up": any(running.values()),
        "all_running": all_running,
        "supervisor_answering": isinstance(sup_body, dict),
        "daemons": daemons,
        "other_members": [
            {"ref": ref, "answering": isinstance(body, dict), "error": body if isinstance(body, str) else None}
            for ref, body in others.items()
        ],
        "topics": topics,
        "healthy": all_running
        and all(d["answering"] for d in daemons)
        and all(t["legitimate"] for t in topics.values()),
    }


def _merged_supervisors(bodies: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The answering supervisors' statuses as one (sharded supervisors: each topic from
    its owner in the live set the first one reports); None if none answers."""
    if len(bodies) <= 1:
        return next(iter(bodies.values()), None)
    topics, _ = merged_topics(bodies)
    return {"topics": topics}


def format_status(report: Mapping[str, Any]) -> str:
    """The text form of `cluster_status`."""
    daemons = report["daemons"]
    nodes = [d for d in daemons if d["role"] == "node"]
    up_nodes = sum(1 for d in nodes if d["running"])
    lines = [
        f"cluster in {report['dir']}: supervisor "
        f"{'running' if daemons[0]['running'] else 'NOT running'}, "
        f"{up_nodes} of {len(nodes)} nodes running"
    ]
    http = any(d.get("http") for d in daemons)
    metrics = any(d.get("metrics_port") for d in daemons)
    rows = [["DAEMON", "REF", "ADMIN", *(["HTTP API"] if http else []), *(["METRICS"] if metrics else []),
             "PID", "STATE"]]
    for d in daemons:
        if not d["running"]:
            state = "not running"
        elif d["answering"]:
            state = "running"
        else:
            state = f"running, not answering ({d['error']})"
        api = [d.get("http") or "-"] if http else []
        scrape = [f"127.0.0.1:{d['metrics_port']}" if d.get("metrics_port") else "-"] if metrics else []
        rows.append([d["name"], d["ref"], d["admin"] or "-", *api, *scrape, str(d["pid"] or "-"), state])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines.extend(
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
    for other in report["other_members"]:
        answer = "answering" if other["answering"] else f"not answering ({other['error']})"
        lines.append(f"  member {other['ref']} (not started by this cluster): {answer}")
    if not report["supervisor_answering"]:
        lines.append("topics: unknown (the supervisor does not answer)")
    elif not report["topics"]:
        lines.append("topics: none")
    for topic, t in report["topics"].items():
        db = "legitimate" if t["legitimate_database"] else "repairing"
        count = len(t["problems"])
        ring = "legitimate" if t["legitimate"] else f"not legitimate ({count} problem{'' if count == 1 else 's'}"
        if not t["legitimate"] and t["problems"]:
            ring += f", e.g. {t['problems'][0]}"
        if not t["legitimate"]:
            ring += ")"
        members = f"{t['members']} member{'' if t['members'] == 1 else 's'}"
        overlay = report.get("overlay", registry.DEFAULT_OVERLAY)
        shape = "ring" if overlay == registry.DEFAULT_OVERLAY else overlay
        lines.append(f"topic {topic}: {members}, database {db}, {shape} {ring}")
    return "\n".join(lines)


# --- the commands --------------------------------------------------------------------------------
def _dir_option(f: Any) -> Any:
    return click.option(
        "--dir",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_DIR,
        show_default=True,
        envvar="PUBSUB_CLUSTER_DIR",
        help="The cluster's directory: manifest, data, logs (env PUBSUB_CLUSTER_DIR).",
    )(f)


def _topics(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    topics: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            try:
                topic = validate_topic(name)
            except WireError as exc:
                raise click.BadParameter(f"{name!r}: {exc.detail}", ctx, param) from None
            if topic not in topics:
                topics.append(topic)
    return topics


@click.group("cluster", context_settings={"help_option_names": ["-h", "--help"]})
def cluster() -> None:
    """Run a local cluster (supervisor + N nodes as processes on 127.0.0.1) in the
    background: up, status, down."""


@cluster.command()
@click.option("-n", "--nodes", "n_nodes", type=click.IntRange(1, 64), default=4,
              show_default=True, help="Number of subscriber nodes.")
@_dir_option
@click.option("--topics", "topics", multiple=True, callback=_topics, default=("news",),
              show_default=True, metavar="T[,T...]",
              help="Topics every node joins (comma-separated, or repeat the option).")
@click.option("--interval", type=click.FloatRange(min=0.01), default=0.3, show_default=True,
              metavar="S", help="Timeout interval of every daemon, seconds.")
@click.option("--base-port", type=click.IntRange(1024, 65535), default=None,
              help="Supervisor on this port, node i on base-port + 1 + i (default: free ports).")
@click.option("--metrics", is_flag=True,
              help="Serve Prometheus metrics on 127.0.0.1 too (ports in the manifest and "
              "DIR/prometheus-targets.json).")
@click.option("--events", is_flag=True,
              help="Write the event stream into DIR/events (for `pubsub analyze DIR`).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until every topic's ring is legitimate and print it.")
@click.option("--tls", is_flag=True,
              help="Mutual TLS between every daemon and client: a CA and certificates are "
              "made in DIR/tls (`pubsub certs`); the output says how a client uses them.")
@click.option("--http", is_flag=True,
              help="Every node also serves its HTTP API (publish, history, SSE stream, status; README, "
              "'HTTP API') on a free port of 127.0.0.1, shown by up and status.")
@click.option("--supervisors", "n_supervisors", type=click.IntRange(1, 16), default=1,
              show_default=True,
              help="Number of sharded supervisors (each topic belongs to one by consistent "
              "hashing; the nodes are given the first one's address).")
@overlay_option
def up(
    n_nodes: int,
    directory: Path,
    topics: list[str],
    interval: float,
    base_port: int | None,
    metrics: bool,
    events: bool,
    wait: bool,
    tls: bool,
    http: bool,
    n_supervisors: int,
    overlay: str | None,
) -> None:
    """Start a supervisor (or --supervisors K) and N nodes in the background, each node
    joining --topics."""
    from pubsub.ops.demo import render_ring, wait_for_rings

    directory = directory.resolve()
    if manifest_path(directory).exists():
        try:
            running = [e for e in daemons_of(read_manifest(directory)) if is_running(e)]
        except NoCluster:
            running = []
        if running:
            names = ", ".join(f"{e.name} (pid {e.pid})" for e in running[:3])
            raise click.ClickException(
                f"a cluster is already up in {directory}: {names}"
                f"{' ...' if len(running) > 3 else ''}; stop it with "
                f"`pubsub cluster down --dir {directory}` first"
            )
        # A stopped cluster's leftovers: start afresh (logs are kept, appended to).
        for sub in ("supervisor", "nodes", "events", "tls", *(f"supervisor-{j}" for j in range(1, 16))):
            shutil.rmtree(directory / sub, ignore_errors=True)
        manifest_path(directory).unlink(missing_ok=True)
    try:
        local = LocalCluster(
            directory,
            n_nodes,
            interval=interval,
            base_port=base_port,
            metrics=metrics,
            events_dir=directory / "events" if events else None,
            tls=tls,
            http=http,
            supervisors=n_supervisors,
            overlay=overlay or registry.DEFAULT_OVERLAY,
        )
    except (ClusterError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    try:
        local.start()
        for i in range(n_nodes):
            for topic in topics:
                local.subscribe(i, topic)
        snapshots = wait_for_rings(local, {t: set(local.node_refs) for t in topics}) if wait else {}
    except ClusterError as exc:
        local.stop()
        raise click.ClickException(f"cluster did not come up: {exc}") from None
    except BaseException:
        local.stop()
        raise
    # Leave the daemons running: they are in their own sessions, and nothing stops them
    # when this command exits.
    atexit.unregister(local.stop)
    sups = f"supervisor {local.supervisor_ref}" if n_supervisors == 1 else f"{n_supervisors} supervisors"
    click.echo(f"cluster up in {directory}: {sups}, {n_nodes} nodes")
    scheme = "https" if tls else "http"
    for daemon in [*local.supervisors, *local.nodes]:
        api = f"  HTTP API {scheme}://{daemon.http_ref}/v1/status" if daemon.http_ref else ""
        scrape = f"  metrics http://127.0.0.1:{daemon.metrics_port}/metrics" if daemon.metrics_port else ""
        click.echo(f"  {daemon.name:<10} {daemon.ref:<21} pid {daemon.pid}{api}{scrape}")
    click.echo(f"  logs in {local.logs_dir}; topics: {', '.join(topics) or 'none'}")
    for topic in topics if wait else []:
        click.echo()
        click.echo(render_ring(local, topic, snapshots[topic]))
    click.echo()
    if local.certs is not None:
        exports = " ".join(f"{k}={v}" for k, v in local.certs.client_env().items())
        click.echo(f"TLS: clients present the cluster's operator (admin) certificate:\n  export {exports}")
    first = local.node_refs[0]
    join = "" if topics else f"pubsub subscribe news --node {first} --detach; "
    click.echo(
        f"try: {join}pubsub publish {topics[0] if topics else 'news'} hello --node {first}"
        f"\nstop: pubsub cluster down --dir {directory}"
    )


@cluster.command()
@_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=STATUS_TIMEOUT,
              show_default=True, metavar="S", help="Seconds each daemon may take to answer.")
@click.pass_context
def status(ctx: click.Context, directory: Path, as_json: bool, timeout: float) -> None:
    """Show every daemon of the cluster and every topic's ring (exit 0: all running and
    legitimate; 3: up but not; 1: no cluster)."""
    directory = directory.resolve()
    report = cluster_status(directory, timeout)
    if not report["up"]:
        raise NoCluster(
            f"the cluster in {directory} is not running (no daemon of its manifest runs); "
            f"start one with `pubsub cluster up --dir {directory}`"
        )
    click.echo(json.dumps(report, indent=2) if as_json else format_status(report))
    if not report["healthy"]:
        ctx.exit(EXIT_DEGRADED)


@cluster.command()
@_dir_option
def down(directory: Path) -> None:
    """Stop every daemon of the cluster (idempotent: succeeds when nothing runs)."""
    directory = directory.resolve()
    try:
        doc = read_manifest(directory)
    except NoCluster:
        if manifest_path(directory).exists():
            raise
        click.echo(f"no cluster in {directory} (no {MANIFEST}); nothing to stop")
        return
    entries = daemons_of(doc)
    try:
        stopped, killed = stop_daemons(entries)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    targets = doc.get("prometheus_targets_file")
    if isinstance(targets, str):  # Prometheus would go on scraping the stopped daemons
        with contextlib.suppress(OSError):
            Path(targets).unlink()
    for raw in [doc["supervisor"], *doc["nodes"], *(doc.get("supervisors") or [])]:
        if isinstance(raw, dict):
            raw["pid"] = None
    doc["stopped_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        write_manifest(directory, doc)
    except OSError as exc:
        raise click.ClickException(f"stopped, but cannot update the manifest: {exc}") from None
    if not stopped and not killed:
        click.echo(f"nothing was running in {directory}")
        return
    click.echo(
        f"stopped {len(stopped) + len(killed)} daemons in {directory}"
        + (f" ({', '.join(killed)} needed SIGKILL)" if killed else "")
    )


