"""The `tco` messages on the wire: what the codec lets through and what it refuses with
``bad_field`` (the runtime counts it and answers with an ErrorReply carrying the code)."""

from __future__ import annotations

import msgpack
import pytest

from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic
from pubsub.kernel.wire import WireError
from pubsub.tco.messages import (
    MAX_PEERS,
    MAX_TOPICS,
    Neighbourhood,
    Peers,
    TcoNotNeighbour,
    TcoSubscribe,
    TcoTable,
    TopicSet,
)


def _payload(body: dict[str, object]) -> bytes:
    return msgpack.packb({"v": wire.PROTOCOL_VERSION, **body}, use_bin_type=True)


def test_every_tco_message_survives_the_round_trip() -> None:
    table = TcoTable(
        TopicSet((Topic("a"), Topic("b"))),
        Neighbourhood(((Ref("h:1"), TopicSet((Topic("a"),))),)),
        Peers((Ref("h:2"),)),
        Peers(()),
    )
    for msg in (table, TcoTable(None, Neighbourhood(()), Peers(()), Peers(())),
                TcoSubscribe(Ref("h:1"), TopicSet(())), TcoNotNeighbour(Topic("a"), Ref("h:1"))):
        frame = wire.encode(msg)
        assert wire.decode(frame[wire.HEADER_SIZE:]) == msg


@pytest.mark.parametrize(
    "body",
    [
        {"t": "tco_subscribe", "ref": "h:1", "topics": ["a", "a"]},
        {"t": "tco_subscribe", "ref": "h:1", "topics": "a"},
        {"t": "tco_subscribe", "ref": "h:1", "topics": [f"t{i}" for i in range(MAX_TOPICS + 1)]},
        {"t": "tco_subscribe", "ref": "nohost", "topics": []},
        {"t": "tco_table", "topics": [], "neighbours": [["h:1"]], "backups": [], "primaries": []},
        {"t": "tco_table", "topics": [], "neighbours": [["h:1", "a"]], "backups": [], "primaries": []},
        {"t": "tco_table", "topics": [], "neighbours": [], "backups": ["x"], "primaries": []},
        {"t": "tco_table", "topics": [], "neighbours": [], "backups": [],
         "primaries": ["h:1"] * (MAX_PEERS + 1)},
        {"t": "tco_table", "topics": ["a"], "neighbours": [], "backups": []},
    ],
    ids=["topic-twice", "not-a-list", "too-many-topics", "bad-ref", "short-pair", "topics-not-a-list",
         "bad-backup", "too-many-primaries", "missing-field"],
)
def test_malformed_tco_messages_are_refused_by_the_codec(body: dict[str, object]) -> None:
    with pytest.raises(WireError) as refused:
        wire.decode(_payload(body))
    assert refused.value.code in {"bad_field", "missing_field"}
