"""The skip-ring mode's client commands: subscribe, unsubscribe, publish, history and status
(see `pubsub --help`); its daemon commands, supervisor and node, are in `pubsub.cli.daemons`.
`COMMANDS` lists them all."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, BinaryIO

import click

from pubsub.cli.common import (
    ADDRESS,
    TIMEOUT_OPTION,
    TOPIC,
    ask,
    ask_status,
    print_change,
    run_client,
    since_option,
)
from pubsub.cli.daemons import COMMANDS as DAEMON_COMMANDS
from pubsub.cli.follow import follow
from pubsub.cli.formats import format_ack, format_delivery, format_node_status, format_supervisor_status
from pubsub.cli.publishing import publish_stdin
from pubsub.cli.retention import COMMANDS as RETENTION_COMMANDS
from pubsub.cli.topics import Selection, SelectionError, patterns_in, select
from pubsub.client.library import DEFAULT_RETRIES, Ack, Client, ClientError, PublishError
from pubsub.client.run import publish_pipelined
from pubsub.client.supervisors import supervisor_topics
from pubsub.kernel.message import Ref, Topic
from pubsub.kernel.wire import WireError
from pubsub.publications.fields import MAX_MSG_ID_CHARS, validate_msg_id
from pubsub.publications.messages import JoinTopic, LeaveTopic

LITERAL_OPTION = click.option(
    "--literal",
    is_flag=True,
    help="Take every TOPIC as a topic name, even with * ? [ in it (no patterns).",
)


def _topics_given(topic: tuple[str, ...]) -> list[str]:
    if not topic:
        raise click.UsageError("Missing argument 'TOPIC'.")
    return list(topic)


def _resolve(
    args: list[str], literal: bool, available: list[str], where: str, *, allow_empty: bool = False
) -> Selection:
    try:
        return select(args, available, literal, where, allow_empty=allow_empty)
    except SelectionError as exc:
        raise click.ClickException(str(exc)) from None


def _report_patterns(chosen: Selection, later: str = "") -> None:
    for pattern, matched in chosen.patterns.items():
        click.echo(
            f"pattern {pattern!r} matched {len(matched)} topic(s) now: {', '.join(matched) or '-'}"
            + (f" ({later})" if later else ""),
            err=True,
        )


def _supervisor_ref(node_body: dict[str, object]) -> Ref:
    supervisor_ref = node_body.get("supervisor")
    if not isinstance(supervisor_ref, str):
        raise click.ClickException("the node's status names no supervisor to resolve patterns with")
    return Ref(supervisor_ref)


def _supervisor_topics(node_body: dict[str, object], timeout: float) -> list[str]:
    """Every topic a live supervisor holds (sharded supervisors: all of them, found
    through the node's one, `pubsub.client.supervisors`)."""
    ask_status(_supervisor_ref(node_body), "supervisor", timeout)
    try:
        return asyncio.run(supervisor_topics(_supervisor_ref(node_body), timeout))
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None


def _topic_lister(supervisor: Ref, timeout: float) -> Callable[[], Awaitable[list[str]]]:
    """An async listing of the supervisors' topics (for patterns that stay open)."""

    async def listing() -> list[str]:
        return await supervisor_topics(supervisor, timeout)

    return listing


def _running_topics(node_body: dict[str, Any]) -> list[str]:
    """The topics a node runs (a member, not leaving), from its status."""
    return [
        str(name) for name, entry in (node_body.get("topics") or {}).items()
        if not (isinstance(entry, dict) and entry.get("leaving"))
    ]


def _running_lister(node_ref: Ref, timeout: float) -> Callable[[], Awaitable[list[str]]]:
    """An async listing of the topics a node runs (patterns with --no-join)."""

    async def listing() -> list[str]:
        async with Client(node_ref, timeout=timeout) as client:
            return _running_topics(await client.status())

    return listing


@click.command()
@click.argument("topic", nargs=-1, type=TOPIC, metavar="TOPIC...")
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@since_option(
    "Deliver the publications after local number N (one TOPIC only).  A cursor INC:N, as "
    "--json deliveries and a broken stream print it, is refused if the node's store is "
    "another incarnation or does not reach N."
)
@click.option(
    "--from-now",
    is_flag=True,
    help="With --since INC:N: if the node refuses the cursor, deliver from its latest "
    "publication on instead of failing.",
)
@click.option(
    "--new-only", is_flag=True,
    help="Skip the history: only publications published from now on (1 s of clock skew allowed), "
    "also when the node is just joining the topic and fetches its history afterwards.",
)
@click.option(
    "--published-from-ms",
    type=click.IntRange(min=1),
    default=None,
    metavar="MS",
    help="Skip what was published before MS (milliseconds since the epoch, compared with each "
    "publication's published_ms), for the stream's whole life.  A broken --new-only stream "
    "prints it with its cursor: give both to resume it without the history.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per delivery (with its cursor and msg_id)."
)
@click.option(
    "--detach",
    is_flag=True,
    help="Only make the node join the topics and return at once (no stream: --since, "
    "--new-only, --json and --count do not apply).",
)
@click.option(
    "--join/--no-join",
    default=True,
    show_default=True,
    help="Make the node join each topic before reading it.  --no-join reads what the node "
    "holds and stores of a topic it already runs, without asking it to join (what a client "
    "certificate allowed to read but not to change a node's topics needs); a topic it does "
    "not run is an error (not_member), and a stream ends so when the node leaves its topic.",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Exit after N deliveries (of all topics together).",
)
@LITERAL_OPTION
@TIMEOUT_OPTION
def subscribe(
    topic: tuple[str, ...],
    node_ref: Ref,
    since: str,
    from_now: bool,
    new_only: bool,
    published_from_ms: int | None,
    as_json: bool,
    detach: bool,
    join: bool,
    count: int | None,
    literal: bool,
    timeout: float,
) -> None:
    """Make the node at --node subscribe to every TOPIC and print their publications as
    they come.

    A TOPIC with * ? or [ is a pattern (sensors.*): it stands for every topic the
    supervisor knows that matches it, now and -- while the command runs -- later (the
    supervisor's topics are listed again every 2 s; with --detach only those known now);
    with --no-join, for every topic the node runs that matches it (listed again likewise).
    With --detach the topics joined are printed, one line each.  Every publication the node holds or
    stores from now on is printed once, in the node's local order (numbered 1, 2, 3, ...
    per topic): by default from the beginning of the history, with --since after the
    given number or cursor, with --new-only from now on; with --published-from-ms MS only
    what was published from MS on (for every topic, those a pattern finds later too).
    With several topics each line
    starts with its topic.  Runs until interrupted (Ctrl-C exits quietly with status 0)
    or --count deliveries.  With --detach the node only joins the topics.  A stream that
    breaks ends the command (exit 1) with the options to resume it.  Each line reads
    "#LOCAL PUBLISHER#SEQ PAYLOAD"; a payload that is not UTF-8 or begins with "base64:"
    is shown as "base64:" and its bytes in base64 (--json: one object per publication).
    """
    args = _topics_given(topic)
    resuming = since != "0"
    if new_only and resuming:
        raise click.UsageError("give at most one of --since and --new-only")
    if from_now and not resuming:
        raise click.UsageError("--from-now only applies with --since INC:N")
    if new_only and published_from_ms is not None:
        raise click.UsageError(
            "give at most one of --new-only and --published-from-ms (--new-only sets its own bound: now, less 1 s)"
        )
    if detach and not join:
        raise click.UsageError("--detach only makes the node join the topics: it cannot go with --no-join")
    if detach:
        streamed = [flag for flag, given in (("--since", resuming), ("--new-only", new_only),
                                             ("--published-from-ms", published_from_ms is not None),
                                             ("--json", as_json), ("--count", count is not None)) if given]
        if streamed:
            raise click.UsageError(
                f"{' and '.join(streamed)} {'applies' if len(streamed) == 1 else 'apply'} to the "
                "printed stream; with --detach the node only joins the topics"
            )
    body = ask_status(node_ref, "node", timeout)
    patterns = patterns_in(args, literal)
    if join:
        available = _supervisor_topics(body, timeout) if patterns else []
        where, lister = "the supervisor's topics", _topic_lister(_supervisor_ref(body), timeout)
    else:  # a pattern stands for what the node runs: it may not join anything
        available = _running_topics(body)
        where, lister = f"the topics {node_ref} runs", _running_lister(node_ref, timeout)
    chosen = _resolve(args, literal, available, where, allow_empty=not detach)
    if resuming and (len(chosen.topics) > 1 or patterns):
        raise click.UsageError(
            "--since numbers one topic's publications: give one TOPIC, not several or a pattern"
        )
    _report_patterns(
        chosen, "topics created later are not joined" if detach else "topics created later are followed too"
    )
    if detach:
        for name in chosen.topics:
            reply = ask(node_ref, JoinTopic(topic=Topic(name)), timeout)
            print_change("subscribing", name, node_ref, reply.body)
        return

    run_client(
        lambda: follow(
            node_ref,
            chosen.topics,
            since=since,
            from_now=from_now,
            new_only=new_only,
            published_from_ms=published_from_ms or 0,
            join=join,
            as_json=as_json,
            count=count,
            timeout=timeout,
            patterns=patterns,
            list_topics=lister if patterns else None,
        )
    )


@click.command()
@click.argument("topic", nargs=-1, type=TOPIC, metavar="TOPIC...")
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@LITERAL_OPTION
@TIMEOUT_OPTION
def unsubscribe(topic: tuple[str, ...], node_ref: Ref, literal: bool, timeout: float) -> None:
    """Ask the node at --node to unsubscribe from every TOPIC (it leaves once the
    supervisor agrees).

    A TOPIC with * ? or [ is a pattern: every topic the node runs that matches it.  A topic
    the node does not run is an error (exit 1), and then nothing is left.
    """
    args = _topics_given(topic)
    body = ask_status(node_ref, "node", timeout)
    running = {str(t): entry for t, entry in (body.get("topics") or {}).items()}
    chosen = _resolve(args, literal, list(running), f"the topics {node_ref} runs")
    missing = [t for t in chosen.topics if t not in running]
    if missing:
        have = ", ".join(sorted(running)) or "none"
        raise click.ClickException(
            f"{node_ref} does not subscribe to {', '.join(missing)} (its topics: {have}); "
            "nothing was changed"
        )
    _report_patterns(chosen)
    for name in chosen.topics:
        entry = running[name]
        already = isinstance(entry, dict) and entry.get("leaving")
        reply = ask(node_ref, LeaveTopic(topic=Topic(name)), timeout)
        print_change("unsubscribing", name + (" (already leaving)" if already else ""), node_ref, reply.body)


@click.command()
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
@click.option(
    "--msg-id",
    default=None,
    metavar="ID",
    help="The publication's message id (1-64 printable ASCII characters; one MESSAGE or "
    "--file only; generated when not given).  Publishing the same id again within the "
    "node's de-duplication window (PUBSUB_DEDUPE_WINDOW, 120 s) is acknowledged as a "
    "duplicate and stored once.",
)
@click.option(
    "--retries",
    type=click.IntRange(min=0),
    default=DEFAULT_RETRIES,
    show_default=True,
    metavar="N",
    help="Times a publication that got no answer (or an 'unknown' one) is sent again, with "
    "the same message id.",
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
    msg_id: str | None,
    retries: int,
    quiet: bool,
    as_json: bool,
    timeout: float,
) -> None:
    """Publish MESSAGE on TOPIC through the node at --node.

    Without MESSAGE and --file, every line read from stdin is one publication, with up to
    32 in flight.  The node need not subscribe to TOPIC (it then hands the publication to
    a member).  Each publication is acknowledged once a member holds it durably; one line
    is printed per acknowledgement as soon as it arrives (or one summary with --quiet).
    Exits 1 at the first failure (reading stdin: the error names the failed line, and the
    later lines already in flight that were acknowledged all the same).  Reading stdin,
    SIGINT or SIGTERM stops reading, gives the publications in flight 1 s to be
    acknowledged and prints a summary to stderr: how many were acknowledged and each line
    still unknown (sent, not acknowledged); the exit status is 1 if any is unknown, else
    0.  A closed stdout (| head -1) ends the printing, not the publishing.
    """
    if message is not None and file is not None:
        raise click.UsageError("give MESSAGE or --file, not both")
    if msg_id is not None:
        try:
            if not msg_id:  # the protocol's "none" (the node makes one): not an id to give
                raise WireError(
                    "bad_field", f"a message id is 1..{MAX_MSG_ID_CHARS} printable ASCII characters, got ''"
                )
            validate_msg_id(msg_id)
        except WireError as exc:
            raise click.BadParameter(exc.detail, param_hint="--msg-id") from None
    if message is None and file is None:
        if msg_id is not None:
            raise click.UsageError("--msg-id names one publication: give MESSAGE or --file")
        run_client(
            lambda stopping: publish_stdin(
                stopping, topic, node_ref, quiet=quiet, as_json=as_json, timeout=timeout, retries=retries
            ),
            graceful=True,
        )
        return
    if message is not None:
        payloads: Iterator[bytes] = iter([message.encode("utf-8")])
    else:
        assert file is not None
        payloads = iter([file.read()])

    async def run() -> None:
        def show(ack: Ack) -> None:
            if not quiet:
                click.echo(format_ack(ack, as_json))

        async with Client(node_ref, publish_timeout=timeout) as client:
            done, failure = await publish_pipelined(
                payloads,
                lambda payload: client.publish(topic, payload, msg_id=msg_id, retries=retries),
                show,
                PublishError,
            )
        if failure is not None:
            before = f" ({done} acknowledged before the failure)" if done else ""
            raise ClientError(failure.code, f"{failure}{before}")
        if quiet:
            click.echo(f"published {done} to {topic} through {node_ref}")

    run_client(run)


@click.command()
@click.argument("topic", type=TOPIC)
@click.option("--node", "node_ref", required=True, type=ADDRESS, help="The node's address.")
@since_option(
    "Only publications after local number N (a cursor INC:N is refused if the node's "
    "store is another incarnation or does not reach N)."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per publication (with its cursor and msg_id)."
)
@TIMEOUT_OPTION
def history(topic: str, node_ref: Ref, since: str, as_json: bool, timeout: float) -> None:
    """Print what the node at --node holds for TOPIC, in its local order, numbered.

    The lines are those of `pubsub subscribe` ("#LOCAL PUBLISHER#SEQ PAYLOAD", base64 for a
    payload that is not UTF-8 or begins with "base64:")."""

    async def run() -> None:
        client = Client(node_ref, timeout=timeout)
        page = await client.history_page(topic, since=since)
        found = page.deliveries
        for delivery in found:
            click.echo(format_delivery(delivery, as_json, page.incarnation))
        if not found and not as_json:
            click.echo(f"{node_ref} holds no publications of {topic} after #{since}", err=True)

    run_client(run)


@click.command()
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
    body = ask_status(addr, "supervisor" if supervisor_ref is not None else "node", timeout)
    if as_json:
        click.echo(json.dumps(body, indent=2, sort_keys=True))
    elif supervisor_ref is not None:
        click.echo(format_supervisor_status(body))
    else:
        click.echo(format_node_status(body))


#: The skip-ring mode's commands: the daemons' (`pubsub.cli.daemons`), the client commands
#: here and retention's; subscribe, publish and status are the shared verbs' default forms
#: (`pubsub.cli.verbs`).
COMMANDS = (*DAEMON_COMMANDS, subscribe, unsubscribe, publish, history, status, *RETENTION_COMMANDS)
