"""What a node's clients may ask, by their certificate (`pubsub.runtime.permissions`).

A node's client requests and the permission each needs on its topic: a publication
(``PublishRequest``) needs ``publish``, a stream (``Follow``) ``subscribe``, and making the
node join or leave a topic (``JoinTopic`` / ``LeaveTopic``) ``join``; a status request
needs nothing.  A refused publication is answered as every failed one is (``PublishFailed``
with its request id, so the client library matches it), everything else with
``ErrorReply``; the code is ``permission_denied`` and nothing of the request is done.
"""

from __future__ import annotations

from pubsub.kernel.control import ErrorReply
from pubsub.kernel.message import Message
from pubsub.publications.messages import Follow, JoinTopic, LeaveTopic, PublishFailed, PublishRequest
from pubsub.runtime.identity import Identity
from pubsub.runtime.permissions import DENIED, Authority


def needed(msg: Message) -> tuple[str, str] | None:
    """The (action, topic) request `msg` needs, None when it needs none."""
    if isinstance(msg, PublishRequest):
        return "publish", msg.topic
    if isinstance(msg, Follow):
        return "subscribe", msg.topic
    if isinstance(msg, (JoinTopic, LeaveTopic)):
        return "join", msg.topic
    return None


def refusal(msg: Message, identity: Identity | None, authority: Authority) -> Message | None:
    """The answer refusing `msg` from the client holding `identity`, or None when the rules
    in force let it through."""
    need = needed(msg)
    if need is None:
        return None
    problem = authority.check(identity, *need)
    if problem is None:
        return None
    if isinstance(msg, PublishRequest):
        return PublishFailed(id=msg.id, code=DENIED, detail=problem)
    return ErrorReply(code=DENIED, detail=problem)
