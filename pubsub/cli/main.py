"""The `pubsub` command: run the daemons, and talk to them as a client.

    pubsub supervisor --listen HOST:PORT --data DIR [--interval S] [--config-budget N]
    pubsub node --listen HOST:PORT --supervisor HOST:PORT [--data DIR] [--interval S]
                [--no-flooding]
    (both daemons: [--metrics-port PORT] [--metrics-host HOST] [--events-dir DIR]
                   [--admin-listen HOST:PORT [--admin-allow-remote]])
    pubsub subscribe TOPIC --node HOST:PORT [--since N | --new-only] [--json] [--detach]
    pubsub unsubscribe TOPIC --node HOST:PORT
    pubsub publish TOPIC [MESSAGE | --file F] --node HOST:PORT [--quiet] [--json]
    pubsub history TOPIC --node HOST:PORT [--since N] [--json]
    pubsub status (--supervisor HOST:PORT | --node HOST:PORT) [--json]
    pubsub chaos (info | crash | corrupt-node | corrupt-supervisor | partition | drop)
                 --admin HOST:PORT ...     (fault injection, `pubsub.cli.chaos`)
    pubsub analyze RUN_DIR [--stream] [--out DIR] [--until-idle S] [--trigger S]
                           (PySpark convergence analysis, `pubsub.ops.analysis.cli`)

The client commands talk to the daemons through the client library (`pubsub.client.library`).

Daemon settings come from the flags, then ``PUBSUB_*`` environment variables
(`pubsub.runtime.settings`), then defaults.  Logs go to stderr.  Every failure an operator can cause
(a bad flag, an unreachable daemon, an unusable data directory, a port in use) ends with a
one-line message and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import click

from pubsub.client.library import Ack, Client, ClientError, ConnectionLost, PublishError
from pubsub.client.run import publish_pipelined, until_stopped
from pubsub.skipring.labels import Label, LabelError
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Topic
from pubsub.skipring.messages import Delivery, JoinTopic, LeaveTopic
from pubsub.runtime.net import RequestError, request
from pubsub.node.settings import NodeSettings, check_node_limits
from pubsub.runtime.settings import (
    AdminSettings,
    RuntimeSettings,
    SettingsError,
    TelemetrySettings,
    load,
)
from supervisor.settings import SupervisorSettings
from pubsub.kernel.wire import WireError, validate_ref, validate_topic

FLAGS = {
    "timeout_interval": "--interval",
    "config_budget": "--config-budget",
    "data_dir": "--data",
    "flooding": "--no-flooding",
    "metrics_port": "--metrics-port",
    "metrics_host": "--metrics-host",
    "events_dir": "--events-dir",
    "admin_listen": "--admin-listen",
    "admin_allow_remote": "--admin-allow-remote",
}


class Address(click.ParamType):
    """A HOST:PORT reference."""

    name = "HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Ref:
        try:
            return validate_ref(value)
        except WireError:
            self.fail(
                f"{value!r} is not HOST:PORT (host of letters, digits, '.', '-', '_'; "
                "port 1-65535)",
                param,
                ctx,
            )


class TopicName(click.ParamType):
    """A topic name: 1-256 characters, no control characters."""

    name = "TOPIC"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return validate_topic(value)
        except WireError as exc:
            self.fail(exc.detail, param, ctx)


ADDRESS = Address()
TOPIC = TopicName()


class ConfigError(click.ClickException):
    """Bad configuration (exit code 2, like a usage error)."""

    exit_code = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    envvar="PUBSUB_LOG_LEVEL",
    help="Least severe log messages written to stderr (env PUBSUB_LOG_LEVEL).",
)
def main(log_level: str) -> None:
    """Self-stabilizing publish/subscribe over skip rings (BuildSR).

    Run a supervisor and subscriber nodes on TCP, then subscribe nodes to topics and
    inspect their state.
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _interval_option(f: Any) -> Any:
    return click.option(
        "--interval",
        type=float,
        default=None,
        metavar="S",
        help="Seconds between Timeout actions (default 0.3; env PUBSUB_TIMEOUT_INTERVAL).",
    )(f)


def _runtime_settings(interval: float | None) -> RuntimeSettings:
    try:
        return load(RuntimeSettings, FLAGS, timeout_interval=interval)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None


