"""Which peer may send which clique message, by the identity its TLS certificate names:
the rules of a supervised overlay (`pubsub.publications.admission`) over the clique's
messages.  A node takes member lists and probes (`CliqueMembers`, `CliquePing`) from its
supervisor only; the supervisor takes `CliqueJoin`, `CliqueLeave`, `CliquePong` and
`CliqueSuspect` for ``ref`` only from that node.
"""

from __future__ import annotations

from pubsub.clique.messages import CliqueJoin, CliqueLeave, CliqueMembers, CliquePing, CliquePong, CliqueSuspect
from pubsub.publications.admission import Rules

RULES = Rules(
    from_supervisor=(CliqueMembers, CliquePing),
    names_sender=(CliqueJoin, CliqueLeave, CliquePong, CliqueSuspect),
)
node_admits = RULES.node_admits
supervisor_admits = RULES.supervisor_admits
