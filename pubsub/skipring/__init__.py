"""The skip-ring overlay (paper 000): labels, BuildSR, its supervisor, the overlay that the
shared publication layer (`pubsub.publications`) runs on, and state corruption for tests --
no I/O.

Importing the package teaches the kernel codec the skip ring's field types
(`pubsub.skipring.fields`), so every skip-ring message is decodable once any of its modules
is imported; the publications' field types come with `pubsub.publications`.
"""

from pubsub.skipring import fields as _fields

_fields.register()
