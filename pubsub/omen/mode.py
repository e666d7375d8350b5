"""The `omen` overlay's entry in the registry (`pubsub.kernel.registry`): its parts, for the
shared node and supervisor daemons (``--overlay omen``), `pubsub cluster` and the tools.
Its modules are imported when a part is first used.  omen is not self-stabilizing
(docs/omen.md)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from pubsub.kernel.contracts import Mode, Overlay
from pubsub.kernel.message import Ref, kinds_of
from pubsub.kernel.registry import lazy

#: Publications spread on a general graph by flooding (or anti-entropy alone).
DISSEMINATIONS = ("flood",)


def _register_messages() -> None:
    import pubsub.omen.messages  # noqa: F401 - registers the messages


def _node_core(
    ref: Ref, supervisor: Ref, *, discover_supervisors: bool = False, dissemination: str = "flood",
    rng: random.Random, **options: Any,
) -> Any:
    """The publication layer over an `OmenOverlay` (its settings come with the supervisor's
    memberships); ValueError for a dissemination that needs a ring."""
    from pubsub.omen.node import Settings
    from pubsub.omen.overlay import OmenOverlay
    from pubsub.publications.node import PublicationNode

    if dissemination not in (*DISSEMINATIONS, "off"):
        raise ValueError(
            f"the omen overlay spreads publications by {', '.join(DISSEMINATIONS)} (or anti-entropy alone), "
            f"not {dissemination!r}: the arc broadcast needs a ring"
        )
    overlay = OmenOverlay(ref, supervisor, Settings(), random.Random(rng.random()))
    return PublicationNode(ref, overlay, dissemination=dissemination, rng=rng, **options)


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
    resilience: int | None = None,
    t_wait: int | None = None,
    sample_size: int | None = None,
    **ignored: Any,
) -> Any:
    """`OmenSupervisor` with the settings given (paper 003's where it has them); ValueError
    with peers (one supervisor keeps the membership) or a bad setting."""
    from pubsub.omen.node import Settings
    from pubsub.omen.supervisor import OmenSupervisor

    if list(peers):
        raise ValueError(
            "the omen overlay runs one supervisor, which keeps the membership: --peers and --join are the skip ring's"
        )
    default = Settings()
    settings = Settings(
        resilience=default.resilience if resilience is None else resilience,
        coverage=default.coverage if coverage is None else coverage,
        t_wait=default.t_wait if t_wait is None else t_wait,
        rho=default.rho if rho is None else rho,
        method=backup_method or default.method,
        sample_size=default.sample_size if sample_size is None else sample_size,
    )
    return OmenSupervisor(
        ref, rng=rng, settings=settings, config_budget=config_budget, probe_timeout=probe_timeout,
        journal=journal, retention=retention,
    )


def _kinds() -> tuple[str, ...]:
    from pubsub.omen import messages
    from pubsub.publications.kinds import SHARED_KINDS

    return tuple(sorted({*SHARED_KINDS, *kinds_of(messages)}))


def _no_faults(app: Any) -> dict[str, Any]:
    """No admin actions beyond the generic ones (crash, partition, drop, info)."""
    return {}


def _member_key(label: str) -> str:
    from pubsub.omen.supervisor import member_key

    return member_key(label)


OVERLAY = Overlay(
    name="omen",
    summary="a topic-connected overlay mended under churn by coordinators on an identifier circle "
    "(paper 003's OMen); NOT self-stabilizing: at most L concurrent churn events",
    package="pubsub.omen",
    node_core=_node_core,
    supervisor_core=_supervisor_core,
    node_admits=lazy("pubsub.omen.admission:node_admits"),
    supervisor_admits=lazy("pubsub.omen.admission:supervisor_admits"),
    node_faults=_no_faults,
    supervisor_faults=_no_faults,
    kinds=_kinds,
    member_key=_member_key,
    legitimate=lazy("pubsub.omen.topicviews:legitimate"),
    reports_legitimate=lazy("pubsub.omen.topicviews:reports_legitimate"),
    member_table=lazy("pubsub.omen.topicviews:member_table"),
    web_topic=lazy("pubsub.omen.topicviews:web_topic"),
    topic_tracker=lazy("pubsub.topicgraph.tracker:TopicGraphTracker"),
    status_lines=lazy("pubsub.omen.topicviews:status_lines"),
    disseminations=DISSEMINATIONS,
)

MODE = Mode(
    name="omen",
    summary=OVERLAY.summary,
    register_messages=_register_messages,
    overlay=OVERLAY,
)
