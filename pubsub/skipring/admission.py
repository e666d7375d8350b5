"""Which peer may send which skip-ring message, by the identity its TLS certificate names.

With TLS on, the runtime knows who is at the other end of every peer connection (the role
and name of its certificate, `pubsub.runtime.identity`) and asks the daemon's application
before handling each message.  These are the skip ring's answers:

* at a node, configuration (``SetData``, ``Retention``), liveness probes (``Ping``) and hand-over answers
  (``MemberIs``) come only from the node's own supervisor; everything else (BuildSR,
  anti-entropy, publications, hand-overs) only from other nodes;
* at the supervisor, everything comes from nodes only, and what names its sender
  (``Subscribe`` / ``Unsubscribe`` / ``Pong`` / ``GetSupervisors`` for ``ref``) only from
  that node: only the holder of a node certificate joins a ring, and only X unsubscribes X;
* sharded supervisors (`pubsub.kernel.shards`): a ``SupervisorBeat`` only from the
  supervisor it names, and at a node the live set (``Supervisors``) only from the
  supervisor it names.  "The node's own supervisor" above is then the topic's owner (for
  ``Ping``, which names no topic: any live supervisor), `NodeCore.admitted_supervisor`.

Pure functions of (message, role, name): tested directly (tests/runtime/test_identity.py).
"""

from __future__ import annotations

from pubsub.kernel.message import Message, kinds_of
from pubsub.kernel.shards import GetSupervisors, SupervisorBeat, Supervisors
from pubsub.publications.kinds import SHARED_KINDS
from pubsub.publications.messages import MemberIs
from pubsub.publications.retention import Retention
from pubsub.skipring import messages
from pubsub.skipring.messages import Ping, Pong, SetData, Subscribe, Unsubscribe

#: Every message kind of the skip ring's daemons (nodes and supervisors): those every overlay
#: speaks (`pubsub.publications.kinds`) and BuildSR's.  Their runtime's message and byte counters report each from
#: the start (`pubsub.runtime.host.Instruments`); tests/telemetry/test_metrics.py checks that
#: every ``@message`` of pubsub/ is here.
KINDS = tuple(sorted({*SHARED_KINDS, *kinds_of(messages)}))

#: Messages a node accepts from its supervisor only.
FROM_SUPERVISOR = (SetData, Ping, MemberIs, Retention)
#: Supervisor messages that name their sender in ``ref``.
NAMES_SENDER = (Subscribe, Unsubscribe, Pong, GetSupervisors)


def node_admits(msg: Message, role: str, name: str, supervisor: str) -> str | None:
    """Why a node whose supervisor is `supervisor` refuses `msg` from the `role` `name`, or
    None when it accepts it."""
    if isinstance(msg, Supervisors):
        if role == "supervisor" and name == msg.ref:
            return None
        return f"{msg.kind} naming {msg.ref} is accepted only from that supervisor, not from {role} {name}"
    if isinstance(msg, FROM_SUPERVISOR):
        if role == "supervisor" and name == supervisor:
            return None
        return f"{msg.kind} is accepted only from the supervisor {supervisor}, not from {role} {name}"
    if role != "node":
        return f"{msg.kind} is accepted only from nodes, not from {role} {name}"
    return None


def supervisor_admits(msg: Message, role: str, name: str) -> str | None:
    """Why the supervisor refuses `msg` from the `role` `name`, or None."""
    if isinstance(msg, SupervisorBeat):
        if role == "supervisor" and name == msg.ref:
            return None
        return f"{msg.kind} for {msg.ref} is accepted only from that supervisor, not from {role} {name}"
    if role != "node":
        return f"{msg.kind} is accepted only from nodes, not from {role} {name}"
    if isinstance(msg, NAMES_SENDER) and msg.ref != name:
        return f"{msg.kind} for {msg.ref} is accepted only from {msg.ref}, not from {name}"
    return None
