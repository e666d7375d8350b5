"""The skip ring's side of the runtime's publish quotas (`pubsub.runtime.limits`): which
client requests are publications and how big, and the answer to one refused by a quota
(a `PublishFailed` with the quota's code, which the client library raises as
`PublishError` with that code: ``quota_rate``, ``quota_bytes`` or ``quota_size``)."""

from __future__ import annotations

from pubsub.kernel.message import Message
from pubsub.publications.messages import PublishFailed, PublishRequest


def publication_size(msg: Message) -> int | None:
    """The payload size of a publication request, None for any other request."""
    return len(msg.payload) if isinstance(msg, PublishRequest) else None


def over_quota(msg: Message, code: str, detail: str) -> Message:
    """The answer to publication request `msg` refused by a quota."""
    assert isinstance(msg, PublishRequest)
    return PublishFailed(msg.id, code, f"refused by the publish quota: {detail}")
