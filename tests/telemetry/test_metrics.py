"""Prometheus metrics (`pubsub.telemetry.metrics`): the endpoint of daemons running in this process,
scraped over HTTP with urllib and parsed with prometheus_client's parser.

(A real Prometheus server scraping real processes: tests/telemetry/test_prometheus_scrape.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import random
import re
import socket
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest

from broker import telemetry as broker_telemetry
from pubsub.client.library import Client
from pubsub.kernel import registry
from pubsub.kernel.message import Ref, Topic
from pubsub.node.telemetry import REJECTION_REASONS, node_instrument
from pubsub.ops.processes import pick_free_ports
from pubsub.publications.kinds import SHARED_KINDS
from pubsub.runtime.host import Telemetry
from pubsub.runtime.settings import TelemetrySettings
from pubsub.runtime.stats import ADMIN_ERROR_CODES, ERROR_CODES, Stats
from pubsub.skipring import admission
from pubsub.skipring.labels import l
from pubsub.skipring.messages import SetData
from pubsub.skipring.nodecore import NodeCore
from pubsub.skipring.supervisor.core import SupervisorCore
from pubsub.supervisor.app import SupervisorApp
from pubsub.supervisor.telemetry import SupervisorCollector, supervisor_instrument
from pubsub.telemetry.metrics import (
    OTHER_TOPIC,
    MetricsError,
    MetricsServer,
    RuntimeCollector,
    TopicLabels,
    parse_families,
    registry_for,
    samples,
)
from tests.integration.test_daemons import supervisor, wait_until
from tests.node.test_node_publications import pnode, run

T = Topic("news")


def telemetry_settings(**extra: Any) -> TelemetrySettings:
    return TelemetrySettings(metrics_port=pick_free_ports(1)[0], **extra)


@contextlib.asynccontextmanager
async def metered(role: str, app: Any, stats: Any, **extra: Any) -> AsyncIterator[Telemetry]:
    instrument = (node_instrument if role == "node" else supervisor_instrument)(app, stats, admission.KINDS)
    telemetry = await Telemetry.start(role, app, stats, telemetry_settings(**extra), instrument)
    try:
        yield telemetry
    finally:
        await telemetry.stop()


async def scrape(telemetry: Telemetry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the daemon's endpoint, fetched with urllib in a thread."""
    assert telemetry.server is not None
    url = f"http://127.0.0.1:{telemetry.server.port}/metrics"

    def fetch() -> tuple[str, str]:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.headers["Content-Type"], reply.read().decode()

    content_type, text = await asyncio.to_thread(fetch)
    assert content_type.startswith("text/plain; version=0.0.4")
    return {(name, frozenset(labels.items())): value for name, labels, value in samples(text)}


