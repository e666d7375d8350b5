"""Which peer may send which `tco` message, by the identity its TLS certificate names: the
rules of a supervised overlay (`pubsub.publications.admission`) over `tco`'s messages.  A
node takes its table and probes (`TcoTable`, `TcoPing`) from its supervisor only and a
refusal (`TcoNotNeighbour`) only from the node it names; the supervisor takes
`TcoSubscribe`, `TcoPong` and `TcoSuspect` for ``ref`` only from that node.
"""

from __future__ import annotations

from pubsub.publications.admission import Rules
from pubsub.tco.messages import TcoNotNeighbour, TcoPing, TcoPong, TcoSubscribe, TcoSuspect, TcoTable

RULES = Rules(
    from_supervisor=(TcoTable, TcoPing),
    names_sender=(TcoSubscribe, TcoPong, TcoSuspect, TcoNotNeighbour),
)
node_admits = RULES.node_admits
supervisor_admits = RULES.supervisor_admits
