"""`pubsub chaos ...`: the operator's side of fault injection (`pubsub.runtime.admin` is the daemons').

Every subcommand talks to daemons' *admin addresses* (``--admin HOST:PORT``, what a daemon
was started with as ``--admin-listen``), never to their peer ports.  With several
``--admin``, the command first asks every daemon who it is (action ``info``: nothing is
applied unless all answer), then applies the injection to each in turn under one marker id:
one command is one perturbation, so the first daemon alone writes the marker (and the heal
marker of a partition or drop), naming every target.

Exit codes: 0 applied everywhere; 1 a daemon refused (bad parameters, wrong role, unknown
topic, ...) or could not be reached -- daemons named before it in the output did apply it;
2 bad usage (flags).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any, NoReturn

import click

from pubsub.kernel.wire import WireError, validate_ref, validate_topic

#: Longest partition or drop, seconds (the daemons refuse more, `pubsub.runtime.admin.MAX_DURATION`).
MAX_DURATION = 24 * 3600.0


def _admins(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for value in values:
        try:
            ref = validate_ref(value)
        except WireError:
            raise click.BadParameter(f"{value!r} is not HOST:PORT", ctx, param) from None
        if ref not in out:
            out.append(ref)
    return out


def _topic(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return validate_topic(value)
    except WireError as exc:
        raise click.BadParameter(exc.detail, ctx, param) from None


def _refs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    return _admins(ctx, param, values)


def _common(single: bool = False) -> Callable[[Any], Any]:
    """--admin (once or repeated), --marker-id, --json, --timeout."""

    def wrap(f: Any) -> Any:
        for option in reversed(
            [
                click.option(
                    "--admin",
                    "admins",
                    multiple=not single,
                    required=True,
                    callback=(lambda c, p, v: _admins(c, p, (v,))) if single else _admins,
                    metavar="HOST:PORT",
                    help="A daemon's admin address (its --admin-listen)"
                    + ("." if single else "; repeat for several daemons."),
                ),
                click.option(
                    "--marker-id",
                    default=None,
                    metavar="ID",
                    help="Id of the marker event (default: made up and printed).",
                ),
                click.option("--json", "as_json", is_flag=True, help="Print the replies as JSON."),
                click.option(
                    "--timeout",
                    type=click.FloatRange(min=0, min_open=True),
                    default=5.0,
                    show_default=True,
                    metavar="S",
                    help="Seconds to wait for each daemon's reply.",
                ),
            ]
        ):
            f = option(f)
        return f

    return wrap


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def chaos() -> None:
    """Inject faults into running daemons, through their admin addresses.

    A daemon accepts injections only on the admin listener it was started with
    (--admin-listen HOST:PORT, loopback unless --admin-allow-remote); the same requests
    on its peer port are refused and counted as "forbidden".  Each injection writes a
    `marker` event into the daemon's event stream (--events-dir, docs/events.md); the
    marker id is printed.  With several --admin, every daemon is asked who it is first,
    and one marker (written by the first) names them all.

    Exit codes: 0 done; 1 a daemon refused or could not be reached (those listed before
    it did apply the injection); 2 bad usage.
    """


def _run(
    action: str,
    admins: list[str],
    params: dict[str, Any],
    marker_id: str | None,
    as_json: bool,
    timeout: float,
    describe: Callable[[dict[str, Any]], str],
    *,
    members: bool = False,
) -> None:
    """Ask every admin who it is, then apply `action` to each; print; exit 1 on failure."""
    from pubsub.runtime.admin import admin_request
    from pubsub.runtime.adminparams import ChaosError, new_marker_id
    from pubsub.runtime.client import RequestError

    marker = marker_id or new_marker_id(action)
    done: list[dict[str, Any]] = []

    def fail(admin: str, reason: str) -> NoReturn:
        _print(action, marker, done, as_json, describe)
        raise click.ClickException(_about(admin, reason))

    async def run() -> None:
        refs: list[str] = []
        for admin in admins:
            try:
                info = await admin_request(admin, "info", timeout=timeout)
            except (ChaosError, RequestError) as exc:
                fail(admin, str(exc))
            refs.append(str(info.get("ref")))
        # a crash marker is written by the last daemon asked, once the others are down
        writer = len(admins) - 1 if action == "crash" else 0
        for i, admin in enumerate(admins):
            request = dict(params, marker_id=marker, record=i == writer)
            if members:
                request["members"] = refs
            elif len(admins) > 1:
                request["targets"] = refs
            try:
                body = await admin_request(admin, action, request, timeout=timeout)
            except (ChaosError, RequestError) as exc:
                fail(admin, f"refused {action}: {exc}" if isinstance(exc, ChaosError) else str(exc))
            done.append({"admin": admin, **body})

    asyncio.run(run())
    _print(action, marker, done, as_json, describe)


def _print(
    action: str,
    marker: str,
    done: list[dict[str, Any]],
    as_json: bool,
    describe: Callable[[dict[str, Any]], str],
) -> None:
    if as_json:
        click.echo(json.dumps({"action": action, "marker": marker, "results": done}, indent=1))
        return
    for body in done:
        written = "marker written" if body.get("marker_written") else "no marker written here"
        click.echo(
            f"{action} {body.get('ref')} ({body.get('role')}, admin {body.get('admin')}): "
            f"{describe(body)}; {written}"
        )
    if any(body.get("marker_written") for body in done):
        click.echo(f"marker {marker}")


def _about(admin: str, reason: str) -> str:
    """`reason` naming `admin`: the client's errors mostly name the address already (as a
    whole: 127.0.0.1:1 is not named by 127.0.0.1:18080)."""
    return reason if re.search(re.escape(admin) + r"(?!\d)", reason) else f"{admin}: {reason}"


@chaos.command()
@click.option("--admin", "admins", multiple=True, required=True, callback=_admins,
              metavar="HOST:PORT", help="A daemon's admin address; repeat for several.")
@click.option("--json", "as_json", is_flag=True, help="Print the replies as JSON.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=5.0,
              show_default=True, metavar="S", help="Seconds to wait for each daemon's reply.")
def info(admins: list[str], as_json: bool, timeout: float) -> None:
    """Show who answers on each admin address and which network faults are in force."""
    from pubsub.runtime.admin import admin_request
    from pubsub.runtime.adminparams import ChaosError
    from pubsub.runtime.client import RequestError

    async def run() -> list[dict[str, Any]]:
        out = []
        for admin in admins:
            try:
                out.append({"admin": admin, **await admin_request(admin, "info", timeout=timeout)})
            except (ChaosError, RequestError) as exc:
                raise click.ClickException(_about(admin, str(exc))) from None
        return out

    bodies = asyncio.run(run())
    if as_json:
        click.echo(json.dumps(bodies, indent=1))
        return
    for body in bodies:
        faults = ", ".join(
            f"{name} ({value.get('remaining')} s left)"
            for name, value in body.get("faults", {}).items()
        )
        drops = ", ".join(f"{count} by {name}" for name, count in (body.get("fault_drops") or {}).items())
        click.echo(
            f"{body['admin']}: {body.get('role')} {body.get('ref')} pid {body.get('pid')}; "
            f"{faults or 'no faults'}; dropped frames: {drops or 'none'}"
        )


@chaos.command()
@_common()
def crash(admins: list[str], marker_id: str | None, as_json: bool, timeout: float) -> None:
    """Crash daemons, one after the other: each closes its event stream (the last one asked
    writes the marker first), answers, then kills itself with SIGKILL (no clean-up, like a
    power cut of one process)."""
    _run("crash", admins, {}, marker_id, as_json, timeout, lambda b: f"pid {b.get('pid')} killed")


@chaos.command("corrupt-node")
@_common()
@click.option("--topic", callback=_topic, default=None, metavar="TOPIC",
              help="Corrupt only this topic's state (default: every topic the node runs).")
@click.option("--seed", type=int, default=None, metavar="N",
              help="Seed of the random corruption (default: random).")
@click.option("--pool", multiple=True, callback=_refs, metavar="HOST:PORT",
              help="References the corrupted pointers are drawn from; repeat (default: every "
              "node the node references now).")
@click.option("--junk", type=click.IntRange(0, 1000), default=3, show_default=True, metavar="N",
              help="Random well-formed BuildSR messages sent to random nodes of the pool or "
              "the supervisor.")
def corrupt_node(
    admins: list[str], marker_id: str | None, as_json: bool, timeout: float,
    topic: str | None, seed: int | None, pool: list[str], junk: int,
) -> None:
    """Put nodes' BuildSR state into an arbitrary state: random labels or ⊥, random
    left/right/ring/shortcut pointers with wrong label beliefs, junk messages in flight
    (the simulator's corrupted start, pubsub.skipring.corruption)."""
    params: dict[str, Any] = {"junk": junk}
    if topic is not None:
        params["topic"] = topic
    if seed is not None:
        params["seed"] = seed
    if pool:
        params["pool"] = pool

    def describe(body: dict[str, Any]) -> str:
        labels = ", ".join(
            f"{t} label {s.get('label') or '⊥'}"
            for t, s in sorted(body.get("topics", {}).items())
        )
        return f"{labels}; {body.get('junk')} junk messages"

    _run("corrupt_node", admins, params, marker_id, as_json, timeout, describe)


@chaos.command("corrupt-supervisor")
@_common(single=True)
@click.option("--topic", callback=_topic, default=None, metavar="TOPIC",
              help="Corrupt only this topic's database (default: every topic with members).")
@click.option("--seed", type=int, default=None, metavar="N",
              help="Seed of the random corruption (default: random).")
def corrupt_supervisor(
    admins: list[str], marker_id: str | None, as_json: bool, timeout: float,
    topic: str | None, seed: int | None,
) -> None:
    """Corrupt the supervisor's database with the four faults of §3.1: tuples without a
    subscriber, one subscriber under several labels, missing labels, labels that are not
    l(0..n-1).  The corrupted rows are written to its durable database too."""
    params: dict[str, Any] = {}
    if topic is not None:
        params["topic"] = topic
    if seed is not None:
        params["seed"] = seed

    def describe(body: dict[str, Any]) -> str:
        return ", ".join(
            f"{t}: {s.get('n')} tuples, legitimate {s.get('legitimate_database')}"
            for t, s in sorted(body.get("topics", {}).items())
        )

    _run("corrupt_supervisor", admins, params, marker_id, as_json, timeout, describe)


DURATION = click.option(
    "--duration", type=click.FloatRange(0, MAX_DURATION, min_open=True), required=True,
    metavar="S", help="Seconds until the fault ends by itself (a `heal` marker is written then).",
)


@chaos.command()
@_common()
@DURATION
def partition(
    admins: list[str], marker_id: str | None, as_json: bool, timeout: float, duration: float
) -> None:
    """Cut the daemons given (the set A) off from all others for S seconds: each member of
    A drops every peer frame to or from a non-member, then heals by itself.  TCP
    connections stay up, so nobody is taken for crashed."""
    def describe(body: dict[str, Any]) -> str:
        n, duration = len(body.get("members", [])), body.get("duration")
        if n == 1:
            return f"cut off from every other daemon for {duration} s"
        return f"cut off, with the other {n - 1} given, from every other daemon for {duration} s"

    _run("partition", admins, {"duration": duration}, marker_id, as_json, timeout, describe, members=True)


@chaos.command()
@_common()
@click.option("--fraction", type=click.FloatRange(0, 1, min_open=True), required=True,
              metavar="P", help="Fraction of outgoing peer frames dropped, 0 < P <= 1.")
@DURATION
def drop(
    admins: list[str], marker_id: str | None, as_json: bool, timeout: float,
    fraction: float, duration: float,
) -> None:
    """Drop a fraction of the daemons' outgoing peer frames for S seconds (counted in their
    status under stats.fault_drops)."""
    _run(
        "drop", admins, {"fraction": fraction, "duration": duration}, marker_id, as_json, timeout,
        lambda b: f"dropping {b.get('fraction')} of outgoing frames for {b.get('duration')} s",
    )
