"""Integration: hostile bytes on raw TCP sockets against running daemons of both kinds.

A supervisor and four nodes (real processes, `LocalCluster`) first converge to exact skip
rings for two topics.  Then 300 cases, generated from a fixed seed, go to the supervisor and
to every node, each on its own connection: random bytes, random frame bodies, frames cut
short, length prefixes over the limit, undecodable msgpack, frames that are not maps, wrong
versions, unknown message types, well-formed messages with nonsense fields (wrong types,
labels of 200 bits, out-of-range and non-integer numbers, bad references, huge strings,
maps nested too deep), a missing or repeated Hello, many bad frames on one connection, and
a few valid but useless frames.

For every case the error codes the daemon must count are derived by `expected_errors`, a
small model of the runtime's reader written from the rules in `pubsub.runtime.inbound` (frame by frame:
header, length limit, body, decode, Hello first).  Decoding a complete frame is delegated
to `pubsub.kernel.wire.decode` -- the codec has its own tests -- while every hand-made case also
states the code it is built to provoke, and the two must agree.

After each case the test reads the connection to its end, so by the time of the final
status the daemon has handled everything.  Then:

* every daemon process is alive and answers status;
* per daemon, each error counter grew by exactly what its cases provoke, every error the
  daemon could answer was answered with an ErrorReply carrying its code, and no core
  exception (``handler_error``) or runtime failure occurred;
* each daemon's log names the error codes, in fewer lines than the bad frames it got
  (logging is rate-limited per peer and code);
* both rings are still exactly SR(n) by the independent oracle.
"""

from __future__ import annotations

import random
import socket
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
import pytest

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello, StatusRequest
from pubsub.kernel.message import Ref, Topic
from pubsub.ops.localcluster import LocalCluster
from pubsub.skipring import fields as skipring_fields
from pubsub.skipring.messages import Introduce, Ping
from tests.cluster_checks import ring_problems

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SEED = 0x5EED_F022
N_NODES = 4
TOPICS = {"fuzz": range(4), "other": range(3)}
CASES_SUPERVISOR = 100
CASES_PER_NODE = 50
MAX_FRAME = wire.DEFAULT_MAX_FRAME
#: Not a daemon of the cluster: the "peer" a fuzzing connection claims to be.
FAKE_PEER = "127.0.0.1:1"
#: Errors the runtime counts without answering (no ErrorReply is written for these).
UNANSWERED = {"duplicate_hello", "peer_error_reply"}
#: Counters that must not move: they would mean a core or the runtime itself failed.
MUST_STAY_ZERO = ("handler_error", "runtime_error", "bad_send", "store_error")


# --- building frames -----------------------------------------------------------------------------
def frame(payload: bytes) -> bytes:
    """A length prefix and `payload`, whatever the payload is."""
    return struct.pack(">I", len(payload)) + payload


def packed(obj: Any) -> bytes:
    """A frame whose payload is `obj` in msgpack (no validation at all)."""
    return frame(msgpack.packb(obj, use_bin_type=True))


def msg(kind: str, **fields: Any) -> bytes:
    """A frame of message `kind` with protocol version 1 and the given raw fields."""
    return packed({"v": wire.PROTOCOL_VERSION, "t": kind, **fields})


HELLO_CLIENT = wire.encode(Hello(ref=None, role="client"))
HELLO_PEER = wire.encode(Hello(ref=Ref(FAKE_PEER), role="peer"))
OK_CONTACT = ["01", FAKE_PEER]


def deep_list_frame(depth: int) -> bytes:
    """A reply whose body nests `depth` one-element lists (written by hand: msgpack's own
    packer refuses deep recursion)."""
    payload = (
        b"\x83"
        + msgpack.packb("v")
        + msgpack.packb(wire.PROTOCOL_VERSION)
        + msgpack.packb("t")
        + msgpack.packb("reply")
        + msgpack.packb("body")
        + b"\x81"
        + msgpack.packb("a")
        + b"\x91" * depth
        + b"\x90"
    )
    return frame(payload)


