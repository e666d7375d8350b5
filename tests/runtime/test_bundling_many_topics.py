"""A Timeout's sends to one peer fit one bundle frame even for a node in thousands of topics
(issue 14, item 5): the bundle's message cap is not what splits them, and such a bundle
decodes again with every message intact."""

from __future__ import annotations

from pubsub.kernel import wire
from pubsub.kernel.control import Bundle, StatusRequest
from pubsub.kernel.message import Ref, Send
from pubsub.runtime.bundling import bundle

ME, PEER = Ref("127.0.0.1:1"), Ref("127.0.0.1:2")


def test_four_thousand_messages_to_one_peer_travel_in_one_bundle() -> None:
    sends = [Send(PEER, StatusRequest()) for _ in range(4000)]
    out, inside = bundle(sends, ME, wire.DEFAULT_MAX_FRAME)
    assert len(out) == 1 and isinstance(out[0].msg, Bundle) and len(inside) == 4000
    frame = wire.encode(out[0].msg)
    decoded = wire.decode(frame[wire.HEADER_SIZE:])
    assert isinstance(decoded, Bundle) and len(decoded.payloads) == 4000
    assert all(isinstance(wire.decode(p), StatusRequest) for p in decoded.payloads[:10])


def test_more_than_the_cap_gets_another_bundle() -> None:
    sends = [Send(PEER, StatusRequest()) for _ in range(wire.MAX_PAYLOADS + 1)]
    out, _ = bundle(sends, ME, wire.DEFAULT_MAX_FRAME)
    assert [len(s.msg.payloads) if isinstance(s.msg, Bundle) else 1 for s in out] == [wire.MAX_PAYLOADS, 1]
