"""Resource limits of the runtime: connection caps, the shared frame buffer, deadlines and
publish quotas (settings: `pubsub.runtime.limitsettings`).

Each piece is small and free of I/O, so that it is tested alone; the runtime applies them
to its connections (the caps and quotas in `pubsub.runtime.admission`, the frame buffer in
`pubsub.runtime.inbound`, the deadlines in `pubsub.runtime.net`):

* `connection_caps` derives how many accepted connections a daemon may hold, in all and
  per source address, from its descriptor limit (RLIMIT_NOFILE) minus a reserve, so that
  it keeps descriptors for its store, its logs and the connections it opens itself (to its
  supervisor and ring peers) however many strangers connect; `ConnectionCounts` admits or
  refuses each accepted connection against those caps.
* `BufferPool`: each connection may hold `conn_buffer_bytes` of an unfinished frame by
  itself; beyond that it borrows from one pool shared by all connections, and a connection
  the pool cannot serve is closed.  Memory for unfinished frames is therefore at most
  connections x conn_buffer_bytes + inflight_bytes, whatever length the frames announce.
* `overdue` is the deadline rule: a frame must be complete `frame_deadline` seconds after
  its first byte arrived; a client connection that carries no stream is closed after
  `idle_timeout` seconds in which nothing was read from it or written to it.  A stream
  (a subscriber waiting for publications) is never idle by this rule: the kernel's TCP
  keepalive, turned on for every accepted socket (`enable_keepalive`), finds a subscriber
  whose host is gone.
* `PublishQuotas`: per client (its certificate's name with TLS, else its IP address) token
  buckets for publications per second and payload bytes per second, and a cap on the size
  of one publication.

Every refusal is counted by reason in `pubsub.runtime.stats.Stats` (``refused``,
``closed``, ``quota``) and exported to Prometheus (`pubsub.telemetry.metrics`).
"""

from __future__ import annotations

import socket
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from pubsub.runtime.limitsettings import LimitSettings

#: Reasons a new connection is refused (labels of pubsub_connections_refused).
REFUSED_TOTAL = "total"
REFUSED_PER_SOURCE = "per_source"
#: Reasons a connection is closed by a limit (labels of pubsub_connections_closed; also the
#: code of the ErrorReply the connection gets).
HELLO_DEADLINE = "hello_deadline"
FRAME_DEADLINE = "frame_deadline"
IDLE = "idle_timeout"
BUFFER_LIMIT = "buffer_limit"
#: Codes of a publication refused by a quota (labels of pubsub_publish_quota_refused).
QUOTA_SIZE = "quota_size"
QUOTA_RATE = "quota_rate"
QUOTA_BYTES = "quota_bytes"
#: The error code a refused connection reads before it is closed.
TOO_MANY = "too_many_connections"
#: Each set of reasons above (Prometheus reports every one from the start).
REFUSED_REASONS = (REFUSED_TOTAL, REFUSED_PER_SOURCE)
CLOSED_REASONS = (HELLO_DEADLINE, FRAME_DEADLINE, IDLE, BUFFER_LIMIT)
QUOTA_REASONS = (QUOTA_RATE, QUOTA_BYTES, QUOTA_SIZE)

#: The descriptor limit assumed where RLIMIT_NOFILE cannot be read.
FALLBACK_NOFILE = 1024
#: The smallest per-source cap the automatic rule gives.
MIN_PER_SOURCE = 16
#: Clients whose quota state is remembered at once (least recently seen forgotten first).
MAX_QUOTA_CLIENTS = 10_000


