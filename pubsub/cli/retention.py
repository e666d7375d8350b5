"""Operator commands for retention (`pubsub.publications.retention`), answered by the supervisor:

    pubsub retention set TOPIC --supervisor ADDR [--max-age 1h] [--max-count N] [--max-bytes 10MiB]
    pubsub retention show [TOPIC] --supervisor ADDR [--json]
    pubsub topic purge TOPIC --supervisor ADDR --yes

A limit not given is left as it is; 0 removes it.  The supervisor stores the settings, then
sends them to every member of the topic (and with every later configuration: settings for a
topic without members yet are kept for those that join).  A purge of a topic without
members is refused (``no_members``).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import click

from pubsub.cli.common import ADDRESS, TIMEOUT_OPTION, TOPIC, ask, ask_status
from pubsub.cli.formats import DURATION_MS, retention_limits_text, utc_ms_text
from pubsub.client.library import ClientError
from pubsub.client.supervisors import supervisor_for, supervisor_statuses
from pubsub.kernel.message import Ref, Topic
from pubsub.publications.retention import MAX_LIMIT, PurgeTopic, SetRetention

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?", re.IGNORECASE)
_SIZE_BYTES = {
    "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4,
}


def parse_duration_ms(text: str) -> int:
    """"90s", "1h", "1.5d", "500ms" or a bare number of seconds, in milliseconds."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"not a duration: {text!r} (examples: 500ms, 30s, 15m, 1h, 7d)")
    return int(float(found.group(1)) * DURATION_MS[found.group(2) or "s"])


def parse_size(text: str) -> int:
    """"512", "10k", "10MB", "1GiB": bytes (k, M, G, T are powers of 1000; KiB, MiB, ... of 1024)."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"not a size: {text!r} (examples: 512, 64k, 10MB, 1GiB)")
    return int(float(found.group(1)) * _SIZE_BYTES[(found.group(2) or "b").lower()])


class _Parsed(click.ParamType):
    def __init__(self, name: str, parse: Any) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            number = value
        else:
            try:
                number = int(self._parse(str(value)))
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        if number > MAX_LIMIT:
            self.fail(f"{value!r} is more than the largest {self.name} a limit can be", param, ctx)
        return number


DURATION = _Parsed("duration", parse_duration_ms)
SIZE = _Parsed("size", parse_size)
SUPERVISOR_OPTION = click.option(
    "--supervisor", "supervisor_ref", required=True, type=ADDRESS, help="The supervisor's address."
)


def _owner(topic: str, supervisor_ref: Ref, timeout: float) -> Ref:
    """The supervisor that owns `topic` (sharded supervisors, `pubsub.client.supervisors`),
    found through the one at `supervisor_ref`, checked to be a supervisor."""
    ask_status(supervisor_ref, "supervisor", timeout)
    try:
        found = asyncio.run(supervisor_for(topic, supervisor_ref, timeout))
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
    return supervisor_ref if found == supervisor_ref else Ref(found)


def describe(topic: str, settings: dict[str, int]) -> str:
    """One line: a topic's limits as an operator reads them (and `set` takes them)."""
    return f"{topic}: {retention_limits_text(settings)}"


@click.group("retention", context_settings={"help_option_names": ["-h", "--help"]})
def retention() -> None:
    """A topic's retention limits: how old, how many, how many bytes every node keeps."""


@retention.command("set")
@click.argument("topic", type=TOPIC)
@SUPERVISOR_OPTION
@click.option("--max-age", type=DURATION, default=None, metavar="DURATION",
              help="Remove publications older than this (by the time they were published): 30s, 1h, 7d "
              "(a bare number is seconds); 0: no limit.")
@click.option("--max-count", type=click.IntRange(min=0, max=MAX_LIMIT), default=None, metavar="N",
              help="Keep the newest N publications of the topic by their timestamps (ms; within one "
              "millisecond ordered by key, so not by publisher order); 0: no limit.")
@click.option("--max-bytes", type=SIZE, default=None, metavar="SIZE",
              help="Keep the newest publications (ordered as for --max-count) whose payloads fit in SIZE: "
              "64k, 10MB, 1GiB; 0: no limit.")
@click.option("--json", "as_json", is_flag=True, help="Print the supervisor's reply as JSON.")
@TIMEOUT_OPTION
def retention_set(
    topic: str, supervisor_ref: Ref, max_age: int | None, max_count: int | None, max_bytes: int | None,
    as_json: bool, timeout: float,
) -> None:
    """Set TOPIC's retention limits at the supervisor, which sends them to every member.
    Limits not given stay as they are."""
    if max_age is None and max_count is None and max_bytes is None:
        raise click.UsageError("give at least one of --max-age, --max-count and --max-bytes")
    supervisor_ref = _owner(topic, supervisor_ref, timeout)
    body = ask(supervisor_ref, SetRetention(Topic(topic), max_age, max_count, max_bytes), timeout).body
    if as_json:
        click.echo(json.dumps(body, sort_keys=True))
        return
    click.echo(describe(topic, body.get("retention") or {}))
    members = body.get("members", 0)
    click.echo(f"sent to {members} member(s)" if members else "no member yet; kept for members that join", err=True)


@retention.command("show")
@click.argument("topic", type=TOPIC, required=False)
@SUPERVISOR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
@TIMEOUT_OPTION
def retention_show(topic: str | None, supervisor_ref: Ref, as_json: bool, timeout: float) -> None:
    """Show the retention limits the supervisor holds (every topic that has some, or TOPIC)."""
    ask_status(supervisor_ref, "supervisor", timeout)
    settings: dict[str, dict[str, int]] = {}
    try:  # sharded supervisors: every live one's settings
        bodies = asyncio.run(supervisor_statuses(supervisor_ref, timeout))
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
    for body in bodies.values():
        settings.update(body.get("retention") or {})
    if topic is not None:
        settings = {topic: settings[topic]} if topic in settings else {}
    if as_json:
        click.echo(json.dumps(settings, sort_keys=True))
        return
    if not settings:
        click.echo("no retention limits" + (f" for {topic}" if topic else "") + " (everything is kept)")
    for name, values in sorted(settings.items()):
        click.echo(describe(name, values))


@click.group("topic", context_settings={"help_option_names": ["-h", "--help"]})
def topic_group() -> None:
    """Operations on a whole topic."""


@topic_group.command("purge")
@click.argument("topic", type=TOPIC)
@SUPERVISOR_OPTION
@click.option(
    "--yes", is_flag=True,
    help="Do it: without --yes the command removes nothing, says what it would remove and exits 2.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the supervisor's reply as JSON.")
@TIMEOUT_OPTION
def topic_purge(topic: str, supervisor_ref: Ref, yes: bool, as_json: bool, timeout: float) -> None:
    """Remove every publication of TOPIC published until now, at every node; later ones are
    kept.  A node that is down removes them when it comes back."""
    if not yes:
        raise click.UsageError(f"this removes every publication of {topic} at every node; add --yes to do it")
    supervisor_ref = _owner(topic, supervisor_ref, timeout)
    body = ask(supervisor_ref, PurgeTopic(Topic(topic)), timeout).body
    if as_json:
        click.echo(json.dumps(body, sort_keys=True))
        return
    purged = (body.get("retention") or {}).get("purged_ms")
    when = utc_ms_text(purged) if isinstance(purged, int) else "?"
    click.echo(f"{topic}: purged everything published at or before {when} ({purged} Unix ms); "
               f"sent to {body.get('members', 0)} member(s)")


COMMANDS = (retention, topic_group)
