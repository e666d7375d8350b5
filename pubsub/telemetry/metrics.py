"""Prometheus metrics of the daemons, their HTTP endpoint, and the telemetry wiring.

Every daemon started with ``--metrics-port PORT`` serves ``GET /metrics`` (the Prometheus
text format) on ``--metrics-host`` (default 127.0.0.1).  Each daemon has its own
`CollectorRegistry`, so several daemons may run in one process (the tests do).

Nothing is counted twice: the collectors read what the daemon keeps anyway -- the
runtime's `pubsub.runtime.stats.Stats`, the cores' status and counters -- when Prometheus scrapes.
Only what exists nowhere else is counted here: deliveries by arrival path with their
latency (`DeliveryMetrics`, an `Observer` of the node) and the supervisor's configuration
requests and sends (counted by `pubsub.supervisor.app.SupervisorApp`).

The endpoint is served by the daemon's own event loop (`MetricsServer`, a minimal HTTP/1.1
responder), so a scrape reads the state between two protocol steps, never while one runs
in another thread.

Label values come from bounded sets only: message kinds (the registered messages), error
codes and rejection reasons (fixed in the code), arrival paths (local, handover, tree, flood,
antientropy) and topics.  Counters whose label values are fixed in advance (error codes --
the admin listener's too where it is open --, reasons, arrival paths, and the message types
of the daemon's mode, `pubsub.runtime.host.Instruments`) report every value from the start,
0 until it is counted, so that ``rate`` and ``absent`` tell zero from missing; topics appear
when seen.
Topics are chosen by users, so at most ``metrics_max_topics`` (default 64) topics get their
own ``topic`` value, the first ones seen, for the life of the process; any further topic is
folded into ``topic="_other"`` (sums; the largest label length).  No label carries a peer's
reference.  The table of metrics is in the README.

`Telemetry` starts what the settings ask for (the endpoint, the event stream of
`pubsub.telemetry.events`) for one daemon and stops it again.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from pubsub.kernel.contracts import Measure
from pubsub.runtime import limits, tlscount
from pubsub.runtime.stats import ERROR_CODES
from pubsub.telemetry.events import EventWriter

log = logging.getLogger(__name__)

#: The value of the ``topic`` label for topics beyond the cap.
OTHER_TOPIC = "_other"
#: The Prometheus text format served (version 0.0.4 is what every Prometheus 2.x reads).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Upper bounds (s) of the delivery latency histogram's buckets.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)
#: Seconds a client of the metrics endpoint may take to send its request.
REQUEST_TIMEOUT = 5.0
#: Longest request head (request line and headers) the endpoint reads.
MAX_REQUEST_BYTES = 16 * 1024


class MetricsError(RuntimeError):
    """The metrics endpoint cannot start; the message is one line for the operator."""


class TopicLabels:
    """Maps topics to ``topic`` label values: the first `cap` topics seen keep their own
    value for the life of the process, later ones share `OTHER_TOPIC`."""

    def __init__(self, cap: int = 64) -> None:
        if cap < 1:
            raise ValueError("the topic label cap must be at least 1")
        self.cap = cap
        self._own: set[str] = set()

    def __call__(self, topic: str) -> str:
        if topic in self._own:
            return topic
        if len(self._own) < self.cap:
            self._own.add(topic)
            return topic
        return OTHER_TOPIC


class LatencyHistogram:
    """Cumulative histogram of latencies (s) per arrival path, read by a collector."""

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.bounds = tuple(sorted(buckets))
        self.counts: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}

    def observe(self, via: str, seconds: float) -> None:
        counts = self.counts.get(via)
        if counts is None:
            counts = self.counts[via] = [0] * (len(self.bounds) + 1)
        counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.sums[via] = self.sums.get(via, 0.0) + seconds

    def family(self, name: str, documentation: str, known: Iterable[str] = ()) -> HistogramMetricFamily:
        """The histogram of every path observed and of each of `known` (empty until observed)."""
        family = HistogramMetricFamily(name, documentation, labels=["via"])
        empty = [0] * (len(self.bounds) + 1)
        for via in sorted(set(self.counts) | set(known)):
            cumulative, running = [], 0
            for bound, count in zip((*self.bounds, float("inf")), self.counts.get(via, empty), strict=True):
                running += count
                cumulative.append((_bound(bound), running))
            family.add_metric([via], cumulative, sum_value=self.sums.get(via, 0.0))
        return family


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(float(value))


# ------------------------------------------------------------------------------- collectors
def counter_family(name: str, doc: str, value: float) -> CounterMetricFamily:
    """A counter of one value, without labels (the daemons' collectors use it)."""
    return CounterMetricFamily(name, doc, value=value)


def gauge_family(name: str, doc: str, value: float) -> GaugeMetricFamily:
    """A gauge of one value, without labels."""
    return GaugeMetricFamily(name, doc, value=value)


def by_label(
    family: CounterMetricFamily | GaugeMetricFamily, values: Mapping[str, float], known: Iterable[str] = ()
) -> CounterMetricFamily | GaugeMetricFamily:
    """`family` with a sample per label value of `values`, and one (0 until counted) for
    each of `known`: the label values fixed in advance."""
    for key, value in sorted(({key: 0 for key in known} | dict(values)).items()):
        family.add_metric([key], value)
    return family


def overlay_families(measures: Iterable[Measure]) -> Iterator[Metric]:
    """An overlay core's own metrics (its optional ``measures()``: the tco supervisor's
    degrees, coverage and repairs; omen's churn events and refusals), one family per name,
    its label values as given."""
    families: dict[str, Metric] = {}
    for name, help_text, kind, labels, value in measures:
        family = families.get(name)
        if family is None:
            cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            family = families[name] = cls(name, help_text, labels=sorted(labels))
        family.add_metric([labels[k] for k in sorted(labels)], value)  # type: ignore[attr-defined]
    yield from families.values()


#: The runtime's resource-limit counters (`pubsub.runtime.limits`), each by reason: name,
#: `Stats` attribute, help, the reasons.
LIMIT_COUNTERS = (
    ("pubsub_connections_refused", "refused",
     "Connections closed as soon as accepted, over a cap (reason: total, per_source).",
     limits.REFUSED_REASONS),
    ("pubsub_connections_closed", "closed",
     "Connections closed by a limit (reason: hello_deadline, frame_deadline, idle_timeout, "
     "buffer_limit).", limits.CLOSED_REASONS),
    ("pubsub_publish_quota_refused", "quota",
     "Publications refused by a client's quota (reason: quota_rate, quota_bytes, quota_size).",
     limits.QUOTA_REASONS),
    ("pubsub_tls_handshake_failures", "tls_failures",
     "TLS handshakes on this daemon's port that failed (reason: certificate, protocol, closed, "
     "incomplete, other).", tlscount.REASONS),
)


class RuntimeCollector:
    """The network runtime's counters (`pubsub.runtime.stats.Stats`), for every daemon."""

    def __init__(
        self, stats: Any, role: str, ref: str, app: Any = None, kinds: Iterable[str] = ()
    ) -> None:
        self.stats = stats
        self.role = role
        self.ref = ref
        self.app = app
        self.events: EventWriter | None = None
        #: The message kinds the daemon speaks: the message and byte counters have a sample
        #: for each from the start (any other kind counted appears when counted).
        self.kinds = tuple(kinds)
        #: The error codes with a sample from the start (the host adds the admin listener's).
        self.error_codes: tuple[str, ...] = ERROR_CODES

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        info = GaugeMetricFamily(
            "pubsub_daemon_info", "This daemon: its role and reference (value 1).",
            labels=["role", "ref"],
        )
        info.add_metric([self.role, self.ref], 1)
        yield info
        yield by_label(
            CounterMetricFamily(
                "pubsub_messages_sent",
                "Messages written to peers and clients, by type (those that travelled in a "
                "bundle frame by their own type; the bundle frames as type=\"bundle\").",
                labels=["type"],
            ),
            Counter(s.frames_out) + Counter(getattr(s, "bundled_out", {})),
            self.kinds,
        )
        yield by_label(
            CounterMetricFamily(
                "pubsub_messages_received",
                "Valid messages read, by type (bundles counted as for pubsub_messages_sent).",
                labels=["type"],
            ),
            Counter(s.frames_in) + Counter(getattr(s, "bundled_in", {})),
            self.kinds,
        )
        yield by_label(
            CounterMetricFamily(
                "pubsub_sent_bytes", "Bytes of frames written (with the 4-byte header), by type.",
                labels=["type"],
            ),
            s.bytes_out,
            self.kinds,
        )
        yield by_label(
            CounterMetricFamily(
                "pubsub_received_bytes", "Bytes of valid frames read (with the header), by type.",
                labels=["type"],
            ),
            s.bytes_in,
            self.kinds,
        )
        yield by_label(
            CounterMetricFamily(
                "pubsub_frame_errors",
                "Rejected input and runtime failures, by code (bad_msgpack, truncated_frame, "
                "frame_too_large, unknown_type, bad_field, handler_error, ...).",
                labels=["code"],
            ),
            s.errors,
            self.error_codes,
        )
        yield counter_family(
            "pubsub_dropped_sends", "Frames dropped (queue full, peer unreachable, stopping).",
            s.dropped_sends,
        )
        yield counter_family(
            "pubsub_peers_unreachable",
            "Times a peer was reported unreachable after repeated failed connects.",
            s.peers_unreachable,
        )
        yield gauge_family("pubsub_connections_open", "Open TCP connections.", s.connections_open)
        for name, attr, doc, reasons in LIMIT_COUNTERS:
            yield by_label(CounterMetricFamily(name, doc, labels=["reason"]), getattr(s, attr, {}), reasons)
        if self.app is not None:
            yield counter_family(
                "pubsub_timeout_intervals", "Timeout actions run since the start.",
                getattr(self.app, "intervals", 0),
            )
        if self.events is not None:
            counts = self.events.counters()
            yield counter_family(
                "pubsub_events_written", "Events moved into the run directory.", counts["written"]
            )
            yield counter_family(
                "pubsub_events_dropped", "Events lost to disk errors.", counts["dropped"]
            )
            yield counter_family(
                "pubsub_events_write_errors",
                "Disk errors of the event stream (open, write, rename).",
                counts["errors"],
            )


def registry_for(*collectors: Any) -> CollectorRegistry:
    """A registry of its own (not the global one) holding `collectors`."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return registry


def parse_http_request_head(head: bytes) -> tuple[str, str]:
    """(method, path without query) of an HTTP request head; ValueError if malformed."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError(f"bad request line {line[:80]!r}")
    return parts[0], parts[1].split("?", 1)[0]


class MetricsServer:
    """``GET /metrics`` on the daemon's event loop (HTTP/1.1, one request per connection)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.scrapes = 0
        self.bad_requests = 0

    async def start(self) -> None:
        """Bind and serve; MetricsError if the address cannot be bound."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise MetricsError(
                f"cannot serve metrics on {self.host}:{self.port}: {reason.lower()}"
            ) from None
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_REQUEST_BYTES:
                raise ValueError("request head too long")
            method, path = parse_http_request_head(head)
            if method not in ("GET", "HEAD"):
                status, body, ctype = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif path not in ("/metrics", "/"):
                status, body, ctype = "404 Not Found", b"see /metrics\n", "text/plain"
            else:
                self.scrapes += 1
                status, body, ctype = "200 OK", generate_latest(self.registry), CONTENT_TYPE
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (b"" if method == "HEAD" else body)
            )
            await writer.drain()
        except (TimeoutError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            self.bad_requests += 1
            with contextlib.suppress(Exception):
                writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        except (ConnectionError, OSError):
            pass
        except Exception:  # noqa: BLE001 - a failing collector must not stop the daemon
            self.bad_requests += 1
            log.exception("metrics scrape failed")
            with contextlib.suppress(Exception):
                writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)


def parse_families(text: str) -> dict[str, Any]:
    """name -> metric family of an exposition (for tests and tools)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str) -> Iterable[tuple[str, dict[str, str], float]]:
    """(sample name, labels, value) of every sample of an exposition."""
    for family in parse_families(text).values():
        for sample in family.samples:
            yield sample.name, dict(sample.labels), float(sample.value)


def prometheus_config(
    target_files: Sequence[str | Any],
    *,
    scrape_interval: str = "5s",
    job: str = "pubsub",
) -> str:
    """A minimal Prometheus configuration (YAML) scraping the file_sd `target_files`
    (e.g. a cluster's ``prometheus-targets.json``); deploy/prometheus.yml is the annotated
    one for operators."""
    files = ", ".join(json.dumps(str(f)) for f in target_files)
    return (
        "global:\n"
        f"  scrape_interval: {scrape_interval}\n"
        f"  scrape_timeout: {scrape_interval}\n"
        f"  evaluation_interval: {scrape_interval}\n"
        "scrape_configs:\n"
        f"  - job_name: {json.dumps(job)}\n"
        "    file_sd_configs:\n"
        f"      - files: [{files}]\n"
        f"        refresh_interval: {scrape_interval}\n"
    )
