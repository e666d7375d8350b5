# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled twins of `pubsub.publications.hotpath`'s decoders (issue 11): Spread, Delivery,
PublishRequest and PublishAck frames read straight from their bytes, in one call per frame.

Every member decodes one Spread per batch it receives and every subscriber one Delivery
per publication; every publication starts as a PublishRequest and ends as a PublishAck.
The Python decoders unpack a frame into Python objects and then check each field; measured
cold (as a member meets a frame at 50 publications per second, its caches cold), that is
113-151 µs per frame, where one native call that checks each field as it parses it and
builds only the final message costs about half (the twenty-first and twenty-second rounds
of docs/measurements/issue11.md).

Each accepts exactly what its Python twin accepts, and builds an equal message: the frame
as this project's encoder writes it (the map header, "v" and "t", then every field in its
declared order), with the same checks -- the generic codec's size bounds, integer ranges,
a 16-byte key, the topic and reference formats (`pubsub.kernel.wire.validate_topic`,
`validate_ref`), message ids of printable ASCII characters (`pubsub.skipring.fields`), the
proof's bound.  Anything else -- fields in another order, an older peer's shorter form, a
wrong type, a bound exceeded, trailing or missing bytes -- returns None, and the generic
decoder takes the frame and accepts it or raises the precise `WireError` that is counted.
Tests compare them with the Python decoders and the generic decoder on generated and
mutated frames (tests/publications/test_hotpath.py).

One difference from the Python Spread decoder, by design: a Spread's publications always
keep the bytes they arrived as (`PublicationList.packed`), whatever the frame's size, since
here the slice costs nothing next to parsing; a forward then re-encodes nothing.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp

import msgpack

from pubsub.kernel import wire
from pubsub.publications import fields
from pubsub.publications import signatures
from pubsub.publications.messages import Delivery, Publication, PublicationList, PublishAck, PublishRequest, Spread

cdef Py_ssize_t MAX_PAYLOAD = wire.MAX_PAYLOAD_BYTES
cdef Py_ssize_t MAX_TOPIC_CHARS = wire.MAX_TOPIC_CHARS
cdef Py_ssize_t MAX_MSG_ID_CHARS = fields.MAX_MSG_ID_CHARS
cdef Py_ssize_t MAX_PUBLICATIONS = fields.MAX_PUBLICATIONS
cdef Py_ssize_t MAX_PROOF = signatures.MAX_PROOF_BYTES
cdef uint64_t INT64_MAX = 0x7fffffffffffffff

cdef bytes SPREAD_HEAD = wire.fast_prefix("spread", 7)
cdef bytes DELIVERY_HEAD = wire.fast_prefix("delivery", 9)
cdef bytes REQUEST_HEAD = wire.fast_prefix("publish_request", 4)
cdef bytes ACK_HEAD = wire.fast_prefix("publish_ack", 9)
cdef bytes TOPIC = msgpack.packb("topic")
cdef bytes SENDER = msgpack.packb("sender")
cdef bytes START = msgpack.packb("start")
cdef bytes END = msgpack.packb("end")
cdef bytes LEVELS = msgpack.packb("levels")
cdef bytes HOPS = msgpack.packb("hops")
cdef bytes PUBLICATIONS = msgpack.packb("publications")
cdef bytes LOCAL_SEQ = msgpack.packb("local_seq")
cdef bytes PUBLISHER = msgpack.packb("publisher")
cdef bytes SEQ = msgpack.packb("seq")
cdef bytes KEY = msgpack.packb("key")
cdef bytes PAYLOAD = msgpack.packb("payload")
cdef bytes STORED_AT_MS = msgpack.packb("stored_at_ms")
cdef bytes PUBLISHED_MS = msgpack.packb("published_ms")
cdef bytes MSG_ID = msgpack.packb("msg_id")
cdef bytes ID = msgpack.packb("id")
cdef bytes STORED_BY = msgpack.packb("stored_by")
cdef bytes DURABLE = msgpack.packb("durable")
cdef bytes DUPLICATE = msgpack.packb("duplicate")
#: The "name" of an array's item: nothing to read before its value.
cdef bytes ITEM = b""

#: References found valid, by their text: every frame repeats the same few (senders,
#: publishers), so each is checked once and every publication shares one string, as
#: `pubsub.kernel.wire.validate_ref` does for the Python decoders.
cdef dict _refs = {}
cdef Py_ssize_t _REFS_MAX = 4096


cdef struct Reader:
    const uint8_t* p  # the frame's bytes
    Py_ssize_t i  # where the next value begins
    Py_ssize_t n  # the frame's length
    bint bad  # set by the first thing that is not as expected; every later read then fails


