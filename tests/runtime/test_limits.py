"""The resource-limit pieces of `pubsub.runtime.limits` and `pubsub.runtime.tlscount`, alone
(no sockets): caps from the descriptor limit, per-source counting, the shared frame
buffer, the deadline rule, token-bucket quotas, handshake failure reasons, the settings."""

from __future__ import annotations

import ssl
from collections import Counter
from dataclasses import dataclass

import pytest

from pubsub.runtime import limits
from pubsub.runtime.limits import (
    BufferPool,
    Caps,
    ConnectionCounts,
    PublishQuotas,
    connection_caps,
    overdue,
    source_of,
    sweep_period,
)
from pubsub.runtime.settings import RuntimeSettings, SettingsError, load
from pubsub.runtime.tlscount import reason_of


def test_caps_leave_the_reserve_of_descriptors() -> None:
    caps = connection_caps(RuntimeSettings(), nofile=1024)
    assert caps == Caps(total=1024 - 64, per_source=(1024 - 64) // 4)
    # explicit caps are kept, but never above what the descriptors allow
    assert connection_caps(RuntimeSettings(max_connections=100), nofile=1024) == Caps(100, 25)
    assert connection_caps(RuntimeSettings(max_connections=5000), nofile=1024).total == 960
    assert connection_caps(RuntimeSettings(max_connections=40), nofile=1024).per_source == 16
    assert connection_caps(RuntimeSettings(max_connections=10), nofile=1024).per_source == 10
    assert connection_caps(RuntimeSettings(max_connections_per_source=3), nofile=1024).per_source == 3
    # a tiny descriptor limit still admits something
    assert connection_caps(RuntimeSettings(), nofile=10) == Caps(1, 1)


def test_descriptor_limit_is_this_process_s() -> None:
    import resource

    assert limits.descriptor_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_connection_counts_refuse_over_each_cap_and_release() -> None:
    counts = ConnectionCounts(Caps(total=3, per_source=2))
    assert counts.admit("10.0.0.1") is None
    assert counts.admit("10.0.0.1") is None
    assert counts.admit("10.0.0.1") == limits.REFUSED_PER_SOURCE
    assert counts.admit("10.0.0.2") is None
    assert counts.admit("10.0.0.3") == limits.REFUSED_TOTAL
    assert counts.total == 3 and counts.held("10.0.0.1") == 2
    counts.release("10.0.0.1")
    assert counts.admit("10.0.0.3") is None
    counts.release("never-seen")  # nothing to release: no change
    assert counts.total == 3


def test_source_of_takes_the_address_without_the_port() -> None:
    assert source_of("127.0.0.1:5555") == "127.0.0.1"
    assert source_of("::1:5555") == "::1"
    assert source_of("unix") == "unix"


def test_buffer_pool_lends_beyond_the_allowance_up_to_its_capacity() -> None:
    pool = BufferPool(capacity=1000, allowance=100)
    assert pool.settle(0, 50) == 0 and pool.lent == 0
    a = pool.settle(0, 700)
    assert a == 600 and pool.lent == 600
    b = pool.settle(0, 400)
    assert b == 300 and pool.lent == 900
    assert pool.settle(b, 600) is None  # would need 500: only 400 left with b's returned
    assert pool.lent == 600  # b's share went back when it was refused
    assert pool.settle(a, 1100) == 1000 and pool.lent == 1000
    assert pool.settle(1000, 0) == 0 and pool.lent == 0
    pool.give_back(5)
    assert pool.lent == 0


@dataclass
class _Conn:
    role: str | None
    frame_started: float | None
    last_active: float


def test_overdue_frames_and_idle_clients() -> None:
    s = RuntimeSettings(frame_deadline=5, idle_timeout=60)
    assert overdue(_Conn("peer", 100.0, 0.0), 104.0, s, False) is None
    assert overdue(_Conn("peer", 100.0, 0.0), 106.0, s, False) == limits.FRAME_DEADLINE
    assert overdue(_Conn(None, 100.0, 0.0), 106.0, s, False) == limits.FRAME_DEADLINE
    assert overdue(_Conn("client", None, 100.0), 159.0, s, False) is None
    assert overdue(_Conn("client", None, 100.0), 161.0, s, False) == limits.IDLE
    # a stream is never idle; a peer neither
    assert overdue(_Conn("client", None, 100.0), 1000.0, s, True) is None
    assert overdue(_Conn("peer", None, 100.0), 1000.0, s, False) is None
    # idle_timeout 0 turns the idle rule off
    off = RuntimeSettings(idle_timeout=0)
    assert overdue(_Conn("client", None, 0.0), 10**6, off, False) is None
    assert sweep_period(s, 10.0) == 1.0
    assert sweep_period(RuntimeSettings(frame_deadline=0.4), 10.0) == pytest.approx(0.1)


def test_quotas_rate_bytes_and_size() -> None:
    quotas = PublishQuotas(RuntimeSettings(publish_rate=2, publish_burst=3), largest=1 << 20)
    assert quotas.enabled
    assert [quotas.check("a", 10, 0.0) for _ in range(3)] == [None, None, None]
    assert quotas.check("a", 10, 0.0) == (limits.QUOTA_RATE, "more than 2 publications per second")
    assert quotas.check("b", 10, 0.0) is None  # another client has its own bucket
    assert quotas.check("a", 10, 0.5) is None  # one token back after half a second
    assert quotas.check("a", 10, 0.5) is not None

    volume = PublishQuotas(RuntimeSettings(publish_bytes_rate=100, publish_max_bytes=300), largest=1 << 20)
    assert volume.check("a", 301, 0.0) == (
        limits.QUOTA_SIZE, "a publication of 301 bytes exceeds the limit of 300 bytes"
    )
    assert volume.check("a", 300, 0.0) is None  # the burst holds one largest publication
    code = volume.check("a", 50, 0.1)
    assert code is not None and code[0] == limits.QUOTA_BYTES
    assert volume.check("a", 50, 0.6) is None
    assert not PublishQuotas(RuntimeSettings(), largest=1).enabled


def test_quotas_forget_the_least_recent_client_beyond_their_bound() -> None:
    quotas = PublishQuotas(RuntimeSettings(publish_rate=1), largest=1, max_clients=2)
    assert quotas.check("a", 1, 0.0) is None
    assert quotas.check("a", 1, 0.0) is not None
    quotas.check("b", 1, 0.0)
    quotas.check("c", 1, 0.0)  # "a" is forgotten: it starts again with a full bucket
    assert quotas.check("a", 1, 0.0) is None


def test_handshake_failure_reasons() -> None:
    assert reason_of(ssl.SSLCertVerificationError(1, "certificate verify failed")) == "certificate"
    unknown_ca = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca")
    assert reason_of(unknown_ca) == "certificate"
    assert reason_of(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")) == "protocol"
    assert reason_of(ssl.SSLError(1, "[SSL: HTTP_REQUEST] http request")) == "protocol"
    assert reason_of(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")) == "closed"
    assert reason_of(ConnectionResetError()) == "closed"
    assert reason_of(ssl.SSLError(1, "something new")) == "other"


def test_limit_settings_from_the_environment_and_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    from pathlib import Path

    from pubsub.runtime.settings import ConfigFile

    monkeypatch.setenv("PUBSUB_FRAME_DEADLINE", "7.5")
    monkeypatch.setenv("PUBSUB_PUBLISH_RATE", "20")
    path = Path(str(tmp_path)) / "daemon.yaml"
    path.write_text("idle_timeout: 45\nmax-connections-per-source: 9\n")
    s = load(RuntimeSettings, config=ConfigFile.read(path))
    assert (s.frame_deadline, s.publish_rate, s.idle_timeout, s.max_connections_per_source) == (7.5, 20, 45, 9)
    monkeypatch.setenv("PUBSUB_FRAME_DEADLINE", "0")
    with pytest.raises(SettingsError, match="frame_deadline .*PUBSUB_FRAME_DEADLINE"):
        load(RuntimeSettings)


def test_counters_are_in_the_status_snapshot() -> None:
    from pubsub.runtime.stats import Stats

    stats = Stats()
    stats.refused["per_source"] += 2
    stats.tls_failures["certificate"] += 1
    snap = stats.snapshot()
    assert snap["refused"] == {"per_source": 2} and snap["tls_failures"] == {"certificate": 1}
    assert snap["closed"] == {} and snap["quota"] == {}
    assert isinstance(stats.quota, Counter)
