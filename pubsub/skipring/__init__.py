"""The skip-ring mode's cores (paper 000): labels, BuildSR, the Patricia trie, anti-entropy,
flooding, the hand-over of publications and state corruption for tests -- no I/O.

Importing the package teaches the kernel codec the skip ring's field types
(`pubsub.skipring.fields`), so every skip-ring message is decodable once any of its modules
is imported.
"""

from pubsub.skipring import fields as _fields

_fields.register()

from pubsub.skipring import hotpath as _hotpath  # noqa: E402 - after the field types

_hotpath.register()
