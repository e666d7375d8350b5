"""The skip-ring mode (paper 000): a supervisor manages membership, the subscribers of each
topic form a skip ring and carry the publications themselves.

Where its parts live: cores in `pubsub.skipring` and `pubsub.skipring.supervisor.core` /
`pubsub.skipring.supervisor.database`; daemons in `pubsub.node` and `pubsub.supervisor.app`; commands in
`pubsub.cli.skipring` (the daemon commands in `pubsub.cli.daemons`); the local launcher in
`pubsub.ops.localcluster`; the simulation in `pubsub.sim`.  This module only names them for the
registry (`pubsub.modes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pubsub.kernel.contracts import Core, Mode, Overlay, TopicTracker
from pubsub.kernel.message import Message, Ref


def _register_messages() -> None:
    import pubsub.publications.retention  # noqa: F401 - registers the retention messages
    import pubsub.skipring.messages  # noqa: F401 - registers the messages and field types


def _make_core(role: str, *args: Any, **kwargs: Any) -> Core:
    """role "node": `NodeCore(ref, supervisor, ...)`; role "supervisor": `SupervisorCore`."""
    if role == "node":
        from pubsub.skipring.nodecore import NodeCore

        return NodeCore(*args, **kwargs)
    if role == "supervisor":
        from pubsub.skipring.supervisor.core import SupervisorCore

        return SupervisorCore(*args, **kwargs)
    raise ValueError(f"the skip ring has no {role!r} core (node, supervisor)")


def _run_node(*args: Any, **kwargs: Any) -> None:
    from pubsub.node.app import run_node

    run_node(*args, **kwargs)


def _run_supervisor(*args: Any, **kwargs: Any) -> None:
    from pubsub.supervisor.app import run_supervisor

    run_supervisor(*args, **kwargs)


def _commands() -> list[Any]:
    from pubsub.cli import skipring

    return list(skipring.COMMANDS)


def _local_cluster(*args: Any, **kwargs: Any) -> Any:
    from pubsub.ops.localcluster import LocalCluster

    return LocalCluster(*args, **kwargs)


def _simulation(*args: Any, **kwargs: Any) -> Any:
    from pubsub.sim.world import Simulation

    return Simulation(*args, **kwargs)


def _node_core(ref: Ref, supervisor: Ref, **options: Any) -> Any:
    """`pubsub.skipring.nodecore.NodeCore`: the publication layer over BuildSR."""
    from pubsub.skipring.nodecore import NodeCore

    return NodeCore(ref, supervisor, **options)


def _supervisor_core(
    ref: Ref, *, peers: Iterable[str] = (), peer_timeout: float | None = None, **options: Any
) -> Any:
    """`SupervisorCore` (Alg. 3, 4), behind the sharded supervisors' wrapper
    (`pubsub.skipring.supervisor.sharding`) when it is a daemon's: `peers` may be empty,
    the wrapper answers the live-set questions of the nodes either way."""
    from pubsub.skipring.supervisor.core import SupervisorCore

    core = SupervisorCore(ref, **options)
    if peer_timeout is None:
        return core
    from pubsub.skipring.supervisor.sharding import ShardedSupervisor

    return ShardedSupervisor(core, peers, dead_after=peer_timeout)


def _node_admits(msg: Message, role: str, name: str, supervisor: Any) -> str | None:
    from pubsub.skipring.admission import node_admits

    return node_admits(msg, role, name, supervisor)


def _supervisor_admits(msg: Message, role: str, name: str) -> str | None:
    from pubsub.skipring.admission import supervisor_admits

    return supervisor_admits(msg, role, name)


def _node_faults(app: Any) -> dict[str, Any]:
    from pubsub.node.faults import node_actions

    return node_actions(app)


def _supervisor_faults(app: Any) -> dict[str, Any]:
    from pubsub.supervisor.faults import supervisor_actions

    return supervisor_actions(app)


def _kinds() -> tuple[str, ...]:
    """The kernel's and the skip ring's kinds (`pubsub.skipring.admission.KINDS`)."""
    from pubsub.skipring.admission import KINDS

    return KINDS


def _member_key(key: str) -> str:
    """A stored key is a label's bits (`pubsub.skipring.fields.validate_label`)."""
    from pubsub.skipring.fields import validate_label

    return validate_label(key).bits


def _legitimate(supervisor_body: Mapping[str, Any], states: Mapping[str, Any], topic: str) -> list[str]:
    """The ring agrees with the supervisor's membership, and its database is legitimate
    (`pubsub.skipring.statuscheck.ring_problems`)."""
    from pubsub.ops.members import members_of
    from pubsub.skipring.statuscheck import ring_problems

    entry = (supervisor_body.get("topics") or {}).get(topic) or {}
    problems = ring_problems(members_of(supervisor_body, topic), states)
    if not entry.get("legitimate_database"):
        problems.insert(0, "the supervisor's database is not legitimate")
    return problems


def _reports_legitimate(entries: Mapping[str, Mapping[str, Any]]) -> bool:
    """`pubsub.skipring.statuscheck.reports_legitimate`: the reporting nodes' own SR(n)."""
    from pubsub.skipring.statuscheck import reports_legitimate

    return reports_legitimate(entries)


def _member_table(
    members: Mapping[str, str], states: Mapping[str, Mapping[str, Any]], name_of: Callable[[str], str]
) -> tuple[str, list[str], list[list[str]]]:
    """`pubsub.skipring.statuscheck.member_table`: the ring in ring order."""
    from pubsub.skipring.statuscheck import member_table

    return member_table(members, states, name_of)


def _web_topic(
    topic: str, entry: Mapping[str, Any], answers: Mapping[str, Any], suspects: Iterable[str] = ()
) -> dict[str, Any]:
    """`pubsub.skipring.supervisor.webtopic.topic_view`: judged against the ideal SR(n)."""
    from pubsub.skipring.supervisor.webtopic import topic_view

    return topic_view(topic, entry, answers, suspects)


def _topic_tracker() -> TopicTracker:
    """`pubsub.skipring.convergence.SkipRingTracker`: legitimacy of SR(n), incrementally."""
    from pubsub.skipring.convergence import SkipRingTracker

    return SkipRingTracker()


OVERLAY = Overlay(
    name="skipring",
    summary="skip rings per topic, built by BuildSR (paper 000)",
    package="pubsub.skipring",
    node_core=_node_core,
    supervisor_core=_supervisor_core,
    node_admits=_node_admits,
    supervisor_admits=_supervisor_admits,
    node_faults=_node_faults,
    supervisor_faults=_supervisor_faults,
    kinds=_kinds,
    member_key=_member_key,
    legitimate=_legitimate,
    reports_legitimate=_reports_legitimate,
    member_table=_member_table,
    web_topic=_web_topic,
    topic_tracker=_topic_tracker,
)


MODE = Mode(
    name="skipring",
    summary="skip rings per topic, built by BuildSR; subscribers carry the publications",
    register_messages=_register_messages,
    make_core=_make_core,
    daemons={"node": _run_node, "supervisor": _run_supervisor},
    role_names={"node": "a subscriber node", "supervisor": "the supervisor"},
    commands=_commands,
    local_cluster=_local_cluster,
    simulation=_simulation,
    overlay=OVERLAY,
)
