"""The clique overlay's entry in the registry (`pubsub.kernel.registry`): its parts, for
the shared node and supervisor daemons (``--overlay clique``), `pubsub cluster`, the
simulator and the tools.  It has no daemons, commands or launcher of its own.  Its modules
are imported when a part is first used (every process reads the registry, few run a
clique)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from pubsub.kernel.contracts import Mode, Overlay
from pubsub.kernel.message import Ref, kinds_of
from pubsub.kernel.registry import lazy
from pubsub.kernel.wire import validate_ref


def _register_messages() -> None:
    import pubsub.clique.messages  # noqa: F401 - registers the messages


def _node_core(ref: Ref, supervisor: Ref, *, discover_supervisors: bool = False, **options: Any) -> Any:
    """The publication layer over a `CliqueOverlay` (one supervisor: nothing to discover)."""
    from pubsub.clique.overlay import CliqueOverlay
    from pubsub.publications.node import PublicationNode

    return PublicationNode(ref, CliqueOverlay(ref, supervisor), **options)


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
    **ignored: Any,
) -> Any:
    """`CliqueSupervisor`; ValueError with peers: sharded supervisors are the skip ring's."""
    from pubsub.clique.supervisor import CliqueSupervisor

    if list(peers):
        raise ValueError("the clique overlay runs one supervisor: --peers and --join are the skip ring's")
    return CliqueSupervisor(
        ref, rng=rng, config_budget=config_budget, probe_timeout=probe_timeout, journal=journal, retention=retention
    )


def _kinds() -> tuple[str, ...]:
    """The kinds every overlay speaks (`pubsub.publications.kinds`) and the clique's own."""
    from pubsub.clique import messages
    from pubsub.publications.kinds import SHARED_KINDS

    return tuple(sorted({*SHARED_KINDS, *kinds_of(messages)}))


def _no_faults(app: Any) -> dict[str, Any]:
    """No admin actions beyond the generic ones (crash, partition, drop, info)."""
    return {}


def legitimate(supervisor_body: Mapping[str, Any], states: Mapping[str, Any], topic: str) -> list[str]:
    """The clique is legitimate when every member the supervisor lists reports itself
    configured with exactly that list (same order) and nothing unreachable, and no other
    node reports itself configured in the topic."""
    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    members = [str(m.get("ref")) for m in entry.get("members", [])]
    problems: list[str] = []
    if len(set(members)) != len(members):
        problems.append("the supervisor lists a member twice")
    for ref in members:
        state = states.get(ref)
        if state is None:
            problems.append(f"{ref}: member did not report its state for this topic")
        elif state.get("members") != members or not state.get("configured"):
            problems.append(f"{ref}: holds {state.get('members')!r}, the supervisor lists {members!r}")
        elif state.get("unreachable"):
            problems.append(f"{ref}: cannot reach {state.get('unreachable')!r}")
    for ref, state in states.items():
        if ref not in members and state.get("configured"):
            problems.append(f"{ref}: configured in the topic, but not a member")
    return problems


OVERLAY = Overlay(
    name="clique",
    summary="every member a neighbour of every other: the zero-diameter baseline for small topics",
    package="pubsub.clique",
    node_core=_node_core,
    supervisor_core=_supervisor_core,
    node_admits=lazy("pubsub.clique.admission:node_admits"),
    supervisor_admits=lazy("pubsub.clique.admission:supervisor_admits"),
    node_faults=_no_faults,
    supervisor_faults=_no_faults,
    kinds=_kinds,
    member_key=validate_ref,
    legitimate=legitimate,
    reports_legitimate=lazy("pubsub.clique.views:reports_legitimate"),
    member_table=lazy("pubsub.clique.views:member_table"),
    web_topic=lazy("pubsub.clique.views:web_topic"),
    topic_tracker=None,  # the convergence analysis does not measure the clique yet
)

MODE = Mode(
    name="clique",
    summary=OVERLAY.summary,
    register_messages=_register_messages,
    overlay=OVERLAY,
)
