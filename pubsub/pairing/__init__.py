"""Paper 004's pairing protocol (Angluin, Aspnes, Chen, Wu, Yin: "Fast Construction of
Overlay Networks", §3.1), as pure state machines: no I/O, no clock, randomness from a
seeded `random.Random` handed in, every message to send returned as data.

The project's copy of the paper ends inside §3.1.1, in the propose daemon, just after its
PROBED case.  What is here is what that copy specifies, plus what its state descriptions
force where it stops; every such inference says INFERRED in its docstring and is listed in
docs/pairing.md.  Nothing here builds or claims §3.2-3.5 (the Patricia-tree merge, the
supernode simulation, the ring, churn).

* `pubsub.pairing.messages`: the message kinds (probe, accept, reject, pair, no_pair,
  propose, reject_propose, paired) and the (sender, receiver, kind, identifier) tuple of §2.
* `pubsub.pairing.states`: the five states of §3.1.1, the coin's two directions and where
  the main thread is.
* `pubsub.pairing.node`: one node's variables (`PairingNode`).
* `pubsub.pairing.mainthread`: the main thread, lines 1-7, with the successor pairing of
  line 3 (`pair_successors`).
* `pubsub.pairing.probe`: the probe daemon.
* `pubsub.pairing.propose`: the propose daemon.
* `pubsub.pairing.notices`: the pair and no_pair daemons (INFERRED: the copy ends first).
* `pubsub.pairing.protocol`: the entry points, `begin` and `handle`.
* `pubsub.pairing.outcome`: what a finished phase must be (a matching, nobody left waiting).

The drivers that run it, synchronously and asynchronously, are `pubsub.sim.pairing`.
"""
