"""`pubsub subscribe` without --detach: print the deliveries of one or several topics.

One stream (`pubsub.client.library.Subscription`) per topic, all on the node given; the
deliveries of every stream are printed as they come, so their order across topics is the
order of arrival.  With one topic a line is ``#LOCAL PUBLISHER#SEQ PAYLOAD``; with several
it starts with the topic (``TOPIC #LOCAL ...``); JSON objects name their topic anyway.
JSON objects also carry the cursor after each delivery (``INCARNATION:LOCAL``).  A stream
that breaks ends the command with the topic and the ``--since`` cursor to resume it.
"""

from __future__ import annotations

import asyncio
import contextlib

import click

from pubsub.cli.formats import format_delivery
from pubsub.client.library import Client, ClientError, ConnectionLost, Subscription
from pubsub.kernel.message import Ref
from pubsub.skipring.messages import Delivery

#: Deliveries read ahead of the terminal (the streams wait beyond that: backpressure).
QUEUE_BOUND = 256


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
) -> None:
    """Join every topic, open its stream, print deliveries until `count` (total) or until
    cancelled (Ctrl-C / SIGTERM, through `pubsub.client.run.until_stopped`)."""
    client = Client(node_ref, timeout=timeout)
    subs: list[Subscription] = []
    queue: asyncio.Queue[tuple[Subscription, Delivery | ClientError]] = asyncio.Queue(QUEUE_BOUND)
    readers: list[asyncio.Task[None]] = []
    try:
        for topic in topics:
            sub = await client.subscribe(topic, since=since, new_only=new_only, from_now=from_now).open()
            subs.append(sub)
            restarted = " (the cursor was refused: from the node's latest on)" if sub.reset else ""
            click.echo(
                f"{node_ref}: subscribed to {topic}; delivering from local #{sub.since + 1}"
                f" (the node holds {sub.latest}){restarted}",
                err=True,
            )
        readers = [asyncio.create_task(_pump(sub, queue)) for sub in subs]
        prefix = len(topics) > 1 and not as_json
        seen = 0
        while count is None or seen < count:
            sub, item = await queue.get()
            if isinstance(item, ClientError):
                if isinstance(item, ConnectionLost):
                    raise ClientError(
                        item.code, f"{item} ({sub.topic}); resume with --since {sub.cursor}"
                    ) from None
                raise item
            line = format_delivery(item, as_json, sub.incarnation)
            click.echo(f"{item.topic} {line}" if prefix else line)
            seen += 1
    finally:
        for task in readers:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*readers, return_exceptions=True)
        for sub in subs:
            await sub.close()


async def _pump(sub: Subscription, queue: asyncio.Queue[tuple[Subscription, Delivery | ClientError]]) -> None:
    try:
        async for delivery in sub:
            await queue.put((sub, delivery))
    except ClientError as exc:
        await queue.put((sub, exc))
        return
    await queue.put((sub, ConnectionLost("connection", f"{sub.client.node} ended the stream")))
