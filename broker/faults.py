"""The broker's own admin action, registered with the admin listener (`pubsub.runtime.admin`)
by the broker daemon: ``link_rate`` (params ``link``: a neighbour's broker id "x,i";
``rate``: messages per second > 0, or null for no limit) throttles the output link to one
neighbour, e.g. to congest an iLink on purpose and watch scotIDR route around it (paper
002, §9.2).  It is an operator's action: only the admin listener serves it, never the
client port (an anonymous client must not be able to throttle a broker's links).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from pubsub.runtime.admin import Action, Chaos, Outcome
from pubsub.runtime.adminparams import ChaosError, Params

log = logging.getLogger(__name__)


class BrokerTarget(Protocol):
    """What link_rate needs of the broker daemon (`broker.app.BrokerApp`)."""

    me: str
    links: dict[str, Any]
    counters: Any


def broker_actions(broker: BrokerTarget) -> dict[str, Action]:
    """The broker's own admin actions."""

    def link_rate(chaos: Chaos, params: Params) -> Outcome:
        """Set or lift the rate limit of the link to one neighbour."""
        link_id = params.take("link")
        rate = params.take("rate")
        params.done()
        link = broker.links.get(link_id) if isinstance(link_id, str) else None
        if link is None:
            raise ChaosError(
                "bad_link",
                f"{str(link_id)[:60]!r} is not a neighbour of {broker.me} (neighbours: {', '.join(broker.links)})",
            )
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < float("inf")
        ):
            raise ChaosError("bad_rate", f"a link rate is a number > 0 or null, not {rate!r}"[:200])
        link.set_rate(None if rate is None else float(rate))
        broker.counters["link_rate_changes"] += 1
        log.info("%s: link to %s limited to %s messages/s", broker.me, link_id, rate)
        return Outcome({"ok": True, "op": "link_rate", "link": link_id, "rate": link.rate})

    return {"link_rate": link_rate}