def _telemetry_options(f: Any) -> Any:
    """--metrics-port, --metrics-host, --events-dir; the command gets `telemetry`
    (`TelemetrySettings`, also read from PUBSUB_METRICS_* / PUBSUB_EVENTS_*)."""

    @functools.wraps(f)
    def wrapper(
        *args: Any,
        metrics_port: int | None,
        metrics_host: str | None,
        events_dir: Path | None,
        **kwargs: Any,
    ) -> Any:
        try:
            telemetry = load(
                TelemetrySettings,
                FLAGS,
                metrics_port=metrics_port,
                metrics_host=metrics_host,
                events_dir=events_dir,
            )
        except SettingsError as exc:
            raise ConfigError(str(exc)) from None
        return f(*args, telemetry=telemetry, **kwargs)

    options = [
        click.option(
            "--metrics-port",
            type=click.IntRange(0, 65535),
            default=None,
            metavar="PORT",
            help="Serve Prometheus metrics on http://HOST:PORT/metrics (0: off, the "
            "default; env PUBSUB_METRICS_PORT).",
        ),
        click.option(
            "--metrics-host",
            default=None,
            metavar="HOST",
            help="Address the metrics endpoint binds (default 127.0.0.1; env "
            "PUBSUB_METRICS_HOST).",
        ),
        click.option(
            "--events-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            metavar="DIR",
            help="Write the event stream (docs/events.md) into DIR (default: off; env "
            "PUBSUB_EVENTS_DIR).",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def _admin_options(f: Any) -> Any:
    """--admin-listen, --admin-allow-remote; the command gets `admin` (`AdminSettings`,
    also read from PUBSUB_ADMIN_LISTEN / PUBSUB_ADMIN_ALLOW_REMOTE): the listener on which
    `pubsub chaos` may inject faults (`pubsub.runtime.admin`)."""

    @functools.wraps(f)
    def wrapper(
        *args: Any, admin_listen: str | None, admin_allow_remote: bool, **kwargs: Any
    ) -> Any:
        try:
            admin = load(
                AdminSettings,
                FLAGS,
                admin_listen=admin_listen,
                admin_allow_remote=admin_allow_remote or None,
            )
        except SettingsError as exc:
            raise ConfigError(str(exc)) from None
        return f(*args, admin=admin, **kwargs)

    wrapper = click.option(
        "--admin-allow-remote",
        is_flag=True,
        default=False,
        help="Allow --admin-listen on an address that is not loopback (env "
        "PUBSUB_ADMIN_ALLOW_REMOTE=1).",
    )(wrapper)
    return click.option(
        "--admin-listen",
        type=ADDRESS,
        default=None,
        help="Also listen on HOST:PORT for `pubsub chaos` fault injections; whoever can "
        "reach it can crash or corrupt this daemon.  Loopback only unless "
        "--admin-allow-remote (default: off; env PUBSUB_ADMIN_LISTEN).",
    )(wrapper)


def _run_daemon(what: str, listen: str, run: Any) -> None:
    """Run a daemon; turn start-up failures into one-line errors."""
    from pubsub.runtime.admin import AdminError
    from pubsub.telemetry.events import EventsError
    from pubsub.telemetry.metrics import MetricsError
    from pubsub.node.app import TopicFileError
    from pubsub.node.store import StoreError as PublicationStoreError
    from supervisor.store import StoreError

    try:
        run()
    except (
        StoreError, TopicFileError, PublicationStoreError, MetricsError, EventsError, AdminError
    ) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise click.ClickException(f"{what} cannot listen on {listen}: {reason}") from None
    except KeyboardInterrupt:
        pass


@main.command()
@click.option(
    "--listen",
    required=True,
    type=ADDRESS,
    help="Address to listen on; it is also the supervisor's reference, which nodes are given.",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory of the durable membership database, created if missing "
    "(required; env PUBSUB_DATA_DIR).",
)
@_interval_option
@click.option(
    "--config-budget",
    type=int,
    default=None,
    metavar="N",
    help="Configurations (SetData) sent per topic per Timeout (default 1; env "
    "PUBSUB_CONFIG_BUDGET).",
)
@_telemetry_options
@_admin_options
def supervisor(
    listen: Ref,
    data_dir: Path | None,
    interval: float | None,
    config_budget: int | None,
    telemetry: TelemetrySettings,
    admin: AdminSettings,
) -> None:
    """Run the supervisor daemon until SIGTERM or SIGINT."""
    from supervisor.app import run_supervisor

    runtime_settings = _runtime_settings(interval)
    try:
        settings = load(SupervisorSettings, FLAGS, data_dir=data_dir, config_budget=config_budget)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    _run_daemon(
        "supervisor",
        listen,
        lambda: run_supervisor(listen, runtime_settings, settings, telemetry, admin),
    )


@main.command()
@click.option(
    "--listen",
    required=True,
    type=ADDRESS,
    help="Address to listen on; it is also this node's reference.",
)
@click.option(
    "--supervisor", "supervisor_ref", required=True, type=ADDRESS, help="The supervisor's address."
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory of the node's subscribed topics (rejoined at start) and durable "
    "publication store.  Without it the node keeps everything in memory and loses it when "
    "it stops (optional; env PUBSUB_DATA_DIR).",
)
@_interval_option
@click.option(
    "--no-flooding",
    "no_flooding",
    is_flag=True,
    default=False,
    help="Do not flood new publications; anti-entropy alone spreads them (env "
    "PUBSUB_FLOODING=0).",
)
@_telemetry_options
@_admin_options
def node(
    listen: Ref,
    supervisor_ref: Ref,
    telemetry: TelemetrySettings,
    admin: AdminSettings,
    data_dir: Path | None,
    interval: float | None,
    no_flooding: bool,
) -> None:
    """Run a subscriber node daemon until SIGTERM or SIGINT."""
    from pubsub.node.app import run_node

    runtime_settings = _runtime_settings(interval)
    try:
        settings = load(
            NodeSettings, FLAGS, data_dir=data_dir, flooding=False if no_flooding else None
        )
        check_node_limits(settings, runtime_settings)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    _run_daemon(
        "node",
        listen,
        lambda: run_node(listen, supervisor_ref, runtime_settings, settings, telemetry, admin),
    )


# --- client commands -------------------------------------------------------------------------
TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for the daemon's reply.",
)


def _ask(addr: Ref, msg: Message, timeout: float) -> Reply:
    try:
        reply = asyncio.run(request(addr, msg, timeout))
    except RequestError as exc:
        raise click.ClickException(str(exc)) from None
    if isinstance(reply, ErrorReply):
        raise click.ClickException(f"{addr} refused the request: {reply.code}: {reply.detail}")
    if not isinstance(reply, Reply):
        raise click.ClickException(f"{addr} answered with an unexpected {reply.kind!r} message")
    return reply



F = TypeVar("F", bound=Callable[..., Any])


def since_option(help_text: str) -> Callable[[F], F]:
    """--since N: the local publication number a client has already seen."""
    return click.option(
        "--since",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        metavar="N",
        help=help_text,
    )

@main.command()
@click.argument("topic", type=TOPIC)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@since_option("Deliver the publications with local number > N (resume after N).")
@click.option("--new-only", is_flag=True, help="Skip the history: only what arrives from now on.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per delivery.")
@click.option(
    "--detach", is_flag=True, help="Only make the node join TOPIC and return at once."
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Exit after N deliveries.",
)
@TIMEOUT_OPTION
def subscribe(
    topic: str,
    node_ref: Ref,
    since: int,
    new_only: bool,
    as_json: bool,
    detach: bool,
    count: int | None,
    timeout: float,
) -> None:
    """Make the node at --node subscribe to TOPIC and print its publications as they come.

    Every publication the node holds or stores from now on is printed once, in the
    node's local order (numbered 1, 2, 3, ...): by default from the beginning of the
    history, with --since N after local number N, with --new-only from now on.  Runs
    until interrupted (Ctrl-C exits quietly with status 0) or --count deliveries.
    With --detach the node only joins the topic.
    """
    if detach:
        reply = _ask(node_ref, JoinTopic(topic=Topic(topic)), timeout)
        _print_change("subscribing", topic, node_ref, reply.body)
        return
    if new_only and since:
        raise click.UsageError("give at most one of --since and --new-only")

    async def stream() -> None:
        client = Client(node_ref, timeout=timeout)
        async with client.subscribe(topic, since=since, new_only=new_only) as sub:
            click.echo(
                f"{node_ref}: subscribed to {topic}; delivering from local #{sub.since + 1}"
                f" (the node holds {sub.latest})",
                err=True,
            )
            seen = 0
            try:
                async for delivery in sub:
                    click.echo(format_delivery(delivery, as_json))
                    seen += 1
                    if count is not None and seen >= count:
                        return
            except ConnectionLost as exc:
                raise ClientError(exc.code, f"{exc}; resume with --since {sub.last_seq}") from None

    _run_client(stream)


@main.command()
@click.argument("topic", type=TOPIC)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@TIMEOUT_OPTION
def unsubscribe(topic: str, node_ref: Ref, timeout: float) -> None:
    """Ask the node at --node to unsubscribe from TOPIC (it leaves once the supervisor agrees)."""
    reply = _ask(node_ref, LeaveTopic(topic=Topic(topic)), timeout)
    _print_change("unsubscribing", topic, node_ref, reply.body)


def _run_client(make: Any) -> None:
    """Run a client coroutine: ClientError -> one-line error; Ctrl-C -> quiet exit 0."""
    try:
        asyncio.run(until_stopped(make))
    except KeyboardInterrupt:
        return
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the final flush does not fail again


def _payload_fields(payload: bytes) -> dict[str, Any]:
    try:
        return {"payload": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"payload": None, "payload_base64": base64.b64encode(payload).decode("ascii")}


def format_delivery(delivery: Delivery, as_json: bool = False) -> str:
    """One delivery as a line: ``#LOCAL PUBLISHER#SEQ PAYLOAD`` or a JSON object.

    In text, payloads that are not UTF-8 are shown as ``base64:...`` and line breaks as
    ``\\n``; JSON carries the text as "payload", or "payload_base64" when it is not UTF-8.
    """
    if as_json:
        return json.dumps(
            {
                "topic": delivery.topic,
                "local_seq": delivery.local_seq,
                "publisher": delivery.publisher,
                "seq": delivery.seq,
                "key": delivery.key.hex(),
                "stored_at_ms": delivery.stored_at_ms,
                "published_ms": delivery.published_ms or None,
                **_payload_fields(delivery.payload),
            },
            ensure_ascii=False,
        )
    fields = _payload_fields(delivery.payload)
    if fields["payload"] is None:
        text = "base64:" + fields["payload_base64"]
    else:
        text = fields["payload"].replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"#{delivery.local_seq} {delivery.publisher}#{delivery.seq} {text}"


def format_ack(ack: Ack, as_json: bool = False) -> str:
    """One acknowledgement as a line of text or a JSON object."""
    if as_json:
        return json.dumps(ack.as_dict())
    where = f"local #{ack.local_seq}" if ack.local_seq is not None else "handed over"
    return (
        f"ack {ack.topic} {ack.publisher}#{ack.seq} key {ack.key.hex()[:16]} "
        f"stored by {ack.stored_by} ({where})"
    )


def _stdin_lines(stream: BinaryIO) -> Iterator[bytes]:
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


@main.command()
@click.argument("topic", type=TOPIC)
@click.argument("message", required=False)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node to publish through.")
@click.option(
    "--file",
    "file",
    type=click.File("rb"),
    default=None,
    help="Publish the whole content of this file as one publication ('-' for stdin).",
)
@click.option("--quiet", "-q", is_flag=True, help="Print one summary line instead of every ack.")
@click.option("--json", "as_json", is_flag=True, help="Print each acknowledgement as JSON.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=15.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each acknowledgement.",
)
def publish(
    topic: str,
    message: str | None,
    node_ref: Ref,
    file: BinaryIO | None,
    quiet: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """Publish MESSAGE on TOPIC through the node at --node.

    Without MESSAGE and --file, every line read from stdin is one publication.  The node
    need not subscribe to TOPIC (it then hands the publication to a member).  Each
    publication is acknowledged once a member holds it durably; one line is printed per
    acknowledgement (or one summary with --quiet).  Exits 1 at the first failure.
    """
    if message is not None and file is not None:
        raise click.UsageError("give MESSAGE or --file, not both")
    if message is not None:
        payloads: Iterator[bytes] = iter([message.encode("utf-8")])
    elif file is not None:
        payloads = iter([file.read()])
    else:
        payloads = _stdin_lines(sys.stdin.buffer)

    async def run() -> None:
        def show(ack: Ack) -> None:
            if not quiet:
                click.echo(format_ack(ack, as_json))

        async with Client(node_ref, publish_timeout=timeout) as client:
            done, failure = await publish_pipelined(
                payloads, lambda payload: client.publish(topic, payload), show, PublishError
            )
        if failure is not None:
            before = f" ({done} acknowledged before the failure)" if done else ""
            raise ClientError(failure.code, f"{failure}{before}")
        if quiet:
            click.echo(f"published {done} to {topic} through {node_ref}")

    _run_client(run)


@main.command()
@click.argument("topic", type=TOPIC)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@since_option("Only publications with local number > N.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per publication.")
@TIMEOUT_OPTION
def history(topic: str, node_ref: Ref, since: int, as_json: bool, timeout: float) -> None:
    """Print what the node at --node holds for TOPIC, in its local order, numbered."""

    async def run() -> None:
        client = Client(node_ref, timeout=timeout)
        found = await client.history(topic, since=since)
        for delivery in found:
            click.echo(format_delivery(delivery, as_json))
        if not found and not as_json:
            click.echo(f"{node_ref} holds no publications of {topic} after #{since}", err=True)

    _run_client(run)


def _print_change(action: str, topic: str, node_ref: str, body: dict[str, Any]) -> None:
    click.echo(f"{node_ref}: {action} {topic}")
    if body.get("warning"):
        click.echo(f"warning: {body['warning']}", err=True)


@main.command()
@click.option(
    "--supervisor",
    "supervisor_ref",
    type=ADDRESS,
    default=None,
    help="Ask the supervisor at this address.",
)
@click.option(
    "--node", "node_ref", type=ADDRESS, default=None, help="Ask the node at this address."
)
@click.option("--json", "as_json", is_flag=True, help="Print the status reply as JSON.")
@TIMEOUT_OPTION
def status(supervisor_ref: Ref | None, node_ref: Ref | None, as_json: bool, timeout: float) -> None:
    """Show a daemon's state: the supervisor's topics, members and labels, or a node's
    per-topic label, left, right, ring and shortcuts.  Give exactly one of --supervisor,
    --node and --broker (broker mode, below)."""
    if (supervisor_ref is None) == (node_ref is None):
        raise click.UsageError("give exactly one of --supervisor and --node")
    addr = supervisor_ref or node_ref
    assert addr is not None
    body = _ask(addr, StatusRequest(), timeout).body
    if as_json:
        click.echo(json.dumps(body, indent=2, sort_keys=True))
    elif supervisor_ref is not None:
        click.echo(format_supervisor_status(body))
    else:
        click.echo(format_node_status(body))


# --- text rendering ----------------------------------------------------------------------------
def _label_key(bits: object) -> tuple[int, Any]:
    try:
        return (0, Label(str(bits)))
    except LabelError:
        return (1, str(bits))


def _contact(value: object) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"{value[0]} @ {value[1]}"
    return "-" if value is None else str(value)


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(indent + "  ".join(cells).rstrip())
    return lines


def format_stats(stats: object) -> str:
    """One line summarizing the runtime counters of a status reply."""
    if not isinstance(stats, dict):
        return "stats: -"
    frames_in = sum(stats.get("frames_in", {}).values())
    frames_out = sum(stats.get("frames_out", {}).values())
    errors = stats.get("errors", {})
    err = ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "none"
    return (
        f"stats: frames in {frames_in}, out {frames_out}; errors: {err}; "
        f"dropped sends {stats.get('dropped_sends', 0)}; "
        f"peers unreachable {stats.get('peers_unreachable', 0)}; "
        f"connections open {stats.get('connections_open', 0)}"
    )


def format_supervisor_status(body: dict[str, Any]) -> str:
    """The supervisor's status as text: per topic, its members ordered by label."""
    lines = [f"supervisor {body.get('ref', '?')}"]
    topics = body.get("topics") or {}
    if not topics:
        lines.append("no topics")
    for topic, entry in sorted(topics.items()):
        members = entry.get("members", []) if isinstance(entry, dict) else []
        extra = ""
        if isinstance(entry, dict) and "legitimate_database" in entry:
            extra = (
                ", database legitimate" if entry["legitimate_database"] else ", database repairing"
            )
        lines.append(
            f"topic {topic}: {len(members)} member{'s' if len(members) != 1 else ''}{extra}"
        )
        if members:
            rows = [["LABEL", "REF"]] + [
                [str(m.get("label")), str(m.get("ref"))]
                for m in sorted(members, key=lambda m: _label_key(m.get("label")))
            ]
            lines.extend(_table(rows))
    lines.append(format_stats(body.get("stats")))
    return "\n".join(lines)


def format_node_status(body: dict[str, Any]) -> str:
    """A node's status as text: per topic, label, left, right, ring and shortcuts."""
    lines = [f"node {body.get('ref', '?')}  supervisor {body.get('supervisor', '?')}"]
    topics = body.get("topics") or {}
    if not topics:
        lines.append("no topics")
    for topic, entry in sorted(topics.items()):
        if not isinstance(entry, dict):
            lines.append(f"topic {topic}: {entry}")
            continue
        state = " (leaving)" if entry.get("leaving") else ""
        lines.append(f"topic {topic}{state}")
        rows = [["label", str(entry.get("label") or "-")]]
        for key in ("left", "right", "ring"):
            rows.append([key, _contact(entry.get(key))])
        shortcuts = entry.get("shortcuts") or {}
        if isinstance(shortcuts, dict) and shortcuts:
            for i, (label, ref) in enumerate(
                sorted(shortcuts.items(), key=lambda kv: _label_key(kv[0]))
            ):
                rows.append(["shortcuts" if i == 0 else "", f"{label} @ {ref or '?'}"])
        else:
            rows.append(["shortcuts", "-"])
        publications = entry.get("publications")
        if isinstance(publications, dict):
            rows.append(["publications", _topic_publications(publications)])
        known = {"label", "left", "right", "ring", "shortcuts", "leaving", "publications"}
        rows.extend([k, json.dumps(v)] for k, v in sorted(entry.items()) if k not in known)
        lines.extend(_table(rows))
    section = body.get("publications")
    if isinstance(section, dict):
        lines.append(format_publications(section))
    lines.append(format_stats(body.get("stats")))
    return "\n".join(lines)


def _topic_publications(section: dict[str, Any]) -> str:
    root = section.get("root")
    root_text = (
        f"{root[0] or '⊥'}:{str(root[1])[:8]}" if isinstance(root, list) and len(root) == 2 else "-"
    )
    return (
        f"{section.get('count', 0)} held, local #{section.get('latest_local_seq', 0)}, "
        f"root {root_text}, rejected {section.get('rejected_malformed', 0)}"
    )


def format_publications(section: dict[str, Any]) -> str:
    """One line summarizing the publication section of a node's status."""
    store = section.get("store", "?")
    durability = f"sync {section.get('sync')}" if section.get("durable") else "in memory only"
    return (
        f"publications: store {store} ({durability}); flooding "
        f"{'on' if section.get('flooding') else 'off'}; max payload "
        f"{section.get('max_payload_bytes')} B; next seq {section.get('next_seq')}; "
        f"streams {section.get('streams', 0)}; delivered {section.get('delivered', 0)}; "
        f"hand-overs pending {section.get('handovers_pending', 0)}; "
        f"unwritten {section.get('unwritten', 0)}; "
        f"rejected malformed {section.get('rejected_malformed', 0)}"
    )


from pubsub.cli.chaos import chaos

main.add_command(chaos)

from pubsub.ops.analysis.cli import analyze

main.add_command(analyze)

from pubsub.cli.cluster import cluster

main.add_command(cluster)

from pubsub.ops.experiment.cli import experiment

main.add_command(experiment)

from broker.cli import register as register_broker_mode  # noqa: E402 - SCOT broker mode

register_broker_mode(main)  # `pubsub broker|advertise|unadvertise|link-rate`, --broker options

if __name__ == "__main__":  # `python -m pubsub.cli.main ...` (how LocalCluster starts daemons)
    main()