cdef inline bint _need(Reader* r, Py_ssize_t k) noexcept:
    """Whether `k` more bytes are there (and nothing failed before); marks the reader bad
    if not."""
    if r.bad or k > r.n - r.i:
        r.bad = True
        return False
    return True


cdef inline uint64_t _big_endian(Reader* r, int k) noexcept:
    cdef uint64_t v = 0
    cdef int j
    for j in range(k):
        v = (v << 8) | r.p[r.i + j]
    r.i += k
    return v


cdef inline bint _expect(Reader* r, bytes want) noexcept:
    """Read exactly the bytes `want` (a field's name as the encoder writes it)."""
    cdef Py_ssize_t k = PyBytes_GET_SIZE(want)
    if not _need(r, k) or memcmp(r.p + r.i, PyBytes_AS_STRING(want), k) != 0:
        r.bad = True
        return False
    r.i += k
    return True


cdef uint64_t _integer(Reader* r, bint* negative) noexcept:
    """Any msgpack integer: its value as 64 bits, `negative` set when it is below zero (the
    bits then hold it in two's complement).  Anything else marks the reader bad."""
    cdef uint8_t b
    cdef int k
    cdef uint64_t v
    negative[0] = False
    if not _need(r, 1):
        return 0
    b = r.p[r.i]
    r.i += 1
    if b <= 0x7f:
        return b
    if b >= 0xe0:
        negative[0] = True
        return <uint64_t><int64_t><int8_t>b
    if 0xcc <= b <= 0xcf:
        k = 1 << (b - 0xcc)
        return _big_endian(r, k) if _need(r, k) else 0
    if 0xd0 <= b <= 0xd3:
        k = 1 << (b - 0xd0)
        if not _need(r, k):
            return 0
        v = _big_endian(r, k)
        if k == 1:
            v = <uint64_t><int64_t><int8_t>v
        elif k == 2:
            v = <uint64_t><int64_t><int16_t>v
        elif k == 4:
            v = <uint64_t><int64_t><int32_t>v
        negative[0] = <int64_t>v < 0
        return v
    r.bad = True
    return 0


# Each reader of a field below first reads the field's name (ITEM for an array's item).
cdef int64_t _int64(Reader* r, bytes name) noexcept:
    """An integer in the signed 64-bit range (`pubsub.kernel.wire.INT64_MIN`..`INT64_MAX`)."""
    cdef bint negative = False
    cdef uint64_t v = _integer(r, &negative) if _expect(r, name) else 0
    if not negative and v > INT64_MAX:
        r.bad = True
    return <int64_t>v


cdef uint64_t _position(Reader* r, bytes name) noexcept:
    """A point of the ring: 0 <= p < 2^64."""
    cdef bint negative = False
    cdef uint64_t v = _integer(r, &negative) if _expect(r, name) else 0
    if negative:
        r.bad = True
    return v


cdef inline Py_ssize_t _sized(Reader* r, int k) noexcept:
    """A length written in the next `k` bytes (big-endian)."""
    return <Py_ssize_t>_big_endian(r, k) if _need(r, k) else -1


cdef inline int _type_byte(Reader* r) noexcept:
    """The next value's type byte, or -1 at the end (the reader then bad)."""
    if not _need(r, 1):
        return -1
    r.i += 1
    return r.p[r.i - 1]


cdef Py_ssize_t _str_length(Reader* r) noexcept:
    """A str header (fixstr, str 8/16/32): the length of the text that follows, in bytes;
    -1, and the reader bad, for any other value."""
    cdef int b = _type_byte(r)
    if b >= 0 and (b & 0xe0) == 0xa0:
        return b & 0x1f
    if 0xd9 <= b <= 0xdb:
        return _sized(r, 1 << (b - 0xd9))
    r.bad = True
    return -1


cdef Py_ssize_t _bin_length(Reader* r) noexcept:
    """A bin header (bin 8/16/32): the number of bytes that follow."""
    cdef int b = _type_byte(r)
    if 0xc4 <= b <= 0xc6:
        return _sized(r, 1 << (b - 0xc4))
    r.bad = True
    return -1


cdef Py_ssize_t _array_length(Reader* r) noexcept:
    """An array header (fixarray, array 16/32): the number of items."""
    cdef int b = _type_byte(r)
    if b >= 0 and (b & 0xf0) == 0x90:
        return b & 0x0f
    if b == 0xdc or b == 0xdd:
        return _sized(r, 2 << (b - 0xdc))
    r.bad = True
    return -1


