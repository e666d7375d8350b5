"""Field validators whose character tests are C-level string methods (issue 11): they
accept exactly what their definitions say, checked over every character of the BMP."""

from __future__ import annotations

import pytest

from pubsub.kernel.wire import WireError, validate_topic
from pubsub.publications.fields import MAX_MSG_ID_CHARS, msg_id_characters, validate_msg_id


def test_message_id_characters_are_printable_ascii_without_space() -> None:
    for code in range(0x10000):
        c = chr(code)
        assert msg_id_characters(c) == ("!" <= c <= "~"), hex(code)
        assert msg_id_characters("ab" + c + "cd") == ("!" <= c <= "~"), hex(code)
    assert msg_id_characters("")


def test_message_ids_keep_their_bounds() -> None:
    assert validate_msg_id("") == ""
    assert validate_msg_id("x" * MAX_MSG_ID_CHARS) == "x" * MAX_MSG_ID_CHARS
    for bad in ("x" * (MAX_MSG_ID_CHARS + 1), "a b", "é", "tab\there", 7, None):
        with pytest.raises(WireError):
            validate_msg_id(bad)


def test_topics_refuse_exactly_the_control_characters() -> None:
    for code in range(0x10000):
        c = chr(code)
        control = code < 32 or 127 <= code < 160
        try:
            validate_topic("news" + c)
            accepted = True
        except WireError as exc:
            accepted = False
            assert exc.code == "bad_field"
        assert accepted != control, hex(code)
