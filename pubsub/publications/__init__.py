"""The shared publication layer: what every overlay's nodes run on top of their overlay.

An overlay (the skip ring of paper 000, the clique, the topic-connected overlays) keeps each
topic's membership and neighbours; this layer stores and carries the publications over
them -- the Patricia-trie anti-entropy (paper 000 Alg. 5), the arc broadcast and
flooding, publishing for clients with its hand-over, each publisher's order, retention --
and reaches the overlay only through the contract of `pubsub.publications.overlay`.
`pubsub.publications.node.PublicationNode` is the node core that composes the two.

Importing the package teaches the kernel codec the layer's field types
(`pubsub.publications.fields`) and its compiled hot path (`pubsub.publications.hotpath`), so
every publication message is decodable once any of its modules is imported.
"""

from pubsub.publications import fields as _fields

_fields.register()

from pubsub.publications import hotpath as _hotpath  # noqa: E402 - after the field types

_hotpath.register()