cdef object _binary(Reader* r, bytes name, Py_ssize_t most, Py_ssize_t exactly):
    """A bin value of at most `most` bytes (exactly `exactly` when that is not -1), as
    bytes; None, and the reader bad, for anything else."""
    cdef Py_ssize_t k = _bin_length(r) if _expect(r, name) else -1
    if k < 0 or k > most or (exactly >= 0 and k != exactly) or not _need(r, k):
        r.bad = True
        return None
    r.i += k
    return PyBytes_FromStringAndSize(<const char*>(r.p + r.i - k), k)


cdef object _text(Reader* r, Py_ssize_t k):
    """The next `k` bytes as UTF-8 text, strictly as the generic decoder reads it; None
    (and the reader bad) where that is not valid UTF-8."""
    if not _need(r, k):
        return None
    try:
        text = PyUnicode_DecodeUTF8(<const char*>(r.p + r.i), k, NULL)
    except UnicodeDecodeError:
        r.bad = True
        return None
    r.i += k
    return text


cdef object _topic(Reader* r, bytes name):
    """A topic name (`pubsub.kernel.wire.validate_topic`): 1..MAX_TOPIC_CHARS characters,
    none a control character (U+0000-U+001F, U+007F-U+009F).  Checked on the UTF-8 bytes:
    the characters are the bytes that do not continue one, C0 controls and DEL are single
    bytes, C1 controls are 0xC2 0x80-0x9F; the strict decoding then refuses invalid UTF-8."""
    cdef Py_ssize_t k = _str_length(r) if _expect(r, name) else -1
    cdef Py_ssize_t j, chars = 0
    cdef uint8_t b
    if k < 0 or not _need(r, k):
        r.bad = True
        return None
    for j in range(r.i, r.i + k):
        b = r.p[j]
        if b < 0x20 or b == 0x7f or (b == 0xc2 and j + 1 < r.i + k and 0x80 <= r.p[j + 1] <= 0x9f):
            r.bad = True
            return None
        if (b & 0xc0) != 0x80:
            chars += 1
    if not 1 <= chars <= MAX_TOPIC_CHARS:
        r.bad = True
        return None
    return _text(r, k)


cdef object _ref(Reader* r, bytes name):
    """A reference "host:port" (`pubsub.kernel.wire.validate_ref`), the one string per
    distinct reference (`_refs`)."""
    cdef Py_ssize_t k = _str_length(r) if _expect(r, name) else -1
    if k < 0:
        r.bad = True
        return None
    text = _text(r, k)
    if text is None:
        return None
    known = _refs.get(text)
    if known is not None:
        return known
    try:
        ref = wire.validate_ref(text)
    except wire.WireError:
        r.bad = True
        return None
    if len(_refs) >= _REFS_MAX:
        _refs.clear()
    _refs[ref] = ref
    return ref


cdef object _msg_id(Reader* r, bytes name):
    """A message id (`pubsub.publications.fields.validate_msg_id`): "" or up to
    MAX_MSG_ID_CHARS characters from '!' to '~'."""
    cdef Py_ssize_t k = _str_length(r) if _expect(r, name) else -1
    cdef Py_ssize_t j
    if k < 0 or k > MAX_MSG_ID_CHARS or not _need(r, k):
        r.bad = True
        return None
    for j in range(r.i, r.i + k):
        if not 0x21 <= r.p[j] <= 0x7e:
            r.bad = True
            return None
    r.i += k
    return PyUnicode_DecodeASCII(<const char*>(r.p + r.i - k), k, NULL)


cdef object _boolean(Reader* r, bytes name):
    """true or false (nothing else: the generic decoder takes no 1 or 0 for a flag)."""
    cdef int b = _type_byte(r) if _expect(r, name) else -1
    if b == 0xc3:
        return True
    if b != 0xc2:
        r.bad = True
    return False


cdef object _optional_int64(Reader* r, bytes name):
    """nil (None) or an integer in the signed 64-bit range."""
    if not (_expect(r, name) and _need(r, 1)):
        return None
    if r.p[r.i] == 0xc0:
        r.i += 1
        return None
    return _int64(r, ITEM)


cdef bint _start(Reader* r, object payload, bytes head) noexcept:
    """Start reading `payload` (bytes, nothing else) past `head`, how a frame of the
    expected kind begins."""
    if type(payload) is not bytes:
        return False
    r.p = <const uint8_t*>PyBytes_AS_STRING(payload)
    r.i = 0
    r.n = PyBytes_GET_SIZE(payload)
    r.bad = False
    return _expect(r, head)


cdef inline bint _whole(Reader* r) noexcept:
    """Whether everything read was as expected and the frame holds nothing more."""
    return not r.bad and r.i == r.n