def value(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


@pytest.mark.parametrize(
    "mode, fast, carrier", [("flood", "flood", "publish_new"), ("tree", "tree", "spread")]
)
def test_supervisor_and_node_metrics_over_http(tmp_path: Path, mode: str, fast: str, carrier: str) -> None:
    """Members per topic and configuration traffic at the supervisor; label length,
    degree, trie size, deliveries by path with their latency and message counts by type
    at the nodes -- with the paper's flooding and with the arc broadcast."""

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, sapp),
            metered("supervisor", sapp, srt.stats) as sup_metrics,
            pnode(srt.ref, None, dissemination=mode) as (art, aapp),
            metered("node", aapp, art.stats) as a_metrics,
            pnode(srt.ref, None, dissemination=mode) as (brt, bapp),
            metered("node", bapp, brt.stats) as b_metrics,
        ):
            async with Client(art.ref) as a, Client(brt.ref) as b:
                await a.join(T)
                await b.join(T)

                async def ring_ready() -> bool:
                    degrees = [await scrape(m) for m in (a_metrics, b_metrics)]
                    return all(value(f, "pubsub_node_degree", topic=T) == 1.0 for f in degrees)

                await wait_until(ring_ready, what="a ring of two nodes")
                for i in range(3):
                    await a.publish(T, f"m{i}")

                async def all_arrived() -> bool:
                    found = await scrape(b_metrics)
                    return value(found, "pubsub_trie_publications", topic=T) == 3.0

                await wait_until(all_arrived, what="three publications at b")

            found = await scrape(sup_metrics)
            assert value(found, "pubsub_topic_members", topic=T) == 2.0
            assert value(found, "pubsub_topic_legitimate_database", topic=T) == 1.0
            assert value(found, "pubsub_supervisor_topics") == 1.0
            assert value(found, "pubsub_daemon_info", role="supervisor", ref=srt.ref) == 1.0
            sent = value(found, "pubsub_supervisor_configurations_sent_total", kind="configuration")
            assert sent is not None and sent >= 2  # at least one per subscribe
            assert sent <= sapp.core.config_counters["configurations_sent"]  # it keeps sending per Timeout
            requests = value(found, "pubsub_supervisor_configuration_requests_total")
            assert requests is not None and requests <= sapp.core.config_counters["configuration_requests"]
            assert value(found, "pubsub_supervisor_crashes_detected_total") == 0.0
            subscribes = value(found, "pubsub_messages_received_total", type="subscribe")
            assert subscribes is not None and subscribes >= 2

            a_found = await scrape(a_metrics)
            b_found = await scrape(b_metrics)
            for found in (a_found, b_found):
                assert value(found, "pubsub_node_label_length", topic=T) == 1.0
                assert value(found, "pubsub_node_degree", topic=T) == 1.0
                assert value(found, "pubsub_trie_publications", topic=T) == 3.0
                assert value(found, "pubsub_node_topics") == 1.0
            # a stored its own three; b got them by the fast path or anti-entropy
            assert value(a_found, "pubsub_publications_delivered_total", via="local") == 3.0
            b_paths = [
                value(b_found, "pubsub_publications_delivered_total", via=via) or 0.0
                for via in (fast, "antientropy")
            ]
            assert sum(b_paths) == 3.0
            assert value(b_found, "pubsub_publications_delivered_total", via="local") == 0.0
            latency = sum(
                value(b_found, "pubsub_delivery_latency_seconds_count", via=via) or 0.0
                for via in (fast, "antientropy")
            )
            assert latency == 3.0  # each carried its publish time
            assert value(a_found, "pubsub_delivery_latency_seconds_bucket", via="local", le="+Inf") == 3.0
            assert (value(a_found, "pubsub_messages_sent_total", type=carrier) or 0) >= 3
            assert (value(a_found, "pubsub_sent_bytes_total", type=carrier) or 0) > 0
            assert value(a_found, "pubsub_frame_errors_total", code="bad_msgpack") == 0.0  # known, none counted
            assert value(a_found, "pubsub_messages_received_total", type="key_request") == 0.0  # no TLS
            assert value(b_found, "pubsub_sent_bytes_total", type="hand_over") == 0.0
            assert value(a_found, "pubsub_daemon_info", role="node", ref=art.ref) == 1.0

    run(scenario())


def test_every_label_value_comes_from_a_bounded_set(tmp_path: Path) -> None:
    """No label carries a peer's reference: only types, codes, paths, kinds and topics."""

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, sapp),
            metered("supervisor", sapp, srt.stats) as sup_metrics,
            pnode(srt.ref, None) as (art, aapp),
            metered("node", aapp, art.stats) as a_metrics,
        ):
            async with Client(art.ref) as a:
                await a.join(T)
                await a.publish(T, "x")
            for telemetry, own in ((sup_metrics, srt.ref), (a_metrics, art.ref)):
                found = await scrape(telemetry)
                keys = {k for (_, labels) in found for k, _ in labels}
                assert keys <= {"type", "code", "via", "kind", "reason", "topic", "le", "role", "ref"}
                refs = {v for (name, labels) in found for k, v in labels if k == "ref"}
                assert refs == {own}  # only the daemon's own reference, in pubsub_daemon_info

    run(scenario())


