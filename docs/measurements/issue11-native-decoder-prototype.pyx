# Prototype, not built by the project (issue 11, twenty-first round; docs/measurements/issue11.md):
# a Spread frame of the common shape parsed in one native call that builds only the final
# objects.  It leaves out checks the real decoder makes (topic and reference formats, message
# id characters, the streamed path for large batches); measured cold against
# hotpath.decode_spread with /tmp-only scripts: 69-75 us against 135-139.
# cython: language_level=3, boundscheck=False, wraparound=False
"""Prototype (not kept): parse a one-shape Spread frame natively, building only the final objects."""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcmp
from libc.stdint cimport uint8_t, int8_t, int16_t, int32_t, int64_t, uint64_t

cdef class _R:
    cdef const uint8_t* p
    cdef Py_ssize_t i, n
    cdef bint bad

cdef inline int _need(_R r, Py_ssize_t k):
    if r.i + k > r.n:
        r.bad = 1
        return 0
    return 1

cdef int64_t _int(_R r):
    cdef uint8_t b
    cdef uint64_t v = 0
    cdef int k
    if not _need(r, 1): return 0
    b = r.p[r.i]; r.i += 1
    if b <= 0x7f: return b
    if b >= 0xe0: return <int8_t>b
    if b == 0xcc or b == 0xcd or b == 0xce or b == 0xcf:
        k = 1 << (b - 0xcc)
        if not _need(r, k): return 0
        for j in range(k): v = (v << 8) | r.p[r.i + j]
        r.i += k
        if v > 0x7fffffffffffffff: r.bad = 1
        return <int64_t>v
    if b == 0xd0 or b == 0xd1 or b == 0xd2 or b == 0xd3:
        k = 1 << (b - 0xd0)
        if not _need(r, k): return 0
        for j in range(k): v = (v << 8) | r.p[r.i + j]
        r.i += k
        if k == 1: return <int8_t>v
        if k == 2: return <int16_t>v
        if k == 4: return <int32_t>v
        return <int64_t>v
    r.bad = 1
    return 0

cdef object _str(_R r, Py_ssize_t maxlen):
    cdef uint8_t b
    cdef Py_ssize_t k
    if not _need(r, 1): return None
    b = r.p[r.i]; r.i += 1
    if (b & 0xe0) == 0xa0: k = b & 0x1f
    elif b == 0xd9:
        if not _need(r, 1): return None
        k = r.p[r.i]; r.i += 1
    else:
        r.bad = 1; return None
    if k > maxlen or not _need(r, k):
        r.bad = 1; return None
    s = PyUnicode_DecodeUTF8(<const char*>(r.p + r.i), k, NULL)
    r.i += k
    return s

cdef object _bin(_R r, Py_ssize_t maxlen):
    cdef uint8_t b
    cdef Py_ssize_t k
    if not _need(r, 1): return None
    b = r.p[r.i]; r.i += 1
    if b == 0xc4:
        if not _need(r, 1): return None
        k = r.p[r.i]; r.i += 1
    elif b == 0xc5:
        if not _need(r, 2): return None
        k = (r.p[r.i] << 8) | r.p[r.i + 1]; r.i += 2
    else:
        r.bad = 1; return None
    if k > maxlen or not _need(r, k):
        r.bad = 1; return None
    s = PyBytes_FromStringAndSize(<const char*>(r.p + r.i), k)
    r.i += k
    return s

cdef int _key(_R r, bytes want):
    cdef Py_ssize_t k = PyBytes_GET_SIZE(want)
    if not _need(r, k) or memcmp(r.p + r.i, PyBytes_AS_STRING(want), k) != 0:
        r.bad = 1; return 0
    r.i += k
    return 1

def decode(bytes frame, bytes head, list keys, Publication, Spread, PublicationList, Position):
    cdef _R r = _R()
    cdef uint8_t b
    cdef int count
    r.p = <const uint8_t*>PyBytes_AS_STRING(frame); r.n = PyBytes_GET_SIZE(frame); r.i = 0; r.bad = 0
    if not _key(r, head): return None
    _key(r, keys[0]); topic = _str(r, 1024)
    _key(r, keys[1]); sender = _str(r, 300)
    _key(r, keys[2]); start = _int(r)
    _key(r, keys[3]); end = _int(r)
    _key(r, keys[4]); levels = _int(r)
    _key(r, keys[5]); hops = _int(r)
    _key(r, keys[6])
    if r.bad or not _need(r, 1): return None
    b = r.p[r.i]; r.i += 1
    if (b & 0xf0) != 0x90: return None
    count = b & 0x0f
    pubs = PublicationList()
    for _ in range(count):
        if not _need(r, 1) or r.p[r.i] != 0x97: return None
        r.i += 1
        key = _bin(r, 16); publisher = _str(r, 300); seq = _int(r); payload = _bin(r, 1 << 20)
        published = _int(r); prev = _int(r); msg_id = _str(r, 64)
        if r.bad or PyBytes_GET_SIZE(key) != 16: return None
        pubs.append(Publication(key, publisher, seq, payload, published, prev, msg_id))
    if r.bad or r.i != r.n: return None
    return Spread(topic, sender, Position(start), Position(end), levels, hops, pubs)
