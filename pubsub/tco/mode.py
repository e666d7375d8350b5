"""The `tco` overlay's entry in the registry (`pubsub.kernel.registry`): its parts, for the
shared node and supervisor daemons (``--overlay tco``), `pubsub cluster`, the simulator and
the tools.  Its modules are imported when a part is first used."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from pubsub.kernel.contracts import Mode, Overlay
from pubsub.kernel.message import Ref, kinds_of
from pubsub.kernel.registry import lazy

#: How publications may spread on a general graph: flooding (or anti-entropy alone); the
#: arc broadcast needs a ring.
DISSEMINATIONS = ("flood",)


def _register_messages() -> None:
    import pubsub.tco.messages  # noqa: F401 - registers the messages


def _node_core(
    ref: Ref, supervisor: Ref, *, discover_supervisors: bool = False, dissemination: str = "flood", **options: Any
) -> Any:
    """The publication layer over a `TcoOverlay` (one supervisor: nothing to discover);
    ValueError for a dissemination that needs a ring."""
    from pubsub.publications.node import PublicationNode
    from pubsub.tco.overlay import TcoOverlay

    if dissemination not in (*DISSEMINATIONS, "off"):
        raise ValueError(
            f"the tco overlay spreads publications by {', '.join(DISSEMINATIONS)} (or anti-entropy alone), "
            f"not {dissemination!r}: the arc broadcast needs a ring"
        )
    return PublicationNode(ref, TcoOverlay(ref, supervisor), dissemination=dissemination, **options)


def _supervisor_core(
    ref: Ref,
    *,
    rng: random.Random,
    config_budget: int = 1,
    probe_timeout: float = 2.0,
    journal: bool = True,
    retention: Any = None,
    peers: Iterable[str] = (),
    peer_timeout: float | None = None,
    rho: float | None = None,
    coverage: int | None = None,
    backup_method: str | None = None,
    **ignored: Any,
) -> Any:
    """`TcoSupervisor` (ρ, λ and the backup method: the paper's defaults unless given);
    ValueError with peers (one supervisor keeps the whole overlay) or a bad setting."""
    from pubsub.tco.backups import DEFAULT_LAMBDA
    from pubsub.tco.supervisor import TcoSupervisor
    from pubsub.topicgraph.lowoda import DEFAULT_RHO

    if list(peers):
        raise ValueError(
            "the tco overlay runs one supervisor, which keeps the whole overlay: --peers and --join are the skip ring's"
        )
    return TcoSupervisor(
        ref, rng=rng, config_budget=config_budget, probe_timeout=probe_timeout, journal=journal, retention=retention,
        rho=DEFAULT_RHO if rho is None else rho,
        coverage=DEFAULT_LAMBDA if coverage is None else coverage,
        method=backup_method or "primal-dual",
    )


def _kinds() -> tuple[str, ...]:
    """The kinds every overlay speaks (`pubsub.publications.kinds`) and `tco`'s own."""
    from pubsub.publications.kinds import SHARED_KINDS
    from pubsub.tco import messages

    return tuple(sorted({*SHARED_KINDS, *kinds_of(messages)}))


def _no_faults(app: Any) -> dict[str, Any]:
    """No admin actions beyond the generic ones (crash, partition, drop, info)."""
    return {}


def _member_key(label: str) -> str:
    from pubsub.tco.supervisor import member_key

    return member_key(label)


OVERLAY = Overlay(
    name="tco",
    summary="a topic-connected overlay kept by the supervisor (paper 001's Shadows): few distinct peers "
    "for nodes in many topics",
    package="pubsub.tco",
    node_core=_node_core,
    supervisor_core=_supervisor_core,
    node_admits=lazy("pubsub.tco.admission:node_admits"),
    supervisor_admits=lazy("pubsub.tco.admission:supervisor_admits"),
    node_faults=_no_faults,
    supervisor_faults=lazy("pubsub.supervisor.faults:supervisor_actions"),
    kinds=_kinds,
    member_key=_member_key,
    legitimate=lazy("pubsub.tco.views:legitimate"),
    reports_legitimate=lazy("pubsub.tco.views:reports_legitimate"),
    member_table=lazy("pubsub.tco.views:member_table"),
    web_topic=lazy("pubsub.tco.views:web_topic"),
    topic_tracker=lazy("pubsub.topicgraph.tracker:TopicGraphTracker"),
    status_lines=lazy("pubsub.tco.views:status_lines"),
    disseminations=DISSEMINATIONS,
)

MODE = Mode(
    name="tco",
    summary=OVERLAY.summary,
    register_messages=_register_messages,
    overlay=OVERLAY,
)
