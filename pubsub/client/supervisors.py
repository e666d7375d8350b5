"""Finding a topic's supervisor from one supervisor address (sharded supervisors,
`pubsub.kernel.shards`).

Any supervisor answers `SupervisorsRequest` with the live supervisor set; a topic belongs
to the one the hash ring of that set assigns.  One address is all a client needs::

    live = await live_supervisors("127.0.0.1:7000")
    owner = await supervisor_for("news", "127.0.0.1:7000")
    topics = await supervisor_topics("127.0.0.1:7000")   # every live supervisor's topics

A supervisor that does not know the request (one from before sharding) counts as the only
one.  Errors are `ClientError` (``connection`` or ``protocol``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pubsub.client.connection import ClientError
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Ref
from pubsub.kernel.shards import SupervisorsRequest, owner
from pubsub.runtime.client import RequestError, request

DEFAULT_TIMEOUT = 5.0


async def live_supervisors(address: str, timeout: float = DEFAULT_TIMEOUT) -> list[Ref]:
    """The live supervisor set, as the supervisor at `address` sees it."""
    try:
        reply = await request(address, SupervisorsRequest(), timeout)
    except RequestError as exc:
        raise ClientError("connection", str(exc)) from None
    if isinstance(reply, ErrorReply) and reply.code == "unsupported":
        return [Ref(address)]
    if not isinstance(reply, Reply) or not isinstance(reply.body.get("live"), list):
        raise ClientError("protocol", f"{address} answered the supervisors request with {reply!r}"[:300])
    return [Ref(str(r)) for r in reply.body["live"]] or [Ref(address)]


async def supervisor_for(topic: str, address: str, timeout: float = DEFAULT_TIMEOUT) -> Ref:
    """The supervisor that owns `topic`, found through the one at `address`."""
    return owner(topic, await live_supervisors(address, timeout))


async def supervisor_statuses(address: str, timeout: float = DEFAULT_TIMEOUT) -> dict[Ref, dict[str, Any]]:
    """The status of every live supervisor, found through the one at `address`."""
    live = await live_supervisors(address, timeout)

    async def one(ref: Ref) -> dict[str, Any]:
        try:
            reply = await request(ref, StatusRequest(), timeout)
        except RequestError as exc:
            raise ClientError("connection", str(exc)) from None
        if not isinstance(reply, Reply):
            raise ClientError("protocol", f"{ref} answered status with {reply.kind!r}")
        return reply.body

    bodies = await asyncio.gather(*(one(ref) for ref in live))
    return dict(zip(live, bodies, strict=True))


async def supervisor_topics(address: str, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """Every topic some live supervisor holds, found through the one at `address`."""
    topics: set[str] = set()
    for body in (await supervisor_statuses(address, timeout)).values():
        topics.update(str(t) for t in (body.get("topics") or {}))
    return sorted(topics)


__all__ = ["live_supervisors", "supervisor_for", "supervisor_statuses", "supervisor_topics"]
