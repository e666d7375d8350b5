"""The skip-ring mode (paper 000): a supervisor manages membership, the subscribers of each
topic form a skip ring and carry the publications themselves.

Where its parts live: cores in `pubsub.skipring` and `pubsub.skipring.supervisor.core` /
`pubsub.skipring.supervisor.database`; daemons in `pubsub.node` and `pubsub.supervisor.app`; commands in
`pubsub.cli.skipring`; the local launcher in `pubsub.ops.localcluster`; the simulation in
`pubsub.sim`.  This module only names them for the registry (`pubsub.modes`).
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.contracts import Core, Mode


def _register_messages() -> None:
    import pubsub.skipring.messages  # noqa: F401 - registers the messages and field types
    import pubsub.skipring.retention  # noqa: F401 - registers the retention messages


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
    from pubsub.sim.skipring import Simulation

    return Simulation(*args, **kwargs)


MODE = Mode(
    name="skipring",
    summary="skip rings per topic, built by BuildSR; subscribers carry the publications",
    register_messages=_register_messages,
    make_core=_make_core,
    daemons={"node": _run_node, "supervisor": _run_supervisor},
    commands=_commands,
    local_cluster=_local_cluster,
    simulation=_simulation,
)
