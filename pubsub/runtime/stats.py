"""What a runtime counts (`Stats`, put into every daemon's status reply and exported to
Prometheus by `pubsub.telemetry.metrics`), and `LogLimiter`, which keeps a flood of bad
input from becoming a flood of log lines."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from typing import Any

from pubsub.kernel.wire import ERROR_CODES as WIRE_ERROR_CODES

#: The codes `Stats.errors` counts that are fixed in advance (Prometheus reports each from
#: the start, 0 until it happens, `pubsub.telemetry.metrics`): the wire's, a frame cut short,
#: the runtime's refusals and failures, and the daemons' (store_error: node and supervisor,
#: persist_error: node).  The admin listener's codes are `ADMIN_ERROR_CODES`.
ERROR_CODES = (
    *WIRE_ERROR_CODES,
    "truncated_frame",
    "no_hello",
    "bad_hello",
    "duplicate_hello",
    "identity_mismatch",
    "forbidden_sender",
    "forbidden",
    "permission_denied",
    "bundle_from_client",
    "nested_bundle",
    "request_on_stream",
    "peer_error_reply",
    "bad_send",
    "bad_destination",
    "handler_error",
    "runtime_error",
    "permissions_reload_error",
    "event_error",
    "telemetry_error",
    "store_error",
    "persist_error",
)

#: The codes the admin listener (`pubsub.runtime.adminserver`) counts in `Stats.errors`, each
#: as ``admin_<code>``: bad input (the wire's codes, a frame cut short, no Hello, an identity
#: not allowed admin actions) and refused requests (not a chaos request; the `ChaosError`
#: codes of the generic actions, `pubsub.runtime.admin` and `adminparams`, and of the
#: daemons' own, pubsub/node/faults.py, pubsub/supervisor/faults.py, broker/faults.py).  A daemon
#: with an admin listener reports each from the start (`pubsub.runtime.host`).
ADMIN_ERROR_CODES = tuple(
    f"admin_{code}"
    for code in (
        *WIRE_ERROR_CODES,
        "truncated_frame",
        "no_hello",
        "permission_denied",
        "unsupported",
        "bad_params",
        "unknown_topic",
        "nothing_to_corrupt",
        "bad_rate",
        "bad_link",
    )
)


class Stats:
    """Counters of one runtime; `snapshot` is JSON-able and goes into status replies."""

    def __init__(self) -> None:
        self.frames_in: Counter[str] = Counter()
        self.bytes_in: Counter[str] = Counter()
        self.frames_out: Counter[str] = Counter()
        self.bytes_out: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.dropped_sends = 0
        self.peers_unreachable = 0
        self.local_deliveries = 0
        self.connections_accepted = 0
        self.connections_opened = 0
        self.connections_retired = 0
        self.connections_open = 0
        self.connect_failures = 0
        #: Peer frames discarded by injected faults (`NetworkFaults`), by reason.
        self.fault_drops: Counter[str] = Counter()
        #: Messages that travelled inside bundle frames (`pubsub.runtime.bundling`), by kind;
        #: frames_out / frames_in count the bundle frames themselves as kind "bundle".
        self.bundled_out: Counter[str] = Counter()
        self.bundled_in: Counter[str] = Counter()
        #: Resource limits (`pubsub.runtime.limits`): connections refused when accepted and
        #: closed by a deadline or the buffer cap, publications refused by a quota, failed
        #: TLS handshakes (`pubsub.runtime.tlscount`) -- each by reason.
        self.refused: Counter[str] = Counter()
        self.closed: Counter[str] = Counter()
        self.quota: Counter[str] = Counter()
        self.tls_failures: Counter[str] = Counter()

    def error(self, code: str) -> None:
        """Count one error of kind `code`."""
        self.errors[code] += 1

    def snapshot(self) -> dict[str, Any]:
        """All counters as plain dicts and ints, and the daemon's process id (`pid`: tools
        that started a daemon check that its address is answered by that process)."""
        return {
            "pid": os.getpid(),
            "frames_in": dict(self.frames_in),
            "bytes_in": dict(self.bytes_in),
            "frames_out": dict(self.frames_out),
            "bytes_out": dict(self.bytes_out),
            "errors": dict(self.errors),
            "dropped_sends": self.dropped_sends,
            "peers_unreachable": self.peers_unreachable,
            "local_deliveries": self.local_deliveries,
            "connections_accepted": self.connections_accepted,
            "connections_opened": self.connections_opened,
            "connections_retired": self.connections_retired,
            "connections_open": self.connections_open,
            "connect_failures": self.connect_failures,
            "fault_drops": dict(self.fault_drops),
            "bundled_out": dict(self.bundled_out),
            "bundled_in": dict(self.bundled_in),
            "refused": dict(self.refused),
            "closed": dict(self.closed),
            "quota": dict(self.quota),
            "tls_failures": dict(self.tls_failures),
        }


class LogLimiter:
    """Logs a given key at most once per `period` seconds, reporting how many were held back."""

    MAX_KEYS = 10_000

    def __init__(self, logger: logging.Logger, period: float = 60.0) -> None:
        self._log = logger
        self._period = period
        self._seen: dict[tuple[object, ...], list[float]] = {}  # key -> [last time, held back]

    def log(
        self, key: tuple[object, ...], level: int, msg: str, *args: object, exc_info: bool = False
    ) -> None:
        now = asyncio.get_running_loop().time()
        entry = self._seen.get(key)
        if entry is not None and now - entry[0] < self._period:
            entry[1] += 1
            return
        if len(self._seen) >= self.MAX_KEYS:
            self._seen.clear()
        held = int(entry[1]) if entry else 0
        self._seen[key] = [now, 0]
        if held:
            msg += " (%d similar messages suppressed)"
            args = (*args, held)
        self._log.log(level, msg, *args, exc_info=exc_info)