# ------------------------------------------------------------------------ connection caps
def descriptor_limit() -> int:
    """The soft RLIMIT_NOFILE of this process (FALLBACK_NOFILE where it cannot be read or
    is unlimited)."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return FALLBACK_NOFILE
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return FALLBACK_NOFILE
    return int(soft)


@dataclass(frozen=True, slots=True)
class Caps:
    """How many accepted connections a daemon holds at once: in all, and from one address."""

    total: int
    per_source: int


def connection_caps(settings: LimitSettings, nofile: int | None = None) -> Caps:
    """The caps of `settings`: ``max_connections`` or else the descriptor limit (`nofile`,
    default this process's) minus ``fd_reserve``; ``max_connections_per_source`` or else a
    quarter of that (at least MIN_PER_SOURCE), never above the total.  At least 1 each."""
    limit = descriptor_limit() if nofile is None else nofile
    headroom = max(1, limit - settings.fd_reserve)
    total = settings.max_connections or headroom
    total = max(1, min(total, headroom))
    per_source = settings.max_connections_per_source or max(MIN_PER_SOURCE, total // 4)
    return Caps(total=total, per_source=max(1, min(per_source, total)))


class ConnectionCounts:
    """Accepted connections held, in all and per source address, against `Caps`."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.total = 0
        self._by_source: dict[str, int] = {}

    def admit(self, source: str) -> str | None:
        """Count a new connection from `source` and return None, or return why it is
        refused (REFUSED_TOTAL, REFUSED_PER_SOURCE) without counting it."""
        if self.total >= self.caps.total:
            return REFUSED_TOTAL
        held = self._by_source.get(source, 0)
        if held >= self.caps.per_source:
            return REFUSED_PER_SOURCE
        self._by_source[source] = held + 1
        self.total += 1
        return None

    def release(self, source: str) -> None:
        """One admitted connection from `source` is gone."""
        held = self._by_source.get(source, 0)
        if held <= 0:
            return
        self.total -= 1
        if held == 1:
            del self._by_source[source]
        else:
            self._by_source[source] = held - 1

    def held(self, source: str) -> int:
        """Connections from `source` held now."""
        return self._by_source.get(source, 0)


def source_of(address: str) -> str:
    """The IP address of "ip:port" (an IPv6 address keeps its colons)."""
    host, sep, _port = address.rpartition(":")
    return host if sep else address


def enable_keepalive(sock: socket.socket | None, idle: int = 60, interval: int = 15, count: int = 4) -> None:
    """Turn on TCP keepalive for `sock` (probes after `idle` s of silence, every `interval`
    s, `count` unanswered ones end the connection), where the platform allows it."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)):
            option = getattr(socket, name, None)
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:
        pass


# ------------------------------------------------------------------------ the frame buffer
class BufferPool:
    """Bytes of unfinished frames that connections hold beyond their own allowance.

    A connection holding `pending` bytes of an unfinished frame needs ``pending -
    allowance`` bytes from the pool; `settle` adjusts what it borrowed and says whether
    the pool could serve it.
    """

    def __init__(self, capacity: int, allowance: int) -> None:
        self.capacity = capacity
        self.allowance = allowance
        self.lent = 0

    def settle(self, borrowed: int, pending: int) -> int | None:
        """The new amount a connection that had `borrowed` borrows while holding `pending`
        bytes; None if the pool cannot lend it (what it had is then returned)."""
        need = max(0, pending - self.allowance)
        if need == borrowed:
            return need
        if need > borrowed and self.lent - borrowed + need > self.capacity:
            self.lent -= borrowed
            return None
        self.lent += need - borrowed
        return need

    def give_back(self, borrowed: int) -> None:
        """A connection that had `borrowed` is gone."""
        self.lent = max(0, self.lent - borrowed)


# ------------------------------------------------------------------------ deadlines
class Watched(Protocol):
    """What the deadline rule reads of a connection (`pubsub.runtime.connection.Connection`)."""

    role: str | None
    frame_started: float | None
    last_active: float


def overdue(conn: Watched, now: float, settings: LimitSettings, streaming: bool) -> str | None:
    """Which deadline `conn` has passed at `now` (FRAME_DEADLINE, IDLE), or None.  A
    connection before its Hello is the hello timeout's (`pubsub.runtime.net`)."""
    started = conn.frame_started
    if started is not None:
        return FRAME_DEADLINE if now - started > settings.frame_deadline else None
    if (
        conn.role == "client"
        and not streaming
        and settings.idle_timeout > 0
        and now - conn.last_active > settings.idle_timeout
    ):
        return IDLE
    return None


def sweep_period(settings: LimitSettings, hello_timeout: float) -> float:
    """Seconds between two deadline sweeps: a quarter of the shortest deadline, within
    [0.05, 1]."""
    shortest = min(settings.frame_deadline, hello_timeout, settings.idle_timeout or float("inf"))
    return min(1.0, max(0.05, shortest / 4))


# ------------------------------------------------------------------------ publish quotas
class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up; starts full."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.stamp = now

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def has(self, amount: float) -> bool:
        return self.tokens >= amount


class _Client:
    __slots__ = ("count", "volume")

    def __init__(self, count: TokenBucket | None, volume: TokenBucket | None) -> None:
        self.count = count
        self.volume = volume


class PublishQuotas:
    """Publish quotas per client (see the module docstring); `check` says whether one more
    publication of a given size is allowed now, and takes its tokens if it is."""

    def __init__(self, settings: LimitSettings, largest: int, max_clients: int = MAX_QUOTA_CLIENTS) -> None:
        """`largest`: the largest payload a publication can have anyway (the frame limit);
        the byte bucket holds at least one such publication."""
        self.rate = settings.publish_rate
        self.burst = settings.publish_burst or max(1.0, settings.publish_rate)
        self.bytes_rate = settings.publish_bytes_rate
        self.max_bytes = settings.publish_max_bytes
        self.largest = self.max_bytes or largest
        self.max_clients = max_clients
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """Whether any quota is set."""
        return bool(self.rate or self.bytes_rate or self.max_bytes)

    def check(self, client: str, size: int, now: float) -> tuple[str, str] | None:
        """None if `client` may publish `size` payload bytes at `now` (the publication is
        then charged), else (code, detail) with a QUOTA_* code."""
        if self.max_bytes and size > self.max_bytes:
            return QUOTA_SIZE, f"a publication of {size} bytes exceeds the limit of {self.max_bytes} bytes"
        state = self._state(client, now)
        if state.count is not None:
            state.count.refill(now)
            if not state.count.has(1):
                return QUOTA_RATE, f"more than {self.rate:g} publications per second"
        if state.volume is not None:
            state.volume.refill(now)
            if not state.volume.has(size):
                return QUOTA_BYTES, f"more than {self.bytes_rate:g} payload bytes per second"
            state.volume.tokens -= size
        if state.count is not None:
            state.count.tokens -= 1
        return None

    def _state(self, client: str, now: float) -> _Client:
        state = self._clients.get(client)
        if state is not None:
            self._clients.move_to_end(client)
            return state
        count = TokenBucket(self.rate, self.burst, now) if self.rate else None
        volume = None
        if self.bytes_rate:
            volume = TokenBucket(self.bytes_rate, max(self.bytes_rate, float(self.largest)), now)
        state = self._clients[client] = _Client(count, volume)
        while len(self._clients) > self.max_clients:
            self._clients.popitem(last=False)
        return state
