"""The SCOT broker mode (paper 002): content-based brokers on a structured cyclic overlay,
routing with OctopiA or the PADRES-style baseline.

Where its parts live: cores in `broker.cores`; the daemon in `broker.app`; commands in
`broker.cli`; the local launcher in `broker.localscot`; the simulation in `broker.sim`.
This module only names them for the registry (`pubsub.modes`).
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.contracts import Core, Mode, VerbForm


def _register_messages() -> None:
    import broker.cores.control  # noqa: F401 - registers the control messages
    import broker.cores.messages  # noqa: F401 - registers the messages and field types


def _make_core(protocol: str, *args: Any, **kwargs: Any) -> Core:
    """`broker.cores.factory.make_core(protocol, topology, broker_id, ...)`: an OctopiA or
    PADRES core."""
    from broker.cores.factory import make_core

    return make_core(protocol, *args, **kwargs)


def _run_broker(*args: Any, **kwargs: Any) -> None:
    from broker.app import run_broker

    run_broker(*args, **kwargs)


def _commands() -> list[Any]:
    from broker import cli

    return list(cli.COMMANDS)


def _verb_forms() -> list[VerbForm]:
    from broker import cli

    return cli.verb_forms()


def _local_cluster(*args: Any, **kwargs: Any) -> Any:
    from broker.localscot import LocalScot

    return LocalScot(*args, **kwargs)


def _simulation(*args: Any, **kwargs: Any) -> Any:
    from broker.sim import BrokerSim

    return BrokerSim(*args, **kwargs)


MODE = Mode(
    name="scot",
    summary="SCOT brokers with OctopiA (or PADRES-style) content-based routing",
    register_messages=_register_messages,
    make_core=_make_core,
    daemons={"broker": _run_broker},
    role_names={"broker": "a SCOT broker"},
    commands=_commands,
    local_cluster=_local_cluster,
    simulation=_simulation,
    verb_forms=_verb_forms,
)