def nested_map(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


#: Well-formed frames, each with exactly one nonsense field (-> bad_field).
BAD_FIELDS: list[tuple[str, bytes]] = [
    ("topic is an int", msg("introduce", topic=123, contact=OK_CONTACT, flag="LIN")),
    ("empty topic", msg("introduce", topic="", contact=OK_CONTACT, flag="LIN")),
    ("topic of 300 chars", msg("linearize", topic="t" * 300, contact=OK_CONTACT)),
    ("control char in topic", msg("linearize", topic="a\x00b", contact=OK_CONTACT)),
    (
        "label of 200 bits",
        msg("introduce", topic="fuzz", contact=["1" * 200, FAKE_PEER], flag="CYC"),
    ),
    ("label not binary", msg("check", topic="fuzz", sender=OK_CONTACT, label="0120", flag="LIN")),
    ("empty label", msg("check", topic="fuzz", sender=OK_CONTACT, label="", flag="LIN")),
    ("label is a list", msg("set_data", topic="fuzz", pred=None, label=["0"], succ=None)),
    ("contact of 3", msg("linearize", topic="fuzz", contact=["0", FAKE_PEER, "x"])),
    ("contact is a str", msg("linearize", topic="fuzz", contact="0@127.0.0.1:1")),
    ("ref without port", msg("subscribe", topic="fuzz", ref="127.0.0.1")),
    ("ref port 0", msg("subscribe", topic="fuzz", ref="127.0.0.1:0")),
    ("ref port 65536", msg("unsubscribe", topic="fuzz", ref="127.0.0.1:65536")),
    ("ref with spaces", msg("get_configuration", topic="fuzz", ref="no such host:80")),
    ("ref host 300 chars", msg("suspect", ref="h" * 300 + ":80")),
    ("bad flag", msg("introduce", topic="fuzz", contact=OK_CONTACT, flag="XYZ")),
    ("nonce over 64 bits", msg("ping", nonce=(1 << 64) - 1)),
    ("nonce is a str", msg("ping", nonce="7")),
    ("nonce is a bool", msg("ping", nonce=True)),
    ("nonce is a float", msg("pong", nonce=1.5, ref=FAKE_PEER)),
    ("huge string", msg("error", code="x", detail="d" * 100_000)),
    ("code is a list", msg("error", code=["a"], detail="d")),
    ("body is an int", msg("reply", body=5)),
    ("map nested 40 deep", msg("reply", body=nested_map(40))),
    ("list nested 40 deep", deep_list_frame(40)),
    ("role is an int", msg("hello", ref=None, role=5)),
    ("extra field", msg("status", zzz=1)),
]


# --- the model of the runtime's reader -----------------------------------------------------------
def expected_errors(data: bytes, own_ref: str) -> Counter[str]:
    """The error codes a daemon at `own_ref` counts for one connection carrying `data`
    (then EOF), following the reader of `pubsub.runtime.inbound.Inbound` frame by frame."""
    counts: Counter[str] = Counter()
    pos, role = 0, None
    while pos < len(data):
        if len(data) - pos < wire.HEADER_SIZE:
            counts["truncated_frame"] += 1
            break
        (length,) = struct.unpack_from(">I", data, pos)
        if length > MAX_FRAME:
            counts["frame_too_large"] += 1  # refused before the body; connection closed
            break
        if len(data) - pos - wire.HEADER_SIZE < length:
            counts["truncated_frame"] += 1
            break
        payload = data[pos + wire.HEADER_SIZE : pos + wire.HEADER_SIZE + length]
        pos += wire.HEADER_SIZE + length
        try:
            decoded = wire.decode(payload, MAX_FRAME)
        except wire.WireError as exc:
            counts[exc.code] += 1  # answered, connection kept
            continue
        if role is None:
            if not isinstance(decoded, Hello):
                counts["no_hello"] += 1
                break
            if decoded.role == "client" and decoded.ref is None:
                role = "client"
            elif decoded.role == "peer" and decoded.ref is not None and decoded.ref != own_ref:
                role = "peer"
            else:
                counts["bad_hello"] += 1
                break
        elif isinstance(decoded, Hello):
            counts["duplicate_hello"] += 1
        elif role == "peer" and isinstance(decoded, ErrorReply):
            counts["peer_error_reply"] += 1
    return counts


# --- the cases -----------------------------------------------------------------------------------
@dataclass
class Case:
    """One connection's worth of bytes, and what the daemon must count for it."""

    name: str
    data: bytes
    expected: Counter[str]


def _prefix(rng: random.Random) -> bytes:
    return rng.choice([b"", HELLO_CLIENT, HELLO_PEER])


def make_cases(rng: random.Random, target: str, count: int, is_node: bool) -> list[Case]:
    """`count` cases for the daemon at `target`: a fixed cycle of kinds, random details."""

    def hand(name: str, data: bytes, code: str | None, times: int = 1) -> Case:
        expected = expected_errors(data, target)
        intended = Counter({code: times}) if code else Counter()
        assert expected == intended, f"case {name!r}: the model says {dict(expected)}"
        return Case(name, data, expected)

    def random_bytes() -> Case:
        data = _prefix(rng) + rng.randbytes(rng.randint(1, 300))
        return Case("random bytes", data, expected_errors(data, target))

    def random_body() -> Case:
        data = _prefix(rng) + frame(rng.randbytes(rng.randint(0, 200)))
        return Case("random frame body", data, expected_errors(data, target))

    def truncated() -> Case:
        whole = msg("subscribe", topic="fuzz", ref=FAKE_PEER)
        return hand("truncated frame", _prefix(rng) + whole[: rng.randint(1, len(whole) - 1)],
                    "truncated_frame")

    def oversize() -> Case:
        length = rng.choice(
            [MAX_FRAME + 1, 1 << 31, (1 << 32) - 1, rng.randint(MAX_FRAME + 1, (1 << 32) - 1)]
        )
        data = _prefix(rng) + struct.pack(">I", length) + rng.randbytes(rng.randint(0, 64))
        return hand("oversize length prefix", data, "frame_too_large")

    def bad_msgpack() -> Case:
        good = msgpack.packb({"v": 1, "t": "ping", "nonce": 1})
        payload = rng.choice([b"\xc1", good[:-1], good + b"\x00", msgpack.packb({1: 2}),
                              b"\x91" * 3000 + b"\x90"])
        return hand("undecodable msgpack", _prefix(rng) + frame(payload), "bad_msgpack")

    def not_a_map() -> Case:
        obj = rng.choice([[1, 2, 3], "status", 7, None, b"\x00\x01"])
        return hand("not a map", _prefix(rng) + packed(obj), "not_a_map")

    def bad_version() -> Case:
        obj = rng.choice([{"v": 2, "t": "status"}, {"v": "1", "t": "status"}, {"t": "status"},
                          {"v": True, "t": "status"}, {"v": -1, "t": "status"}])
        return hand("bad version", _prefix(rng) + packed(obj), "bad_version")

    def unknown_type() -> Case:
        kind = rng.choice([f"nope-{rng.randrange(10**6)}", 7, None, "", "Introduce"])
        return hand("unknown message type", _prefix(rng) + packed({"v": 1, "t": kind}),
                    "unknown_type")

    def missing_field() -> Case:
        data = rng.choice([packed({"v": 1}), msg("introduce", topic="fuzz", flag="LIN"),
                           msg("ping"), msg("hello", role="client")])
        return hand("missing field", _prefix(rng) + data, "missing_field")

    def bad_field() -> Case:
        name, data = rng.choice(BAD_FIELDS)
        return hand(f"bad field: {name}", _prefix(rng) + data, "bad_field")

    def no_hello() -> Case:
        return hand("no hello first", wire.encode(StatusRequest()), "no_hello")

    def bad_hello() -> Case:
        hello = rng.choice([
            Hello(ref=Ref(target), role="peer"),  # claims to be the daemon itself
            Hello(ref=Ref(FAKE_PEER), role="client"),
            Hello(ref=None, role="peer"),
            Hello(ref=None, role="admin"),
        ])
        return hand("bad hello", wire.encode(hello), "bad_hello")

    def duplicate_hello() -> Case:
        return hand("duplicate hello", HELLO_CLIENT + HELLO_CLIENT + wire.encode(StatusRequest()),
                    "duplicate_hello")

    def many_bad_frames() -> Case:
        times = rng.randint(10, 30)
        data = HELLO_CLIENT + msg("reply", body=5) * times
        return hand(f"{times} bad frames on one connection", data, "bad_field", times)

    def benign() -> Case:
        # Valid frames that must change nothing: a supervisor ignores a Pong nobody asked
        # for; a node answers a Ping (negative nonces are valid int64) and tells the
        # claimed sender of a message for a topic it does not run to forget it.
        if is_node:
            stranger = Introduce(Topic("no-such-topic"), skipring_fields.validate_contact(OK_CONTACT), "LIN")
            ping = Ping(nonce=-rng.randrange(1, 1 << 62))
            data = HELLO_PEER + wire.encode(rng.choice([ping, stranger]))
        else:
            data = HELLO_PEER + msg("pong", nonce=-5, ref=FAKE_PEER)
        return hand("valid but useless", data, None)

    kinds = [random_bytes, random_body, truncated, oversize, bad_msgpack, not_a_map,
             bad_version, unknown_type, missing_field, bad_field, bad_field, no_hello,
             bad_hello, duplicate_hello, many_bad_frames, benign]
    return [kinds[i % len(kinds)]() for i in range(count)]


# --- talking to a daemon -------------------------------------------------------------------------
def error_replies(data: bytes) -> list[str]:
    """The codes of the ErrorReply frames in what a daemon wrote back."""
    codes: list[str] = []
    pos = 0
    while len(data) - pos >= wire.HEADER_SIZE:
        (length,) = struct.unpack_from(">I", data, pos)
        body = data[pos + wire.HEADER_SIZE : pos + wire.HEADER_SIZE + length]
        if len(body) < length:
            break
        pos += wire.HEADER_SIZE + length
        reply = wire.decode(body)
        if isinstance(reply, ErrorReply):
            codes.append(reply.code)
    return codes


def run_case(target: str, case: Case) -> list[str]:
    """Send one case on a fresh connection, half-close, read to EOF; the ErrorReply codes."""
    host, _, port = target.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(case.data)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may close first (e.g. a refused length prefix); that is fine
        received = bytearray()
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    return error_replies(bytes(received))


# --- the test ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("fuzz"), N_NODES, interval=0.2) as c:
        for topic, nodes in TOPICS.items():
            for i in nodes:
                c.subscribe(i, topic)
        c.poll(lambda: ring_problems(c, wanted(c)), 60, "exact rings before fuzzing")
        yield c


def wanted(c: LocalCluster) -> dict[str, set[str]]:
    return {topic: {c.node_refs[i] for i in nodes} for topic, nodes in TOPICS.items()}


def errors_of(body: dict[str, Any]) -> Counter[str]:
    return Counter(body["stats"]["errors"])


def test_daemons_survive_hostile_input(cluster: LocalCluster) -> None:
    rng = random.Random(SEED)
    targets = [cluster.supervisor] + cluster.nodes
    before = {d.ref: errors_of(cluster._status(d.ref, via_cli=False)) for d in targets}
    log_sizes = {d.ref: d.log_path.stat().st_size for d in targets}

    expected: dict[str, Counter[str]] = {}
    bad_frames: dict[str, int] = {}
    total = 0
    for daemon in targets:
        is_node = daemon is not cluster.supervisor
        cases = make_cases(rng, daemon.ref, CASES_PER_NODE if is_node else CASES_SUPERVISOR,
                           is_node)
        want: Counter[str] = Counter()
        for case in cases:
            replied = run_case(daemon.ref, case)
            answerable = Counter({k: v for k, v in case.expected.items() if k not in UNANSWERED})
            assert Counter(replied) == answerable, (
                f"{daemon.name}, case {case.name!r}: answered {replied}, "
                f"expected ErrorReplies {dict(answerable)}"
            )
            want += case.expected
        expected[daemon.ref] = want
        bad_frames[daemon.ref] = sum(want.values())
        total += len(cases)
    assert total >= 300

    # Every process alive and answering; counters grew by exactly what was provoked.
    for daemon in targets:
        assert daemon.running, f"{daemon.name} died:\n{daemon.log_tail()}"
        now = errors_of(cluster._status(daemon.ref, via_cli=False))
        grown = now - before[daemon.ref]
        assert grown == expected[daemon.ref], (
            f"{daemon.name}: error counters grew by {dict(grown)}, "
            f"expected {dict(expected[daemon.ref])}"
        )
        for code in MUST_STAY_ZERO:
            assert now[code] == 0, f"{daemon.name}: {code} = {now[code]}"

    # The logs mention the errors, rate-limited.
    for daemon in targets:
        with open(daemon.log_path, "rb") as f:
            f.seek(log_sizes[daemon.ref])
            new_lines = f.read().decode("utf-8", "replace").splitlines()
        bad_input = [line for line in new_lines if "bad input from" in line]
        for code in expected[daemon.ref]:
            if code in UNANSWERED:
                continue  # counted only
            assert any(f": {code}: " in line for line in bad_input), (
                f"{daemon.name}: no log line mentions {code}"
            )
        assert len(bad_input) < bad_frames[daemon.ref] / 3, (
            f"{daemon.name}: {len(bad_input)} log lines for {bad_frames[daemon.ref]} bad frames"
        )
        assert not any("Traceback" in line for line in new_lines), f"{daemon.name}: traceback"

    # The rings never noticed.
    assert ring_problems(cluster, wanted(cluster)) == []
