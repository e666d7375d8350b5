"""The clique overlay's entry in the registry (`pubsub.kernel.registry`): its parts, for
the shared node and supervisor daemons (``--overlay clique``), `pubsub cluster`, the
simulator and the tools.  It has no daemons, commands or launcher of its own.  Its modules
are imported when a part is first used (every process reads the registry, few run a
clique)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pubsub.kernel.contracts import Mode, Overlay
from pubsub.kernel.message import Message, Ref, kinds_of
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
    peers: Iterable[str] = (),
    peer_timeout: float | None = None,
    **ignored: Any,
) -> Any:
    """`CliqueSupervisor`; ValueError with peers: sharded supervisors are the skip ring's."""
    from pubsub.clique.supervisor import CliqueSupervisor

    if list(peers):
        raise ValueError("the clique overlay runs one supervisor: --peers and --join are the skip ring's")
    return CliqueSupervisor(ref, rng=rng, config_budget=config_budget, probe_timeout=probe_timeout, journal=journal)


def _kinds() -> tuple[str, ...]:
    """The kinds every overlay speaks (`pubsub.publications.kinds`) and the clique's own."""
    from pubsub.clique import messages
    from pubsub.publications.kinds import SHARED_KINDS

    return tuple(sorted({*SHARED_KINDS, *kinds_of(messages)}))


def _node_admits(msg: Message, role: str, name: str, supervisor: Any) -> str | None:
    from pubsub.clique.admission import node_admits

    return node_admits(msg, role, name, supervisor)


def _supervisor_admits(msg: Message, role: str, name: str) -> str | None:
    from pubsub.clique.admission import supervisor_admits

    return supervisor_admits(msg, role, name)


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


def _reports_legitimate(entries: Mapping[str, Mapping[str, Any]]) -> bool:
    """`pubsub.clique.views.reports_legitimate`: the reporting nodes' own clique."""
    from pubsub.clique.views import reports_legitimate

    return reports_legitimate(entries)


def _member_table(
    members: Mapping[str, str], states: Mapping[str, Mapping[str, Any]], name_of: Callable[[str], str]
) -> tuple[str, list[str], list[list[str]]]:
    """`pubsub.clique.views.member_table`: the members in the supervisor's order."""
    from pubsub.clique.views import member_table

    return member_table(members, states, name_of)


def _web_topic(
    topic: str, entry: Mapping[str, Any], answers: Mapping[str, Any], suspects: Iterable[str] = ()
) -> dict[str, Any]:
    """`pubsub.clique.views.web_topic`: the members evenly on the circle, the complete graph."""
    from pubsub.clique.views import web_topic

    return web_topic(topic, entry, answers, suspects)


OVERLAY = Overlay(
    name="clique",
    summary="every member a neighbour of every other: the zero-diameter baseline for small topics",
    package="pubsub.clique",
    node_core=_node_core,
    supervisor_core=_supervisor_core,
    node_admits=_node_admits,
    supervisor_admits=_supervisor_admits,
    node_faults=_no_faults,
    supervisor_faults=_no_faults,
    kinds=_kinds,
    member_key=validate_ref,
    legitimate=legitimate,
    reports_legitimate=_reports_legitimate,
    member_table=_member_table,
    web_topic=_web_topic,
    topic_tracker=None,  # the convergence analysis does not measure the clique yet
)

MODE = Mode(
    name="clique",
    summary=OVERLAY.summary,
    register_messages=_register_messages,
    overlay=OVERLAY,
)
