"""The SCOT broker mode of the `pubsub` command.

New commands::

    pubsub broker --topology FILE --id x,i [--listen HOST:PORT] [--protocol octopia|padres]
                  [--routing idr|spr|tid-s|tid-d] [--tau T] [--tw S] [--link-rate x,i=R ...]
                  [--heartbeat S] [--suspect-after N]
                  [--state-dir DIR] [--session-expiry S] [--session-keep N]
                  [--metrics-port PORT] [--events-dir DIR] [--admin-listen HOST:PORT]
    pubsub advertise   --broker HOST:PORT --filter FILTER [--id ID] [--client C]
    pubsub unadvertise --broker HOST:PORT (--id ID | --filter FILTER) [--client C]
    pubsub link-rate   --admin HOST:PORT x,i=R | x,i=off      (the broker's admin listener)

and ``--broker`` added to three existing commands, switching them to broker mode::

    pubsub subscribe --broker HOST:PORT --filter FILTER [--count N] [--json]
    pubsub publish   --broker HOST:PORT [--attrs ATTRS ...] [--client C] [--quiet] [--json]
    pubsub status    --broker HOST:PORT [--json]

The mode's registration (`broker.mode`) hands `COMMANDS` and `verb_forms` to the CLI core,
which assembles the `pubsub` group (`pubsub.cli.main`, `pubsub.cli.verbs`).  The three
shared commands keep their skip-ring behaviour unchanged without ``--broker``; their skip-ring-only
parameters (TOPIC, MESSAGE, --node, --since, --new-only, --detach, --file) are refused with
``--broker``, and the broker-only ones (--filter, --attrs, --client) without it, each with a
one-line usage error.  This module does not import `pubsub.cli.main`: the command is also
run as ``python -m pubsub.cli.main``, where that module is ``__main__``.

Client ids: ``--client`` (default ``cli``, env PUBSUB_CLIENT_ID) names the publisher whose
advertisements a publication must conform to; advertisements persist at the broker until
``unadvertise`` (see `broker.sessions`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from broker.client import BrokerClient, advertisement_id, to_attrs, to_filter
from broker.cores.language.text import attrs_to_text, parse_filter
from broker.cores.language.values import FilterError
from broker.cores.messages import Deliver, DeliveryGap
from pubsub.cli.common import (
    ADDRESS,
    ConfigError,
    admin_options,
    config_option,
    current_config,
    from_config,
    run_client,
    run_daemon,
    settings_for_runtime,
    telemetry_options,
    tls_options,
)
from pubsub.cli.publishing import AckPrinter, shorten, summarize
from pubsub.client.connection import ClientError
from pubsub.client.roles import role_problem
from pubsub.client.run import Stopping, publish_window, stdin_lines
from pubsub.kernel.contracts import VerbForm
from pubsub.kernel.message import Ref

if TYPE_CHECKING:  # the daemons' settings (pydantic): imported when the broker command runs
    from pubsub.runtime.settings import AdminSettings, TelemetrySettings

DEFAULT_CLIENT = "cli"


class _FilterText(click.ParamType):
    name = "FILTER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            parse_filter(value)
        except FilterError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)
        return str(value)


FILTER = _FilterText()

BROKER_OPTION = click.option(
    "--broker", "broker_ref", type=ADDRESS, default=None,
    help="Broker mode: the SCOT broker (`pubsub broker`) to talk to.",
)
CLIENT_OPTION = click.option(
    "--client", "client_id", default=DEFAULT_CLIENT, show_default=True, envvar="PUBSUB_CLIENT_ID",
    metavar="NAME",
    help="Broker mode: the client id advertisements are filed under and publications are "
    "checked against (env PUBSUB_CLIENT_ID).",
)


# --- the daemon ------------------------------------------------------------------------------------
def _broker_settings() -> tuple[type[Any], ...]:
    from broker.settings import BrokerSettings
    from pubsub.runtime.settings import AdminSettings, RuntimeSettings, TelemetrySettings

    return (RuntimeSettings, TelemetrySettings, AdminSettings, BrokerSettings)


@click.command("broker")
@click.option(
    "--topology", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
    help="SCOT topology file (JSON: factor, m, addresses; see README) (env PUBSUB_BROKER_TOPOLOGY).",
)
@click.option("--id", "broker_id", default=None, metavar="x,i",
              help="This broker's id B(x, i) in the topology (env PUBSUB_BROKER_ID).")
@click.option("--listen", type=ADDRESS, default=None,
              help="Address to listen on; defaults to, and must equal, the topology's address for --id.")
@click.option("--protocol", type=click.Choice(["octopia", "padres"]), default=None,
              help="OctopiA, or the PADRES-style baseline (default octopia; env PUBSUB_BROKER_PROTOCOL).")
@click.option("--routing", type=click.Choice(["idr", "spr", "idr+", "tid-s", "tid-d"]), default=None,
              help="Publication routing: for OctopiA dynamic scotIDR (idr, the default), static scotSPR "
              "(spr) or scotIDR that also routes around congested aLinks through a parallel cluster "
              "(idr+, beyond the paper); for PADRES static TID-S (tid-s, the default) or dynamic TID-D "
              "(tid-d); a routing of the other protocol is refused (env PUBSUB_BROKER_ROUTING).")
@click.option("--tau", type=float, default=None, metavar="T",
              help="Congestion threshold of Eq. 3 (default 10; env PUBSUB_BROKER_TAU).")
@click.option("--tw", type=float, default=None, metavar="S",
              help="Link Status Table window t_w in seconds (default 0.05; env PUBSUB_BROKER_TW).")
@click.option("--link-rate", "link_rates", multiple=True, metavar="x,i=R",
              help="Send at most R messages per second on the link to neighbour x,i (repeatable; "
              "env PUBSUB_BROKER_LINK_RATES as JSON {\"x,i\": R}).")
@click.option("--heartbeat", type=float, default=None, metavar="S",
              help="Seconds between heartbeats to the neighbours, which reveal dead ones "
              "(0: off; default 0.5; env PUBSUB_BROKER_HEARTBEAT).")
@click.option("--suspect-after", type=click.IntRange(1, 1000), default=None, metavar="N",
              help="Suspect a neighbour after N heartbeat periods without a word from it, or at once "
              "when its connects are refused (default 3; env PUBSUB_BROKER_SUSPECT_AFTER); what would "
              "cross a suspect goes around it through another cluster.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Keep this broker's clients' advertisements and sessions in DIR/clients.json, so that "
              "they survive a restart, even after kill -9 (default: not kept; env PUBSUB_BROKER_STATE_DIR). "
              "The routing tables are rebuilt from the neighbours.")
@click.option("--session-expiry", type=click.FloatRange(min=0, min_open=True, max=86400), default=None,
              metavar="S", help="Seconds a disconnected client session keeps its subscriptions and "
              "deliveries (default 60; env PUBSUB_BROKER_SESSION_EXPIRY).")
@click.option("--session-keep", type=click.IntRange(1, 1_000_000), default=None, metavar="N",
              help="Deliveries a session keeps for a client that resumes (default 10000; "
              "env PUBSUB_BROKER_SESSION_KEEP).")
@tls_options
@config_option("a broker", _broker_settings, "listen")
@telemetry_options
@admin_options
def broker_command(
    topology: Path | None,
    broker_id: str | None,
    listen: str | None,
    protocol: str | None,
    routing: str | None,
    tau: float | None,
    tw: float | None,
    link_rates: tuple[str, ...],
    heartbeat: float | None,
    suspect_after: int | None,
    state_dir: Path | None,
    session_expiry: float | None,
    session_keep: int | None,
    telemetry: TelemetrySettings,
    admin: AdminSettings,
) -> None:
    """Run SCOT broker x,i (OctopiA, §6-§9) until SIGTERM or SIGINT.

    Every broker of the SCOT runs with the same topology file, which gives every broker's
    HOST:PORT in its "addresses" map.  Clients use `pubsub advertise`, `pubsub publish
    --broker`, `pubsub subscribe --broker` and `pubsub status --broker`.
    """
    from broker import clientstate
    from broker.app import run_broker
    from broker.cores.topology import TopologyError
    from broker.settings import FLAGS, BrokerSettings, check_against_topology, parse_link_rate
    from broker.topologyfile import load as load_topology
    from pubsub.runtime.settings import SettingsError, load

    rates: dict[str, float] = {}
    for text in link_rates:
        try:
            link, rate = parse_link_rate(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--link-rate") from None
        rates[link] = rate
    listen = from_config("listen", listen, "--listen", lambda v: ADDRESS.convert(str(v), None, None))
    try:
        settings = load(
            BrokerSettings,
            FLAGS,
            config=current_config(),
            broker_topology=topology,
            broker_id=broker_id,
            broker_protocol=protocol,
            broker_routing=routing,
            broker_tau=tau,
            broker_tw=tw,
            broker_link_rates=rates or None,
            broker_heartbeat=heartbeat,
            broker_suspect_after=suspect_after,
            broker_state_dir=state_dir,
            broker_session_expiry=session_expiry,
            broker_session_keep=session_keep,
        )
        topo = load_topology(settings.broker_topology)
        if settings.broker_state_dir is not None:
            clientstate.load(settings.broker_state_dir, settings.broker_id)  # refused here, in one line
        address = check_against_topology(topo, settings, listen)
        runtime_settings = settings_for_runtime(None, address, "broker")
    except (SettingsError, TopologyError, clientstate.StateError) as exc:
        raise ConfigError(str(exc)) from None
    run_daemon(
        f"broker {settings.broker_id}",
        address,
        lambda: run_broker(topo, settings, Ref(address), runtime_settings, telemetry, admin),
    )


# --- advertise / unadvertise / link-rate ------------------------------------------------------------
@click.command("advertise")
@click.option("--broker", "broker_ref", type=ADDRESS, required=True, help="The publisher's host broker.")
@click.option("--filter", "filter_text", type=FILTER, required=True,
              help="The advertisement: what the client will publish, e.g. 'symbol = \"IBM\" and price > 0'.")
@click.option("--id", "adv_id", default=None, metavar="ID",
              help="The advertisement's id (default: a- and a hash of the filter).")
@CLIENT_OPTION
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=5.0, show_default=True,
              metavar="S", help="Seconds to wait for the broker's answer.")
def advertise_command(broker_ref: str, filter_text: str, adv_id: str | None, client_id: str, timeout: float) -> None:
    """Advertise FILTER at a broker for client --client; it lasts until `unadvertise`.

    Publications of that client id must conform to one of its advertisements: match it and
    carry only attributes it names.  The broker needs a moment (one round trip in its region)
    to learn which clusters want the advertised publications.
    """

    async def run() -> None:
        async with BrokerClient(broker_ref, client_id=client_id, timeout=timeout) as client:
            body = await client.advertise(filter_text, adv_id)
        click.echo(f"{broker_ref}: advertised {body.get('id')} for client {client_id} at broker "
                   f"{body.get('broker')} ({body.get('uid')}): {to_filter(filter_text).to_text()}")

    run_client(run)


@click.command("unadvertise")
@click.option("--broker", "broker_ref", type=ADDRESS, required=True, help="The publisher's host broker.")
@click.option("--id", "adv_id", default=None, metavar="ID", help="The advertisement's id.")
@click.option("--filter", "filter_text", type=FILTER, default=None,
              help="The advertised filter (names the advertisement by its default id).")
@CLIENT_OPTION
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=5.0, show_default=True,
              metavar="S", help="Seconds to wait for the broker's answer.")
def unadvertise_command(
    broker_ref: str, adv_id: str | None, filter_text: str | None, client_id: str, timeout: float
) -> None:
    """Withdraw an advertisement of client --client (by --id or by --filter)."""
    if (adv_id is None) == (filter_text is None):
        raise click.UsageError("give exactly one of --id and --filter")
    ident = adv_id or advertisement_id(to_filter(filter_text or ""))

    async def run() -> None:
        async with BrokerClient(broker_ref, client_id=client_id, timeout=timeout) as client:
            await client.unadvertise(adv_id=ident)
        click.echo(f"{broker_ref}: unadvertised {ident} of client {client_id}")

    run_client(run)


@click.command("link-rate")
@click.option("--admin", "admin_ref", type=ADDRESS, required=True,
              help="The broker's admin address (its --admin-listen).")
@click.argument("setting", metavar="x,i=R|x,i=off")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=5.0, show_default=True,
              metavar="S", help="Seconds to wait for the broker's answer.")
def link_rate_command(admin_ref: str, setting: str, timeout: float) -> None:
    """Limit (or with "off" unlimit) the broker's output link to neighbour x,i to R messages
    per second, e.g. to congest an iLink on purpose and watch scotIDR route around it.

    An operator's action: it goes to the broker's admin listener (`pubsub broker
    --admin-listen HOST:PORT`), never to its client port."""
    from broker.settings import parse_link_rate

    link, _, value = setting.rpartition("=")
    rate: float | None
    if value.lower() == "off" and link:
        rate = None
    else:
        try:
            link, rate = parse_link_rate(setting)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="x,i=R") from None

    from pubsub.runtime.admin import admin_request
    from pubsub.runtime.adminparams import ChaosError
    from pubsub.runtime.client import RequestError

    try:
        body = asyncio.run(admin_request(admin_ref, "link_rate", {"link": link, "rate": rate}, timeout))
    except (ChaosError, RequestError) as exc:
        raise click.ClickException(f"{admin_ref}: {exc}") from None
    shown = "no limit" if body.get("rate") is None else f"{body['rate']:g} messages/s"
    click.echo(f"{admin_ref}: link to {link}: {shown}")


# --- broker mode of subscribe / publish / status ----------------------------------------------------
def format_deliver(d: Deliver, as_json: bool, broker_ref: str) -> str:
    """One delivery: ``PUBLISHER PID ATTRS`` or a JSON object."""
    if as_json:
        return json.dumps(
            {"pid": d.pid, "publisher": d.publisher, "attrs": dict(d.attrs), "sub_ids": list(d.sub_ids),
             "broker": broker_ref},
            ensure_ascii=False,
        )
    return f"{d.publisher} {d.pid} {attrs_to_text(d.attrs)}"


def broker_subscribe(
    broker_ref: str, filter_text: str, as_json: bool, count: int | None, timeout: float, retry_for: float
) -> None:
    from broker.resilient import ResumingSubscription

    def told(line: str) -> None:
        click.echo(f"{broker_ref}: {line}", err=True)

    async def run() -> None:
        sub = ResumingSubscription([broker_ref], filter_text, timeout=timeout, retry_for=retry_for, on_change=told)
        seen = 0
        try:
            async for event in sub:
                if isinstance(event, DeliveryGap):
                    lost = "an unknown number of" if event.missed < 0 else str(event.missed)
                    told(f"gap: {lost} deliveries lost ({event.reason})")
                    continue
                click.echo(format_deliver(event, as_json, broker_ref))
                seen += 1
                if count is not None and seen >= count:
                    return
        finally:
            await sub.close()

    run_client(run)


async def _stdin_attrs() -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """(line number, attributes) of every non-blank stdin line (`pubsub.client.run.stdin_lines`:
    a stop is never held by a blocked read); a bad line raises ClientError naming it."""
    async for number, raw in stdin_lines():
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            yield number, to_attrs(text)
        except ClientError as exc:
            raise ClientError(exc.code, f"line {number}: {exc}") from None


def broker_publish(
    broker_ref: str, attrs: tuple[str, ...], client_id: str, quiet: bool, as_json: bool, timeout: float
) -> None:
    """Each --attrs, or each stdin line, as one publication.  Reading stdin, each routed
    publication is printed as soon as the broker answers, and SIGINT/SIGTERM stop reading,
    give the publications in flight 1 s and print what is unknown (`pubsub.cli.publishing`)."""
    for text in attrs:  # bad --attrs are usage errors, found before anything is sent
        try:
            to_attrs(text)
        except ClientError as exc:
            raise click.BadParameter(str(exc), param_hint="--attrs") from None

    printer = AckPrinter(quiet)

    def show(number: int, pid: str) -> None:
        printer(json.dumps({"pid": pid, "client": client_id, "broker": broker_ref}) if as_json else f"published {pid}")

    async def given(stopping: Stopping) -> None:
        async def numbered() -> AsyncIterator[tuple[int, dict[str, Any]]]:
            for number, text in enumerate(attrs, start=1):
                yield number, to_attrs(text)

        await run(numbered(), stopping)

    async def from_stdin(stopping: Stopping) -> None:
        await run(_stdin_attrs(), stopping)

    async def run(source: AsyncIterator[tuple[int, dict[str, Any]]], stopping: Stopping) -> None:
        async with BrokerClient(broker_ref, client_id=client_id, timeout=timeout) as client:
            outcome = await publish_window(source, client.publish, show, ClientError, stopping)
        summarize(outcome, "published", lambda item: shorten(attrs_to_text(item)))
        if quiet:
            click.echo(f"published {outcome.acknowledged} through {broker_ref} as client {client_id}")

    run_client(given if attrs else from_stdin, graceful=True)


#: Core counters of routing around failures and of TID-D, shown apart from the rejected input.
ROUTING_COUNTERS = ("detour", "rerouted_", "suppressed_", "undeliverable_", "prt_syncs", "clt_syncs", "held_for_sync_",
                    "duplicate_publish", "tidd_")


def format_broker_status(body: dict[str, Any]) -> str:
    """A broker's status as text: identity, tables, the link table, IDR and counters."""
    settings = body.get("settings") or {}
    tables = body.get("tables") or {}
    clients = body.get("clients") or {}
    kind = "inner" if body.get("inner") else "edge"
    lines = [
        f"broker {body.get('id')} at {body.get('ref')}  {settings.get('protocol')}/"
        f"{settings.get('routing')}  cluster C_{body.get('cluster')}  region R_{body.get('region')}  "
        f"{kind} broker  (tau {settings.get('tau')}, t_w {settings.get('tw')} s)",
        "tables: " + "  ".join(f"{name.upper()} {size}" for name, size in tables.items() if size is not None),
        f"clients: {clients.get('connections', 0)} connections, {clients.get('subscriptions', 0)} "
        f"subscriptions, {clients.get('advertisements', 0)} advertisements",
    ]
    links = body.get("links") or {}
    if links:
        rows = [
            ["LINK", "KIND", "ADDRESS", "STATE", "QUEUE", "IN/tw", "OUT/tw", "CONGESTED", "RATE", "SENT", "DROPPED"]
        ]
        for bid, link in links.items():
            window = link.get("window") or {}
            rate = link.get("rate_limit")
            rows.append([
                str(bid), str(link.get("kind")), str(link.get("address")), str(link.get("state")),
                str(link.get("queue_len")), str(window.get("q_in")), str(window.get("q_out")),
                "yes" if link.get("congested") else "no", "-" if rate is None else f"{rate:g}/s",
                str(link.get("sent")), str(link.get("dropped")),
            ])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines.extend("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    idr = body.get("idr") or {}
    if settings.get("routing") == "idr":
        lines.append(
            f"IDR: case I {idr.get('case_1', 0)}, case II {idr.get('case_2', 0)}, case III {idr.get('case_3', 0)}"
        )
    unreachable = body.get("unreachable") or []
    lines.append("unreachable neighbours: " + (", ".join(unreachable) if unreachable else "none"))
    refused = body.get("refused") or {}
    lines.append("refused: " + (", ".join(f"{k}={v}" for k, v in sorted(refused.items())) or "none"))
    counters = {k: v for k, v in (body.get("counters") or {}).items() if not k.startswith(("refused_", "idr_case_"))}
    routing = {k: counters.pop(k) for k in sorted(counters) if k.startswith(ROUTING_COUNTERS)}
    lines.append("failures and dynamic routing: " + (", ".join(f"{k}={v}" for k, v in routing.items()) or "none"))
    counters.update({k: v for k, v in (body.get("daemon_counters") or {}).items()
                     if k.startswith(("rejected", "dropped", "deliveries_dropped", "deliveries_to_gone"))})
    lines.append("rejected/dropped input: " + (", ".join(f"{k}={v}" for k, v in sorted(counters.items())) or "none"))
    messages = body.get("messages") or {}
    for direction in ("in", "out"):
        counts = messages.get(direction) or {}
        lines.append(f"messages {direction}: " + (", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"))
    dropped = body.get("dropped") or {}
    stats = body.get("stats") or {}
    lines.append(
        f"dropped: queue full {dropped.get('queue_full', 0)}, sends {dropped.get('sends', 0)}, slow clients "
        f"{dropped.get('slow_client', 0)}; frame errors: "
        + (", ".join(f"{k}={v}" for k, v in sorted((stats.get("errors") or {}).items())) or "none")
    )
    return "\n".join(lines)


def broker_status(broker_ref: str, as_json: bool, timeout: float) -> None:
    async def run() -> None:
        async with BrokerClient(broker_ref, timeout=timeout) as client:
            body = await client.status()
        problem = role_problem(broker_ref, body, "broker")
        if problem is not None:
            raise ClientError("wrong_role", problem)
        click.echo(json.dumps(body, indent=2, sort_keys=True) if as_json else format_broker_status(body))

    run_client(run)


# --- broker mode's forms of the shared verbs (`pubsub.cli.verbs`) ---------------------------------
def _subscribe_broker(ctx: click.Context, kwargs: dict[str, Any], extra: dict[str, Any]) -> None:
    if extra["filter_text"] is None:
        raise click.UsageError("broker mode needs --filter FILTER (e.g. 'symbol = \"IBM\" and price > 100')")
    broker_subscribe(extra["broker_ref"], extra["filter_text"], kwargs["as_json"], kwargs["count"], kwargs["timeout"],
                     extra["retry_for"])


def _publish_broker(ctx: click.Context, kwargs: dict[str, Any], extra: dict[str, Any]) -> None:
    broker_publish(
        extra["broker_ref"], extra["attrs"], extra["client_id"], kwargs["quiet"], kwargs["as_json"], kwargs["timeout"]
    )


def _status_broker(ctx: click.Context, kwargs: dict[str, Any], extra: dict[str, Any]) -> None:
    broker_status(extra["broker_ref"], kwargs["as_json"], kwargs["timeout"])


#: The broker mode's own commands.
COMMANDS = (broker_command, advertise_command, unadvertise_command, link_rate_command)


def verb_forms() -> list[VerbForm]:
    """Broker mode's forms of subscribe, publish and status, selected by --broker."""
    return [
        VerbForm(
            verb="subscribe",
            mode="broker",
            selector="broker_ref",
            options=(
                BROKER_OPTION,
                click.option("--filter", "filter_text", type=FILTER, default=None,
                             help="Broker mode: the subscription, e.g. 'symbol = \"IBM\" and price > 100'."),
                click.option("--retry-for", "retry_for", type=click.FloatRange(min=0), default=30.0,
                             show_default=True, metavar="S",
                             help="Broker mode: when the connection is lost, reconnect (backoff 0.1 to 2 s) "
                             "for up to S seconds and resume the session (0: exit 1 at once)."),
            ),
            own={"filter_text": "--filter", "retry_for": "--retry-for"},
            foreign={"topic": "TOPIC", "node_ref": "--node", "since": "--since", "new_only": "--new-only",
                     "detach": "--detach"},
            required={"topic": "argument 'TOPIC'", "node_ref": "option '--node'"},
            run=_subscribe_broker,
            help="Broker mode: with --broker HOST:PORT --filter FILTER (and no TOPIC), subscribe at "
            "that SCOT broker and print each matching publication once as it arrives (PUBLISHER PID "
            "ATTRS, or --json objects) until Ctrl-C or --count.  The subscription lives in a session: "
            "a lost connection is resumed (--retry-for) with what was delivered meanwhile, and a gap "
            "notice on stderr counts what the broker could not keep; it ends with the command.",
        ),
        VerbForm(
            verb="publish",
            mode="broker",
            selector="broker_ref",
            options=(
                BROKER_OPTION,
                click.option("--attrs", "attrs", multiple=True, metavar="ATTRS",
                             help="Broker mode: one publication, 'symbol=\"IBM\",price=101.5' or a JSON "
                             "object (repeatable; without it one per stdin line)."),
                CLIENT_OPTION,
            ),
            own={"attrs": "--attrs", "client_id": "--client"},
            foreign={"topic": "TOPIC", "message": "MESSAGE", "node_ref": "--node", "file": "--file"},
            required={"topic": "argument 'TOPIC'", "node_ref": "option '--node'"},
            run=_publish_broker,
            help="Broker mode: with --broker HOST:PORT (and no TOPIC), publish each --attrs (or each "
            "stdin line) as client --client, whose advertisement at that broker it must conform to "
            "(`pubsub advertise`); one line per publication the broker routed.  Exits 1 at the first refusal.",
        ),
        VerbForm(
            verb="status",
            mode="broker",
            selector="broker_ref",
            options=(BROKER_OPTION,),
            own={},
            foreign={"supervisor_ref": "--supervisor", "node_ref": "--node"},
            required={},
            run=_status_broker,
            help="Broker mode: with --broker HOST:PORT, show a SCOT broker: CLT/SRT/PRT sizes, "
            "each link's queue, congestion (Eq. 3), rate limit and state, IDR cases, refused and "
            "dropped input, messages by type.",
            exclusive={"supervisor_ref": "--supervisor", "node_ref": "--node", "broker_ref": "--broker"},
        ),
    ]
