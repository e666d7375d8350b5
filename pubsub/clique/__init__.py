"""The clique overlay: every member of a topic is a neighbour of every other.

The supervisor keeps each topic's membership and hands every member the member list, a
budgeted number of members per topic per Timeout in round robin (as the skip ring's
supervisor hands out SetData); the members carry the publications over the complete graph
with the shared publication layer (`pubsub.publications`) unchanged: the arc broadcast
reaches every member in one hop (n - 1 messages, diameter 0 beyond the publisher's own
hop), and anti-entropy exchanges with a random member.  It is the zero-diameter baseline of
the comparisons between overlays, and honest for small topics: a member's degree is n - 1,
and the member list travels whole (at most `pubsub.clique.messages.MAX_MEMBERS`).

* `pubsub.clique.messages`: its wire kinds (``clique_*``);
* `pubsub.clique.overlay`: `CliqueOverlay`, the node side (`NodeOverlay`);
* `pubsub.clique.supervisor`: `CliqueSupervisor`, the supervisor core;
* `pubsub.clique.admission`: who may send what, with TLS;
* `pubsub.clique.views`: a topic judged and shown from status reports (the experiment
  runner's check, the demo's table, the supervisor's web view);
* `pubsub.clique.mode`: the registry's entry (`pubsub.kernel.registry`).
"""
