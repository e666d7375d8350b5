"""Topic-connected overlays (paper 001, Chen, Jacobsen and Vitenberg: "Reinforce Your Overlay
with Shadows") -- the algorithms, pure and without I/O.

* `pubsub.topicgraph.graph`: an overlay G(V, E) over nodes with topics, and its TC-components per
  topic (§III: topic-connected when every topic induces at most one component).
* `pubsub.topicgraph.lowoda`: Low-ODA (Alg. 1) and its edge selection, `construct_low_edges`
  (Alg. 2) with `find_low_edge` (ρ).
* `pubsub.tco.backups`: backup sets with coverage factor λ, greedily (Alg. 11) or by the
  primal-dual method (Alg. 12); primaries are the exact reverse of backups (Struct 5).
* `pubsub.tco.dynamic`: ShadowDynAlg (Alg. 6-10) and NaiveDynAlg (Alg. 3-4), the repairs on a
  join and a leave, with what each changed.

This is the first part of issue 44 (the `tco` overlay): the supervised mode, its messages and
its registry line come on top of these cores.
"""
