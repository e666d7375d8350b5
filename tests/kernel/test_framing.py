"""The sans-I/O frame decoder (`pubsub.kernel.framing`), without any socket."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from pubsub.kernel import wire
from pubsub.kernel.control import Hello, Reply
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Ref
from pubsub.kernel.wire import WireError


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_many_frames_in_one_read_come_out_in_order() -> None:
    payloads = [b"a", b"", b"bc" * 100, b"d"]
    decoder = FrameDecoder()
    assert decoder.feed(b"".join(frame(p) for p in payloads)) == payloads
    assert decoder.pending == 0 and not decoder.in_frame


def test_a_frame_fed_one_byte_at_a_time() -> None:
    data = frame(b"hello world")
    decoder = FrameDecoder()
    out: list[bytes] = []
    for i in range(len(data)):
        got = decoder.feed(data[i : i + 1])
        assert decoder.in_frame == (i < len(data) - 1)
        out.extend(got)
    assert out == [b"hello world"]


def test_partial_header_then_partial_body_then_rest_with_the_next_frame() -> None:
    data = frame(b"0123456789") + frame(b"next")
    decoder = FrameDecoder()
    assert decoder.feed(data[:2]) == []
    assert decoder.expected is None and decoder.in_frame
    assert decoder.feed(data[2:9]) == []
    assert decoder.expected == 10
    assert decoder.pending == 9
    assert decoder.feed(data[9:]) == [b"0123456789", b"next"]
    assert not decoder.in_frame


def test_oversize_prefix_is_refused_before_its_body_arrives() -> None:
    decoder = FrameDecoder(max_frame=100)
    assert decoder.feed(struct.pack(">I", 101)) == []
    assert isinstance(decoder.error, WireError) and decoder.error.code == "frame_too_large"
    assert decoder.pending == 0  # nothing of the announced body was kept
    # the stream cannot be resynchronised: everything after is discarded
    assert decoder.feed(frame(b"valid-looking")) == []
    assert decoder.pending == 0


def test_oversize_prefix_that_is_text_names_another_protocol() -> None:
    """An HTTP server's answer read as a frame header announces 1,213,486,160 bytes
    ("HTTP"): the error quotes the text instead of leaving the number to be decoded."""
    decoder = FrameDecoder(max_frame=1 << 20)
    assert decoder.feed(b"HTTP/1.1 400 Bad Request\r\n") == []
    assert decoder.error is not None and decoder.error.code == "frame_too_large"
    assert "'HTTP'" in decoder.error.detail and "another protocol" in decoder.error.detail
    binary = FrameDecoder(max_frame=8)
    assert binary.feed(struct.pack(">I", 1 << 31)) == []
    assert binary.error is not None and "another protocol" not in binary.error.detail


def test_oversize_prefix_after_good_frames_in_the_same_read() -> None:
    decoder = FrameDecoder(max_frame=8)
    assert decoder.feed(frame(b"ok") + struct.pack(">I", 1 << 31) + b"zz") == [b"ok"]
    assert decoder.error is not None and decoder.error.code == "frame_too_large"


def test_oversize_prefix_split_across_reads() -> None:
    decoder = FrameDecoder(max_frame=8)
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.error is None
    assert decoder.feed(b"\x01\x00") == []
    assert decoder.error is not None and decoder.error.code == "frame_too_large"


def test_oversize_prefix_after_a_partial_frame() -> None:
    decoder = FrameDecoder(max_frame=8)
    assert decoder.feed(frame(b"1234")[:6]) == []
    assert decoder.feed(b"34" + struct.pack(">I", 9)) == [b"1234"]
    assert decoder.error is not None


def test_frame_of_exactly_the_maximum_passes() -> None:
    decoder = FrameDecoder(max_frame=5)
    assert decoder.feed(frame(b"12345")) == [b"12345"]


def test_decoded_frames_are_real_messages() -> None:
    msgs = [Hello(ref=Ref("127.0.0.1:5"), role="peer"), Reply(body={"ok": True})]
    data = b"".join(wire.encode(m) for m in msgs)
    decoder = FrameDecoder()
    assert [wire.decode(p) for p in decoder.feed(data[:7]) + decoder.feed(data[7:])] == msgs


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20),
)
def test_any_split_of_the_stream_gives_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frame(p) for p in payloads)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for start, end in zip(points, points[1:], strict=False):
        out.extend(decoder.feed(data[start:end]))
    assert out == payloads
    assert not decoder.in_frame
