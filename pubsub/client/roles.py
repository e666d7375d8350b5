"""Which kind of daemon answered: a node, the supervisor or a SCOT broker, told from the
shape of its status reply (README, "Status JSON").

Every client command checks the role before it acts, so that a supervisor's address given
as ``--node`` (or the reverse) is a clear error instead of a wrong answer.  A reply that
names its ``role`` is taken at its word; otherwise the fields only one kind of daemon
reports decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: role -> how an error message names it.
NAMES = {
    "node": "a subscriber node",
    "supervisor": "the supervisor",
    "broker": "a SCOT broker",
    "unknown": "not a pubsub daemon this command knows",
}
#: role -> the option that takes its address.
OPTIONS = {"node": "--node", "supervisor": "--supervisor", "broker": "--broker"}


def role_of(body: Mapping[str, Any]) -> str:
    """``node``, ``supervisor``, ``broker`` or ``unknown``."""
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


def role_problem(addr: str, body: Mapping[str, Any], expected: str) -> str | None:
    """None when the status `body` from `addr` is an `expected` daemon's, else one line
    saying what `addr` is and which option its address belongs to."""
    actual = role_of(body)
    if actual == expected:
        return None
    hint = f"; give its address with {OPTIONS[actual]}" if actual in OPTIONS else ""
    return f"{addr} is {NAMES[actual]}, not {NAMES[expected]}{hint}"