def test_topics_beyond_the_cap_fold_into_other(tmp_path: Path) -> None:
    labels = TopicLabels(cap=2)
    assert [labels(t) for t in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER_TOPIC, "a", OTHER_TOPIC, "b"]

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, sapp),
            metered("supervisor", sapp, srt.stats, metrics_max_topics=2) as sup_metrics,
            pnode(srt.ref, None) as (art, aapp),
        ):
            async with Client(art.ref) as a:
                for topic in ("t1", "t2", "t3", "t4"):
                    await a.join(topic)

                async def four_topics() -> bool:
                    return len(sapp.core.status()["topics"]) == 4  # type: ignore[arg-type]

                await wait_until(four_topics, what="four topics at the supervisor")
            found = await scrape(sup_metrics)
            members = {
                dict(labels)["topic"]: v
                for (name, labels), v in found.items()
                if name == "pubsub_topic_members"
            }
            assert members == {"t1": 1.0, "t2": 1.0, OTHER_TOPIC: 2.0}

    run(scenario())


def test_endpoint_answers_bad_requests_and_keeps_serving() -> None:
    async def scenario() -> None:
        stats = SimpleNamespace(
            frames_out={}, frames_in={}, bytes_out={}, bytes_in={}, errors={},
            dropped_sends=0, peers_unreachable=0, connections_open=0,
        )
        app = SimpleNamespace(ref="127.0.0.1:1", core=SupervisorCore(Ref("127.0.0.1:1"), rng=random.Random(1)),
                              counters={}, intervals=0, observers=[])
        async with metered("supervisor", app, stats) as telemetry:
            assert telemetry.server is not None
            port = telemetry.server.port

            def status_of(method: str, path: str) -> int:
                req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
                try:
                    with urllib.request.urlopen(req, timeout=5) as reply:
                        return int(reply.status)
                except urllib.error.HTTPError as exc:
                    return int(exc.code)

            assert await asyncio.to_thread(status_of, "GET", "/nope") == 404
            assert await asyncio.to_thread(status_of, "POST", "/metrics") == 405

            def garbage() -> bytes:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                    sock.sendall(b"\x00\xffnot http at all\r\n\r\n")
                    return sock.recv(100)

            assert (await asyncio.to_thread(garbage)).startswith(b"HTTP/1.1 400")
            assert telemetry.server.bad_requests == 1
            assert await asyncio.to_thread(status_of, "GET", "/metrics?x=1") == 200
            assert telemetry.server.scrapes == 1

    run(scenario())


def test_a_port_in_use_is_a_one_line_error() -> None:
    async def scenario() -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            server = MetricsServer(registry_for(), "127.0.0.1", port)
            with pytest.raises(MetricsError, match=f"cannot serve metrics on 127.0.0.1:{port}: address already in use"):
                await server.start()

    run(scenario())


def test_cli_refuses_a_bad_metrics_flag() -> None:
    from click.testing import CliRunner

    from pubsub.cli.main import main

    result = CliRunner().invoke(
        main, ["node", "--listen", "127.0.0.1:1", "--supervisor", "127.0.0.1:2", "--metrics-port", "70000"]
    )
    assert result.exit_code == 2 and "--metrics-port" in result.output


def supervisor_scrape(app: SupervisorApp) -> dict[str, Any]:
    return parse_families(generate_latest(registry_for(SupervisorCollector(app, TopicLabels()))).decode())


def test_supervisor_counts_crashes_and_configuration_traffic(tmp_path: Path) -> None:
    from pubsub.skipring.messages import GetConfiguration, Subscribe
    from pubsub.supervisor.store import SupervisorStore

    with SupervisorStore(tmp_path / "s") as store:
        core = SupervisorCore(Ref("s:1"), rng=random.Random(1))
        app = SupervisorApp(Ref("s:1"), core, store, None, retention=core.retention)  # type: ignore[arg-type]
        app.handle(Subscribe(T, Ref("n:1")), 0.0)
        app.handle(Subscribe(T, Ref("n:2")), 0.0)
        app.handle(GetConfiguration(T, Ref("n:1")), 0.0)
        app.handle(GetConfiguration(Topic("unknown"), Ref("n:1")), 0.0)  # answered with ⊥
        app.peer_unreachable(Ref("n:2"), 1.0)
        families = supervisor_scrape(app)

    def one(name: str, **labels: str) -> float:
        for sample in families[name].samples:
            if sample.name.endswith("_total") and dict(sample.labels) == labels:
                return float(sample.value)
        raise AssertionError(f"no {name} {labels}")

    assert one("pubsub_supervisor_crashes_detected") == 1.0
    assert one("pubsub_supervisor_configuration_requests") == 2.0
    # two subscribes and one request answered with a configuration; one ⊥
    assert one("pubsub_supervisor_configurations_sent", kind="configuration") >= 3.0
    assert one("pubsub_supervisor_configurations_sent", kind="none") == 1.0
    members = {dict(s.labels)["topic"]: s.value for s in families["pubsub_topic_members"].samples}
    assert members == {T: 1.0}


