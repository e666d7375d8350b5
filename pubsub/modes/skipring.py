"""The skip-ring mode (paper 000): a supervisor manages membership, the subscribers of each
topic form a skip ring and carry the publications themselves.

Where its parts live: cores in `pubsub.skipring` and `pubsub.skipring.supervisor.core` /
`pubsub.skipring.supervisor.database`; daemons in `pubsub.node` and `pubsub.supervisor.app`; commands in
`pubsub.cli.skipring` (the daemon commands in `pubsub.cli.daemons`); the local launcher in
`pubsub.ops.localcluster`; the simulation in `pubsub.sim`.  This module only names them for the
registry (`pubsub.modes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pubsub.kernel.contracts import Core, Mode, Overlay
from pubsub.kernel.message import Ref
from pubsub.kernel.registry import lazy


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


def _commands() -> list[Any]:
    from pubsub.cli import skipring

    return list(skipring.COMMANDS)


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


OVERLAY = Overlay(
    name="skipring",
    summary="skip rings per topic, built by BuildSR (paper 000)",
    package="pubsub.skipring",
    node_core=lazy("pubsub.skipring.nodecore:NodeCore"),
    supervisor_core=_supervisor_core,
    node_admits=lazy("pubsub.skipring.admission:node_admits"),
    supervisor_admits=lazy("pubsub.skipring.admission:supervisor_admits"),
    node_faults=lazy("pubsub.node.faults:node_actions"),
    supervisor_faults=lazy("pubsub.supervisor.faults:supervisor_actions"),
    kinds=_kinds,
    member_key=_member_key,
    legitimate=_legitimate,
    reports_legitimate=lazy("pubsub.skipring.statuscheck:reports_legitimate"),
    member_table=lazy("pubsub.skipring.statuscheck:member_table"),
    web_topic=lazy("pubsub.skipring.supervisor.webtopic:topic_view"),
    topic_tracker=lazy("pubsub.skipring.convergence:SkipRingTracker"),
)


MODE = Mode(
    name="skipring",
    summary="skip rings per topic, built by BuildSR; subscribers carry the publications",
    register_messages=_register_messages,
    make_core=_make_core,
    daemons={"node": lazy("pubsub.node.app:run_node"), "supervisor": lazy("pubsub.supervisor.app:run_supervisor")},
    role_names={"node": "a subscriber node", "supervisor": "the supervisor"},
    commands=_commands,
    local_cluster=lazy("pubsub.ops.localcluster:LocalCluster"),
    simulation=lazy("pubsub.sim.world:Simulation"),
    overlay=OVERLAY,
)
