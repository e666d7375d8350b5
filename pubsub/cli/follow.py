"""`pubsub subscribe` without --detach: print the deliveries of one or several topics.

One stream (`pubsub.client.library.Subscription`) per topic, all on the node given; the
deliveries of every stream are printed as they come, so their order across topics is the
order of arrival.  With one topic a line is ``#LOCAL PUBLISHER#SEQ PAYLOAD``; with several
it starts with the topic (``TOPIC #LOCAL ...``); JSON objects name their topic anyway.
JSON objects also carry the cursor after each delivery (``INCARNATION:LOCAL``).  A stream
that breaks ends the command with the topic and the options to resume it: the ``--since``
cursor, and for a new-only stream its ``--published-from-ms`` bound.

Patterns stay open: every `WATCH_INTERVAL` seconds the supervisor's topics are listed
again, and a topic that appeared since and matches a pattern is joined and followed too
(from the beginning of its history), with a line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
from collections.abc import Awaitable, Callable

import click

from pubsub.cli.formats import format_delivery
from pubsub.client.library import Client, ClientError, ConnectionLost, Subscription
from pubsub.kernel.message import Ref
from pubsub.publications.messages import Delivery

#: Deliveries read ahead of the terminal (the streams wait beyond that: backpressure).
QUEUE_BOUND = 256
#: Seconds between two listings of the supervisor's topics while patterns are open.
WATCH_INTERVAL = 2.0

Item = tuple[Subscription, Delivery | ClientError]


async def follow(
    node_ref: Ref,
    topics: list[str],
    *,
    since: str,
    from_now: bool,
    new_only: bool,
    as_json: bool,
    count: int | None,
    timeout: float,
    published_from_ms: int = 0,
    join: bool = True,
    patterns: list[str] | None = None,
    list_topics: Callable[[], Awaitable[list[str]]] | None = None,
) -> None:
    """Join every topic (with `join`), open its stream, print deliveries until `count` (total) or until
    cancelled (Ctrl-C / SIGTERM, through `pubsub.client.run.until_stopped`).  With
    `patterns` and `list_topics` (the supervisor's topics), topics that match a pattern
    later are followed as they appear."""
    client = Client(node_ref, timeout=timeout)
    subs: list[Subscription] = []
    queue: asyncio.Queue[Item] = asyncio.Queue(QUEUE_BOUND)
    tasks: list[asyncio.Task[None]] = []
    followed = set(topics)

    async def open_stream(topic: str, first: bool) -> None:
        sub = client.subscribe(
            topic, since=since, new_only=new_only, from_now=from_now, join=join, published_from_ms=published_from_ms
        ) if first else client.subscribe(topic, join=join, published_from_ms=published_from_ms)
        try:
            await sub.open()
        except ClientError as exc:
            if join and exc.code == "permission_denied":
                hint = "; to read a topic the node already runs without making it join: --no-join"
                raise ClientError(exc.code, f"{exc}{hint}") from None
            raise
        subs.append(sub)
        restarted = " (the cursor was refused: from the node's latest on)" if sub.reset else ""
        bound = f"; only what was published from {sub.published_from_ms} ms on" if sub.published_from_ms else ""
        click.echo(
            f"{node_ref}: subscribed to {topic}; delivering from local #{sub.since + 1}"
            f" (the node's latest is #{sub.latest}){restarted}{bound}",
            err=True,
        )
        tasks.append(asyncio.create_task(_pump(sub, queue)))

    async def watch(open_patterns: list[str], listing: Callable[[], Awaitable[list[str]]]) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                available = await listing()
            except ClientError as exc:
                click.echo(f"warning: cannot list the supervisor's topics now: {exc}", err=True)
                continue
            for topic in sorted(available):
                if topic in followed or not any(fnmatch.fnmatchcase(topic, p) for p in open_patterns):
                    continue
                followed.add(topic)
                click.echo(f"new topic {topic} matches a pattern: {'joining' if join else 'following'} it", err=True)
                try:
                    await open_stream(topic, first=False)
                except ClientError as exc:
                    followed.discard(topic)  # try again at the next listing
                    click.echo(f"warning: cannot follow {topic} yet: {exc}", err=True)

    try:
        for topic in topics:
            await open_stream(topic, first=True)
        if patterns and list_topics is not None:
            tasks.append(asyncio.create_task(watch(patterns, list_topics)))
        prefix = (len(topics) > 1 or bool(patterns)) and not as_json
        seen = 0
        while count is None or seen < count:
            sub, item = await queue.get()
            if isinstance(item, ClientError):
                if isinstance(item, ConnectionLost) or item.code == "not_member":  # the node left the topic
                    raise ClientError(item.code, f"{item} ({sub.topic}); resume with {_resume_options(sub)}") from None
                raise item
            line = format_delivery(item, as_json, sub.incarnation)
            click.echo(f"{item.topic} {line}" if prefix else line)
            seen += 1
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
        for sub in subs:
            await sub.close()


def _resume_options(sub: Subscription) -> str:
    """The options that resume `sub` where it broke: its cursor, and the bound of a
    new-only stream (without it, history the node fetches later would be delivered)."""
    bound = f" --published-from-ms {sub.published_from_ms}" if sub.published_from_ms else ""
    return f"--since {sub.cursor}{bound}"


async def _pump(sub: Subscription, queue: asyncio.Queue[Item]) -> None:
    try:
        async for delivery in sub:
            await queue.put((sub, delivery))
    except ClientError as exc:
        await queue.put((sub, exc))
        return
    await queue.put((sub, ConnectionLost("connection", f"{sub.client.node} ended the stream")))
