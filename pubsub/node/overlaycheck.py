"""A node learns its overlay from its supervisor at start, and refuses to run another.

Before the node daemon builds its core it asks its supervisor which overlay it runs: one
control request, `SupervisorsRequest`, whose answer is small whatever the overlay holds (a
status would build the whole record: tco's every table), ``overlay`` in its body.
Started without ``--overlay`` (nor ``PUBSUB_OVERLAY`` or the config file's ``overlay``),
the node runs that overlay; started with one that differs, it refuses to start
(`OverlayMismatch`), naming both.  A supervisor that cannot be reached within
`LEARN_TIMEOUT` seconds (not started yet) teaches nothing: the node runs the overlay it was
given, or the default one, and says so in its log.
"""

from __future__ import annotations

import logging

from pubsub.kernel import registry
from pubsub.kernel.control import Reply
from pubsub.kernel.message import Message, Ref
from pubsub.kernel.shards import SupervisorsRequest
from pubsub.runtime.client import RequestError, request
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.tls import connect_context

log = logging.getLogger(__name__)

#: Seconds the one status request to the supervisor may take.
LEARN_TIMEOUT = 2.0


class OverlayMismatch(Exception):
    """The node was told to run another overlay than its supervisor's."""


async def agreed_overlay(
    supervisor: Ref, given: str | None, settings: RuntimeSettings, timeout: float = LEARN_TIMEOUT
) -> str:
    """The overlay this node runs: its supervisor's (module docstring); OverlayMismatch
    when `given` (None: not given) differs from it."""
    try:
        reply: Message | RequestError = await request(
            supervisor, SupervisorsRequest(), timeout, context=connect_context(settings)
        )
    except RequestError as exc:
        reply = exc
    if not isinstance(reply, Reply):
        chosen = given or registry.DEFAULT_OVERLAY
        why = reply if isinstance(reply, RequestError) else f"it answered {reply.kind}"
        log.warning("could not learn the overlay of the supervisor %s (%s): running %s", supervisor, why, chosen)
        return chosen
    learned = str(reply.body.get("overlay") or registry.DEFAULT_OVERLAY)
    if given is not None and given != learned:
        raise OverlayMismatch(
            f"the supervisor {supervisor} runs the {learned} overlay, and this node was told to run {given} "
            f"(--overlay, PUBSUB_OVERLAY or the config file): give --overlay {learned}, or leave it out "
            "and the node runs its supervisor's"
        )
    if learned not in registry.overlay_names():
        raise OverlayMismatch(f"the supervisor {supervisor} runs an overlay this node does not know: {learned!r}")
    return learned
