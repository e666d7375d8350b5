"""Which kind of daemon answered -- one of the registered modes' daemon roles (a node, the
supervisor, a SCOT broker) -- told from its status reply (README, "Status JSON").

Every client command checks the role before it acts, so that a supervisor's address given
as ``--node`` (or the reverse) is a clear error instead of a wrong answer; the error names
the option the address belongs to only if the command has it.  A reply that
names its ``role`` is taken at its word; otherwise the fields only one kind of daemon
reports decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pubsub.kernel import registry

#: role -> how an error message names it (the registered modes' `Mode.role_names`).
NAMES = {**registry.role_names(), "unknown": "not a pubsub daemon this command knows"}
#: role -> the option that takes its address.
OPTIONS = {role: f"--{role}" for role in registry.daemon_roles()}


def role_of(body: Mapping[str, Any]) -> str:
    """A registered daemon role (``node``, ``supervisor``, ``broker``) or ``unknown``; a
    reply without a ``role`` (a daemon older than the field) is told by the fields only one
    kind reports."""
    named = body.get("role")
    if isinstance(named, str) and named in OPTIONS:
        return named
    if "supervisor" in body and "publications" in body:
        return "node"
    if "config_budget" in body and "suspects" in body:
        return "supervisor"
    if "links" in body and "tables" in body:
        return "broker"
    return "unknown"


def command_options() -> frozenset[str]:
    """The options of the `pubsub` command running now (none outside a command: a program
    using the client library)."""
    import click  # the CLI's library, installed with this package

    ctx = click.get_current_context(silent=True)
    return frozenset() if ctx is None else frozenset(o for p in ctx.command.params for o in p.opts)


def role_problem(addr: str, body: Mapping[str, Any], expected: str) -> str | None:
    """None when the status `body` from `addr` is an `expected` daemon's, else one line
    saying what `addr` is and which option of the running command its address belongs to
    (`command_options`); without such an option, whose address is needed instead."""
    actual = role_of(body)
    if actual == expected:
        return None
    option = OPTIONS.get(actual)
    if option is not None and option in command_options():
        hint = f"; give its address with {option}"
    else:
        hint = f"; {NAMES[expected]}'s address is needed here"
    return f"{addr} is {NAMES[actual]}, not {NAMES[expected]}{hint}"