def decode_spread(payload):
    """The Spread in `payload`, or None to leave the frame to the generic decoder (as
    `pubsub.publications.hotpath.decode_spread`, module docstring)."""
    cdef Reader r
    cdef Py_ssize_t count, width, first_publication, item
    cdef int64_t seq, published_ms, prev
    if not _start(&r, payload, SPREAD_HEAD):
        return None
    topic = _topic(&r, TOPIC)
    sender = _ref(&r, SENDER)
    cdef uint64_t start = _position(&r, START)
    cdef uint64_t end = _position(&r, END)
    cdef int64_t levels = _int64(&r, LEVELS)
    cdef int64_t hops = _int64(&r, HOPS)
    first_publication = r.i + PyBytes_GET_SIZE(PUBLICATIONS)
    count = _array_length(&r) if _expect(&r, PUBLICATIONS) else -1
    if r.bad or count > MAX_PUBLICATIONS:
        return None
    publications = []
    for item in range(count):
        width = _array_length(&r)
        if r.bad or not 4 <= width <= 8:
            return None
        key = _binary(&r, ITEM, 16, 16)
        publisher = _ref(&r, ITEM)
        seq = _int64(&r, ITEM)
        body = _binary(&r, ITEM, MAX_PAYLOAD, -1)
        published_ms = _int64(&r, ITEM) if width > 4 else 0
        prev = _int64(&r, ITEM) if width > 5 else -1
        msg_id = _msg_id(&r, ITEM) if width > 6 else ""
        proof = _binary(&r, ITEM, MAX_PROOF, -1) if width > 7 else b""
        if r.bad or seq < 0 or published_ms < 0 or prev < -1:
            return None
        publications.append(Publication(key, publisher, seq, body, published_ms, prev, msg_id, proof))
    if not _whole(&r):
        return None
    packed = PyBytes_FromStringAndSize(<const char*>(r.p + first_publication), r.n - first_publication)
    return Spread(topic, sender, start, end, levels, hops, PublicationList(publications, packed, True))


def decode_delivery(payload):
    """The Delivery in `payload` (all its fields present), or None to leave the frame to
    the generic decoder (as `pubsub.publications.hotpath.decode_delivery`)."""
    cdef Reader r
    if not _start(&r, payload, DELIVERY_HEAD):
        return None
    topic = _topic(&r, TOPIC)
    cdef int64_t local_seq = _int64(&r, LOCAL_SEQ)
    publisher = _ref(&r, PUBLISHER)
    cdef int64_t seq = _int64(&r, SEQ)
    key = _binary(&r, KEY, 16, 16)
    body = _binary(&r, PAYLOAD, MAX_PAYLOAD, -1)
    cdef int64_t stored_at_ms = _int64(&r, STORED_AT_MS)
    cdef int64_t published_ms = _int64(&r, PUBLISHED_MS)
    msg_id = _msg_id(&r, MSG_ID)
    if not _whole(&r):
        return None
    return Delivery(topic, local_seq, publisher, seq, key, body, stored_at_ms, published_ms, msg_id)


def decode_publish_request(payload):
    """The PublishRequest in `payload` (all its fields present), or None to leave the frame
    to the generic decoder (as `pubsub.publications.hotpath.decode_publish_request`)."""
    cdef Reader r
    if not _start(&r, payload, REQUEST_HEAD):
        return None
    topic = _topic(&r, TOPIC)
    body = _binary(&r, PAYLOAD, MAX_PAYLOAD, -1)
    cdef int64_t number = _int64(&r, ID)
    msg_id = _msg_id(&r, MSG_ID)
    if not _whole(&r):
        return None
    return PublishRequest(topic, body, number, msg_id)


def decode_publish_ack(payload):
    """The PublishAck in `payload` (all its fields present), or None to leave the frame to
    the generic decoder (as `pubsub.publications.hotpath.decode_publish_ack`)."""
    cdef Reader r
    if not _start(&r, payload, ACK_HEAD):
        return None
    cdef int64_t number = _int64(&r, ID)
    topic = _topic(&r, TOPIC)
    publisher = _ref(&r, PUBLISHER)
    cdef int64_t seq = _int64(&r, SEQ)
    key = _binary(&r, KEY, 16, 16)
    stored_by = _ref(&r, STORED_BY)
    local_seq = _optional_int64(&r, LOCAL_SEQ)
    durable = _boolean(&r, DURABLE)
    duplicate = _boolean(&r, DUPLICATE)
    if not _whole(&r):
        return None
    return PublishAck(number, topic, publisher, seq, key, stored_by, local_seq, durable, duplicate)
