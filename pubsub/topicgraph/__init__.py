"""What the topic-connected overlays share (papers 001 and 003): the overlay value -- nodes
with their topics, undirected edges, per-topic connectivity (`graph`) -- and Low-ODA's edge
choice (`lowoda`, paper 001 Alg. 1-2).  `pubsub.tco` and `pubsub.omen` both build on it; an
overlay's package may import no other overlay's, so it lives apart from both."""