def test_antientropy_counters_survive_leaving_a_topic() -> None:
    """Counters are monotonic: a topic's core is dropped when the node leaves, its counts
    are kept (`NodeCore.publication_counters`)."""
    core = NodeCore(Ref("n:1"), Ref("s:1"), rng=random.Random(3))
    core.join(T)
    core.handle(SetData(T, None, l(0), None), 0.0)
    core.publish(T, b"x")
    core.publications[T].counters["rounds"] += 5
    before = core.publication_counters()
    assert before["rounds"] == 5 and before["published"] == 1
    core.leave(T)
    core.handle(SetData(T, None, None, None), 0.0)  # the supervisor grants the leave
    assert T not in core.publications
    assert core.publication_counters() == before


ROOT = Path(__file__).resolve().parents[2]


def test_the_label_values_reported_from_the_start_cover_the_code() -> None:
    """Every error code the code counts by a literal (but the admin listener's) is in
    `ERROR_CODES`, and every publication rejection reason in `REJECTION_REASONS`: the
    values a fresh scrape reports as 0 (tests/telemetry/test_prometheus_scrape.py)."""
    codes: set[str] = set()
    reasons: set[str] = set()
    for package in ("pubsub", "broker"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            codes.update(re.findall(r'(?:stats\.error|bad_input)\(\s*(?:conn,\s*)?"([a-z_]+)"', text))
            if package == "pubsub":  # a node's (the broker counts rejected_* of its own)
                reasons.update(re.findall(r'_reject\("([a-z_]+)"\)', text))
                reasons.update(re.findall(r'counters\["rejected_([a-z_]+)"\]', text))
    codes = {c for c in codes if not c.startswith("admin_")}
    assert {"handler_error", "truncated_frame", "store_error"} <= codes  # the patterns still match
    assert codes <= set(ERROR_CODES), sorted(codes - set(ERROR_CODES))
    assert reasons - {"malformed"} == set(REJECTION_REASONS)


#: The runtime's counters by message type.
BY_TYPE = (
    "pubsub_messages_sent_total", "pubsub_messages_received_total",
    "pubsub_sent_bytes_total", "pubsub_received_bytes_total",
)


def by_label(collector: RuntimeCollector) -> dict[str, dict[str, float]]:
    """sample name -> {the value of its one label: value} of a scrape of `collector` alone."""
    found: dict[str, dict[str, float]] = {}
    for name, labels, sample in samples(generate_latest(registry_for(collector)).decode()):
        if len(labels) == 1:
            found.setdefault(name, {})[next(iter(labels.values()))] = sample
    return found


def test_a_fresh_runtime_reports_every_kind_of_its_mode_from_the_start() -> None:
    """Messages and bytes by type have a sample, 0, for every kind the daemon speaks before
    any is counted; what is counted adds to it (bundled messages by their own type), and a
    kind outside the list still appears when counted."""
    stats = Stats()
    collector = RuntimeCollector(stats, "node", "127.0.0.1:1", kinds=admission.KINDS)
    found = by_label(collector)
    for name in BY_TYPE:
        assert found[name] == dict.fromkeys(admission.KINDS, 0.0), name
    assert found["pubsub_frame_errors_total"] == dict.fromkeys(ERROR_CODES, 0.0)

    stats.frames_out["publish"] += 2
    stats.bundled_out["publish"] += 1
    stats.frames_out["bundle"] += 1
    stats.bytes_out["publish"] += 100
    stats.frames_in["scot_pub"] += 1  # not the skip ring's: appears once counted
    collector.error_codes += ADMIN_ERROR_CODES  # as the host does with an admin listener
    stats.error("admin_no_hello")
    found = by_label(collector)
    sent = found["pubsub_messages_sent_total"]
    assert (sent["publish"], sent["bundle"], sent["ping"]) == (3.0, 1.0, 0.0)
    assert found["pubsub_sent_bytes_total"]["publish"] == 100.0
    assert set(found["pubsub_messages_received_total"]) == {*admission.KINDS, "scot_pub"}
    assert found["pubsub_frame_errors_total"] == dict.fromkeys(ERROR_CODES, 0.0) | dict.fromkeys(
        ADMIN_ERROR_CODES, 0.0
    ) | {"admin_no_hello": 1.0}


def test_each_daemon_reports_the_kinds_of_its_mode() -> None:
    """A node's and a supervisor's instruments name the skip ring's kinds, a broker's the
    brokers'; and each list holds every ``@message`` kind its mode defines (a source scan:
    the kernel's control messages are every daemon's; supervisor sharding
    (pubsub/kernel/shards.py) and the shared publication layer (pubsub/publications/) every
    overlay's; broker/ the brokers'; the package of every other registered overlay its own;
    the rest of pubsub/ the skip ring's)."""
    others = {
        mode.name: ROOT.joinpath(*importlib.import_module(module).__name__.split(".")[:-1])
        for module, mode in zip(registry.MODE_MODULES, registry.all_modes(), strict=True)
        if mode.overlay is not None and mode.name != registry.DEFAULT_OVERLAY
    }
    shared_homes = (ROOT / "pubsub" / "kernel" / "shards.py", ROOT / "pubsub" / "publications")

    def part_of(path: Path) -> str:
        if path.is_relative_to(ROOT / "broker"):
            return "broker"
        if any(path.is_relative_to(home) for home in shared_homes):
            return "shared"
        if path.is_relative_to(ROOT / "pubsub" / "kernel"):
            return "control"
        return next((name for name, home in others.items() if path.is_relative_to(home)), "skipring")

    defined: dict[str, set[str]] = {"control": set(), "shared": set(), "skipring": set(), "broker": set(),
                                    **{o: set() for o in others}}
    for package in ("pubsub", "broker"):
        for path in (ROOT / package).rglob("*.py"):
            defined[part_of(path)].update(re.findall(r'@message\(\s*"([a-z_]+)"\s*\)', path.read_text(encoding="utf-8")))
    assert {"hello", "publish", "scot_pub", "broker_heartbeat", "supervisors", "introduce"} <= set().union(
        *defined.values())
    every_overlay = defined["control"] | defined["shared"]
    assert set(SHARED_KINDS) == every_overlay
    assert set(admission.KINDS) == every_overlay | defined["skipring"]
    assert set(broker_telemetry.KINDS) == defined["control"] | defined["broker"]
    assert set(registry.overlay().kinds()) == set(admission.KINDS)
    for name in others:
        assert set(registry.overlay(name).kinds()) == every_overlay | defined[name], name

    settings = TelemetrySettings()
    app = SimpleNamespace()
    assert node_instrument(app, Stats(), admission.KINDS)(TopicLabels(), None, settings).kinds == admission.KINDS
    assert supervisor_instrument(app, Stats(), admission.KINDS)(TopicLabels(), None, settings).kinds == admission.KINDS
    assert broker_telemetry.broker_instrument(app, Stats())(TopicLabels(), None, settings).kinds == (
        broker_telemetry.KINDS
    )


def test_the_admin_codes_reported_from_the_start_cover_the_code() -> None:
    """Every code the admin listener counts (``admin_<code>``: the codes it refuses input
    with, and those of every `ChaosError` an action raises) is in `ADMIN_ERROR_CODES`."""
    codes: set[str] = set()
    for package in ("pubsub", "broker"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            codes.update(re.findall(r'ChaosError\(\s*"([a-z_]+)"', text))
            codes.update(re.findall(r'_refuse\(\s*writer,\s*source,\s*"([a-z_]+)"', text))
            codes.update(re.findall(r'stats\.error\(\s*"admin_([a-z_]+)"', text))
    codes.discard("bad_reply")  # raised by the client side, `pubsub.runtime.admin.admin_request`
    assert {"bad_params", "no_hello", "unsupported", "bad_link"} <= codes  # the patterns still match
    # besides: the wire's codes and a frame cut short (`wire.WireError`), a refused identity
    assert {f"admin_{code}" for code in codes} <= set(ADMIN_ERROR_CODES), sorted(codes)
