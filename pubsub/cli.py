"""The `pubsub` command: run the daemons, and talk to them as a client.

    pubsub supervisor --listen HOST:PORT --data DIR [--interval S] [--config-budget N]
    pubsub node --listen HOST:PORT --supervisor HOST:PORT [--data DIR] [--interval S]
    pubsub subscribe TOPIC --node HOST:PORT
    pubsub unsubscribe TOPIC --node HOST:PORT
    pubsub status (--supervisor HOST:PORT | --node HOST:PORT) [--json]

Daemon settings come from the flags, then ``PUBSUB_*`` environment variables
(`pubsub.settings`), then defaults.  Logs go to stderr.  Every failure an operator can cause
(a bad flag, an unreachable daemon, an unusable data directory, a port in use) ends with a
one-line message and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from pubsub.labels import Label, LabelError
from pubsub.messages import (
    ErrorReply,
    JoinTopic,
    LeaveTopic,
    Message,
    Ref,
    Reply,
    StatusRequest,
    Topic,
)
from pubsub.net import RequestError, request
from pubsub.settings import (
    NodeSettings,
    RuntimeSettings,
    SettingsError,
    SupervisorSettings,
    load,
)
from pubsub.wire import WireError, validate_ref, validate_topic

FLAGS = {"timeout_interval": "--interval", "config_budget": "--config-budget", "data_dir": "--data"}


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


def _run_daemon(what: str, listen: str, run: Any) -> None:
    """Run a daemon; turn start-up failures into one-line errors."""
    from pubsub.node import TopicFileError
    from supervisor.store import StoreError

    try:
        run()
    except (StoreError, TopicFileError) as exc:
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
def supervisor(
    listen: Ref, data_dir: Path | None, interval: float | None, config_budget: int | None
) -> None:
    """Run the supervisor daemon until SIGTERM or SIGINT."""
    from supervisor.daemon import run_supervisor

    runtime_settings = _runtime_settings(interval)
    try:
        settings = load(SupervisorSettings, FLAGS, data_dir=data_dir, config_budget=config_budget)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    _run_daemon("supervisor", listen, lambda: run_supervisor(listen, runtime_settings, settings))


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
    help="Directory where the node keeps its subscribed topics and rejoins them at start "
    "(optional; env PUBSUB_DATA_DIR).",
)
@_interval_option
def node(listen: Ref, supervisor_ref: Ref, data_dir: Path | None, interval: float | None) -> None:
    """Run a subscriber node daemon until SIGTERM or SIGINT."""
    from pubsub.node import run_node

    runtime_settings = _runtime_settings(interval)
    try:
        settings = load(NodeSettings, FLAGS, data_dir=data_dir)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    _run_daemon(
        "node", listen, lambda: run_node(listen, supervisor_ref, runtime_settings, settings)
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


@main.command()
@click.argument("topic", type=TOPIC)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@TIMEOUT_OPTION
def subscribe(topic: str, node_ref: Ref, timeout: float) -> None:
    """Ask the node at --node to subscribe to TOPIC."""
    reply = _ask(node_ref, JoinTopic(topic=Topic(topic)), timeout)
    _print_change("subscribing", topic, node_ref, reply.body)


@main.command()
@click.argument("topic", type=TOPIC)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@TIMEOUT_OPTION
def unsubscribe(topic: str, node_ref: Ref, timeout: float) -> None:
    """Ask the node at --node to unsubscribe from TOPIC (it leaves once the supervisor agrees)."""
    reply = _ask(node_ref, LeaveTopic(topic=Topic(topic)), timeout)
    _print_change("unsubscribing", topic, node_ref, reply.body)


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
    per-topic label, left, right, ring and shortcuts.  Give exactly one of --supervisor
    and --node."""
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
        known = {"label", "left", "right", "ring", "shortcuts", "leaving"}
        rows.extend([k, json.dumps(v)] for k, v in sorted(entry.items()) if k not in known)
        lines.extend(_table(rows))
    lines.append(format_stats(body.get("stats")))
    return "\n".join(lines)


if __name__ == "__main__":  # `python -m pubsub.cli ...` (how LocalCluster starts daemons)
    main()
