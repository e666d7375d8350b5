"""Which peer may send which `omen` message, by the identity its TLS certificate names: the
rules of a supervised overlay (`pubsub.publications.admission`) over omen's messages.  A node
takes memberships, churn events and probes from its supervisor only; every message that
names its node (``ref`` or ``sender``) is taken only from that node."""

from __future__ import annotations

from pubsub.omen.messages import (
    OmenChurn,
    OmenDone,
    OmenEdges,
    OmenEdgesAck,
    OmenGone,
    OmenGossip,
    OmenJoin,
    OmenLeave,
    OmenMembership,
    OmenMend,
    OmenPing,
    OmenPong,
    OmenShadowAnswer,
    OmenShadowRequest,
    OmenShuffle,
    OmenSuspect,
)
from pubsub.publications.admission import Rules

RULES = Rules(
    from_supervisor=(OmenMembership, OmenChurn, OmenPing, OmenGone),
    names_sender=(OmenJoin, OmenLeave, OmenMend, OmenSuspect, OmenPong, OmenGossip, OmenShuffle, OmenShadowRequest,
                  OmenShadowAnswer, OmenEdges, OmenEdgesAck, OmenDone),
)
node_admits = RULES.node_admits
supervisor_admits = RULES.supervisor_admits
