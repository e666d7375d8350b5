"""The event stream (`pubsub.telemetry.events`, docs/events.md) and the publish timestamp it reports.

* the writer alone: rotation by size and by time, files appear only whole (atomic rename),
  a clean close moves the last file, disk errors are counted and logged once;
* daemons in this process: every event of every kind has exactly the documented fields;
* real processes (LocalCluster): events from every daemon appear in the run directory;
* ``published_ms``: on the wire, in the store (also an old store without the column), in
  deliveries and ``history --json``.

The schema below is written from docs/events.md, independently of the writer's code.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import pytest

from pubsub.cli.formats import format_delivery
from pubsub.client.library import Client
from pubsub.kernel import registry, wire
from pubsub.kernel.message import Ref, Topic
from pubsub.node.store import NewRow, PublicationStore
from pubsub.node.telemetry import node_instrument
from pubsub.ops.localcluster import LocalCluster
from pubsub.publications.messages import Publication, PublishNew
from pubsub.publications.topicstate import make_publication
from pubsub.runtime.host import Telemetry
from pubsub.runtime.settings import TelemetrySettings
from pubsub.supervisor.telemetry import supervisor_instrument
from pubsub.telemetry.events import INPROGRESS, EventsError, EventWriter, move_leftovers
from tests.integration.test_daemons import supervisor, wait_until
from tests.node.test_node_publications import pnode, run

T = Topic("news")

# --------------------------------------------------------------------------- the schema
PAIR = "pair"  # [label, ref] or null
COMMON = {"ts": float, "kind": str, "source": str, "role": str}
SCHEMA: dict[str, dict[str, Any]] = {
    "snapshot": {
        "topic": str, "member": bool, "leaving": bool, "label": (str, None), "left": PAIR,
        "right": PAIR, "ring": PAIR, "shortcuts": dict, "neighbours": list, "trie_root": str, "trie_size": int,
        "interval": int, "reason": ("change", "periodic"),
    },
    "supervisor": {
        "topic": str, "n": int, "legitimate_database": bool, "members": list, "interval": int,
        "reason": ("change", "periodic"),
    },
    "messages": {
        "interval": int, "sent": dict, "received": dict, "bytes_sent": int,
        "bytes_received": int, "errors": int,
    },
    "delivery": {
        "topic": str, "key": str, "publisher": str, "seq": int, "published_ts": float,
        "delivered_ts": float, "via": ("local", "handover", "tree", "flood", "antientropy"),
        "hops": (int, None),
    },
}


def check_field(kind: str, name: str, value: Any, want: Any) -> None:
    where = f"{kind}.{name} = {value!r}"
    if want is PAIR:
        assert value is None or (
            isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
        ), where
    elif want is float:
        assert isinstance(value, float), where
    elif want is int:
        assert isinstance(value, int) and not isinstance(value, bool), where
    elif isinstance(want, tuple) and all(isinstance(w, str) for w in want):
        assert value in want, where
    elif isinstance(want, tuple):
        types = tuple(type(None) if w is None else w for w in want)
        assert isinstance(value, types) and not isinstance(value, bool), where
    else:
        assert isinstance(value, want), where


def check_event(event: dict[str, Any]) -> None:
    """Exactly the documented fields, with the documented types."""
    kind = event.get("kind")
    assert kind in SCHEMA, event
    fields = {**COMMON, **SCHEMA[kind]}
    assert set(event) == set(fields), (kind, set(event) ^ set(fields))
    for name, want in fields.items():
        check_field(kind, name, event[name], want)
    if kind == "snapshot":
        assert all(isinstance(v, (str, type(None))) for v in event["shortcuts"].values())
        if not event["member"]:
            assert event["label"] is None and event["trie_size"] == 0
    if kind == "supervisor":
        assert all(isinstance(m, list) and len(m) == 2 for m in event["members"])
    if kind == "delivery":
        assert re.fullmatch(r"[0-9a-f]{32}", event["key"])
    if kind == "messages":
        assert all(isinstance(v, int) and v >= 0 for v in event["sent"].values())


def read_run_dir(directory: Path) -> list[dict[str, Any]]:
    """Every event in the visible files (whole files only: every line must parse)."""
    events = []
    for path in sorted(directory.glob("*.jsonl")):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n"), path
        events.extend(json.loads(line) for line in text.splitlines())
    return events


# --------------------------------------------------------------------------- the writer
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def visible(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.glob("*.jsonl"))}


def test_rotation_by_size_shows_only_whole_files_that_never_change(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path, "node", "127.0.0.1:7001", rotate_bytes=1024, pid=42)
    seen: dict[str, str] = {}
    for i in range(100):
        writer.emit("marker", id=f"m{i}", action="test", targets=[], params={"i": i})
        for name, text in visible(tmp_path).items():
            assert seen.setdefault(name, text) == text  # visible means final
            assert text.endswith("\n")
        # Only the file being written is in progress, and readers never list it.
        assert len(list((tmp_path / INPROGRESS).iterdir())) <= 1
    writer.close()
    final = visible(tmp_path)
    assert all(seen.get(name, text) == text for name, text in final.items())
    assert len(final) >= 5
    assert all(re.fullmatch(r"node-127\.0\.0\.1_7001-42-\d{6}\.jsonl", name) for name in final)
    assert all(len(text.encode()) < 1024 + 200 for text in final.values())
    events = [e for name in sorted(final) for e in map(json.loads, final[name].splitlines())]
    assert [e["params"]["i"] for e in events] == list(range(100))
    assert {(e["kind"], e["source"], e["role"]) for e in events} == {("marker", "127.0.0.1:7001", "node")}
    assert not list((tmp_path / INPROGRESS).iterdir())
    assert writer.counters() == {"written": 100, "dropped": 0, "errors": 0, "files": len(final)}


def test_rotation_by_time_and_a_quiet_writer(tmp_path: Path) -> None:
    clock = FakeClock()
    writer = EventWriter(tmp_path, "supervisor", "h:1", rotate_seconds=2.0, monotonic=clock)
    writer.emit("marker", id="a", action="start", targets=[], params={})
    assert visible(tmp_path) == {}  # still in progress
    clock.now += 1.9
    writer.tick()
    assert visible(tmp_path) == {}
    clock.now += 0.2
    writer.tick()  # a quiet writer still moves its file once it is old enough
    assert len(visible(tmp_path)) == 1
    writer.emit("marker", id="b", action="x", targets=[], params={})
    clock.now += 2.5
    writer.emit("marker", id="c", action="x", targets=[], params={})  # rotates first
    files = visible(tmp_path)
    assert [json.loads(t)["id"] for t in files.values()] == ["a", "b"]
    writer.close()
    writer.emit("marker", id="late", action="x", targets=[], params={})
    assert [json.loads(t)["id"] for t in visible(tmp_path).values()] == ["a", "b", "c"]
    assert writer.dropped == 1 and writer.written == 3


def test_explicit_ts_and_fields_are_kept(tmp_path: Path) -> None:
    with EventWriter(tmp_path, "chaos", "chaos") as writer:
        writer.emit("marker", ts=12.5, id="x1", action="crash", targets=["127.0.0.1:9"], params={}, topic="t")
    (event,) = read_run_dir(tmp_path)
    assert event == {
        "ts": 12.5, "kind": "marker", "source": "chaos", "role": "chaos", "id": "x1",
        "action": "crash", "targets": ["127.0.0.1:9"], "params": {}, "topic": "t",
    }


def test_disk_errors_are_counted_logged_once_and_survived(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    writer = EventWriter(tmp_path, "node", "h:1", rotate_seconds=1.0, monotonic=clock)
    (tmp_path / INPROGRESS).rmdir()
    (tmp_path / INPROGRESS).write_text("in the way")  # opening a file there now fails
    with caplog.at_level(logging.DEBUG, logger="pubsub.telemetry.events"):
        for _ in range(3):
            writer.emit("marker", id="lost", action="x", targets=[], params={})
        clock.now += 1.5
        writer.emit("marker", id="lost", action="x", targets=[], params={})
    assert writer.errors == 2 and writer.dropped == 4  # one try per retry period
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "events are dropped and counted" in errors[0].getMessage()

    # The disk recovers: the writer goes on by itself.
    (tmp_path / INPROGRESS).unlink()
    clock.now += 1.5
    writer.emit("marker", id="kept", action="x", targets=[], params={})

    # A write that fails (disk full) loses that file's events, counted.
    class Full:
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            pass

    writer._file = Full()  # type: ignore[assignment]
    writer.emit("marker", id="lost", action="x", targets=[], params={})
    assert writer.errors == 3 and writer.dropped == 4 + 1 + 1
    clock.now += 1.5
    writer.emit("marker", id="kept", action="x", targets=[], params={})
    writer.close()
    assert [e["id"] for e in read_run_dir(tmp_path)] == ["kept"]


def test_an_unusable_events_dir_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(EventsError, match="cannot use events directory"):
        EventWriter(tmp_path / "file" / "run", "node", "h:1")


def test_leftovers_of_a_crashed_writer_are_moved(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path, "node", "h:1")
    writer.emit("marker", id="a", action="x", targets=[], params={})
    writer._file.flush()  # type: ignore[union-attr]  # as if the process died now
    (tmp_path / INPROGRESS / "notes.txt").write_text("not an event file")
    moved = move_leftovers(tmp_path)
    assert [p.name for p in moved] == [p.name for p in tmp_path.glob("*.jsonl")]
    assert [e["id"] for e in read_run_dir(tmp_path)] == ["a"]


# --------------------------------------------------------------------------- daemons in-process
def test_daemons_write_every_kind_with_the_documented_fields(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    settings = TelemetrySettings(
        events_dir=run_dir, events_rotate_seconds=0.3, events_snapshot_every=3
    )

    async def scenario() -> tuple[str, str, str, str]:
        async with supervisor(tmp_path / "sup") as (srt, sapp):
            sup_t = await Telemetry.start(
                "supervisor", sapp, srt.stats, settings, supervisor_instrument(sapp, srt.stats, registry.overlay().kinds())
            )
            async with (
                pnode(srt.ref, None) as (art, aapp),
                pnode(srt.ref, None) as (brt, bapp),
                pnode(srt.ref, None) as (crt, capp),
            ):
                parts = [await Telemetry.start("node", app, rt.stats, settings, node_instrument(app, rt.stats, registry.overlay().kinds()))
                         for rt, app in ((art, aapp), (brt, bapp), (crt, capp))]
                async with Client(art.ref) as a, Client(brt.ref) as b, Client(crt.ref) as c:
                    await a.join(T)
                    await b.join(T)

                    async def ring() -> bool:
                        st = [(await x.status())["topics"][T] for x in (a, b)]
                        return all(s["right"] or s["left"] for s in st) and all(
                            s["ring"] for s in st
                        )

                    await wait_until(ring, what="a ring of two")
                    await a.publish(T, "one")
                    await a.publish(T, "two")
                    await c.publish(T, "handed over")  # c is no member

                    async def spread() -> bool:
                        counts = [
                            (await x.status())["topics"][T]["publications"]["count"]
                            for x in (a, b)
                        ]
                        return counts == [3, 3]

                    await wait_until(spread, what="three publications everywhere")
                    await b.leave(T)

                    async def left() -> bool:
                        return T not in (await b.status())["topics"]

                    await wait_until(left, what="b has left")
                    async def some_intervals() -> bool:
                        return aapp.intervals >= 4

                    await wait_until(some_intervals, what="a few intervals")
                for part in parts:
                    await part.stop()
            await sup_t.stop()
        return srt.ref, art.ref, brt.ref, crt.ref

    sup, a, b, c = _run(scenario())
    assert not list((run_dir / INPROGRESS).iterdir())  # clean stops moved every file
    events = read_run_dir(run_dir)
    for event in events:
        check_event(event)
    kinds = Counter((e["source"], e["kind"]) for e in events)
    for node in (a, b, c):
        assert kinds[(node, "messages")] >= 3
    assert kinds[(sup, "messages")] >= 3
    # messages: one per interval, numbered 1, 2, 3, ... per daemon
    for source in (sup, a, b, c):
        intervals = [e["interval"] for e in events if e["source"] == source and e["kind"] == "messages"]
        assert intervals == list(range(1, len(intervals) + 1))
    # deliveries: a stored its two and (maybe) the handed-over one; b got all three
    delivered = [e for e in events if e["kind"] == "delivery"]
    by_node = {n: sorted(e["via"] for e in delivered if e["source"] == n) for n in (a, b, c)}
    assert by_node[c] == []
    assert len(by_node[a]) == 3 and len(by_node[b]) == 3
    assert by_node[a].count("local") == 2
    assert "handover" in by_node[a] + by_node[b]
    for e in delivered:
        assert e["published_ts"] <= e["delivered_ts"] + 0.001
        assert e["publisher"] in (a, c)
    assert len({e["published_ts"] for e in delivered if e["publisher"] == c}) == 1  # carried
    # snapshots: b's last word on the topic is that it left; periodic ones exist
    b_snaps = [e for e in events if e["source"] == b and e["kind"] == "snapshot"]
    assert b_snaps[-1]["member"] is False and b_snaps[-1]["reason"] == "change"
    assert any(e["label"] in ("0", "1") and e["trie_size"] == 3 for e in b_snaps)
    assert any(e["reason"] == "periodic" for e in events if e["kind"] == "snapshot")
    a_last = [e for e in events if e["source"] == a and e["kind"] == "snapshot"][-1]
    assert a_last["member"] and a_last["label"] == "0" and len(a_last["trie_root"]) == 32
    # the supervisor: two members at some point, then one
    sup_events = [e for e in events if e["kind"] == "supervisor"]
    assert any(e["n"] == 2 and e["legitimate_database"] for e in sup_events)
    assert sup_events[-1]["n"] == 1 and sup_events[-1]["members"] == [["0", a]]


def _run(coro: Any) -> Any:
    import asyncio

    import uvloop

    return uvloop.run(asyncio.wait_for(coro, 60))


# --------------------------------------------------------------------------- real processes
@pytest.mark.integration
def test_a_local_cluster_writes_its_events_into_the_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LocalCluster(tmp_path / "c", 3, interval=0.1, events_dir=run_dir) as cluster:
        for i in range(3):
            cluster.subscribe(i, T)
        cluster.publish(0, T, "hello")

        def missing() -> list[str]:
            events = read_run_dir(run_dir)
            got = {e["source"] for e in events if e["kind"] == "delivery"}
            wrong = [f"no delivery event from {r}" for r in cluster.node_refs if r not in got]
            if not any(e["kind"] == "supervisor" and e["n"] == 3 for e in events):
                wrong.append("no supervisor event with n = 3")
            return wrong

        cluster.poll(missing, 30, "events of every daemon in the run directory")
    leftovers = [p for p in (run_dir / INPROGRESS).iterdir() if p.suffix == ".jsonl"]
    assert leftovers == []  # SIGTERM: every daemon moved its last file
    events = read_run_dir(run_dir)
    for event in events:
        check_event(event)
    roles = {(e["role"], e["source"]) for e in events}
    assert roles == {("supervisor", cluster.supervisor_ref)} | {("node", r) for r in cluster.node_refs}
    pids = {name.name.split("-")[-2] for name in run_dir.glob("*.jsonl")}
    assert len(pids) == 4  # one writer per process
    deliveries = [e for e in events if e["kind"] == "delivery"]
    assert len({e["key"] for e in deliveries}) == 1 and len(deliveries) == 3
    via = {e["source"]: e["via"] for e in deliveries}
    assert via[cluster.node_refs[0]] == "local"
    assert {via[r] for r in cluster.node_refs[1:]} <= {"tree", "flood", "antientropy"}


# --------------------------------------------------------------------------- published_ms
def test_published_ms_travels_on_the_wire_but_is_not_identity() -> None:
    p = make_publication(Ref("h:1"), 3, b"x")
    stamped = Publication(p.key, p.publisher, p.seq, p.payload, 1_700_000_000_123)
    decoded = wire.decode(wire.encode(PublishNew(T, stamped, 1))[4:])
    assert isinstance(decoded, PublishNew)
    assert decoded.publication.published_ms == 1_700_000_000_123
    assert stamped == p and hash(stamped) == hash(p)  # not part of the key or equality
    # A four-element publication (an older peer) decodes with 0 = unknown.
    old = msgpack.packb({"v": 1, "t": "publish_new", "topic": T, "hops": 1,
                         "publication": [p.key, p.publisher, p.seq, p.payload]})
    assert wire.decode(old).publication.published_ms == 0  # type: ignore[attr-defined]
    bad = msgpack.packb({"v": 1, "t": "publish_new", "topic": T, "hops": 1,
                         "publication": [p.key, p.publisher, p.seq, p.payload, -5]})
    with pytest.raises(wire.WireError) as err:
        wire.decode(bad)
    assert err.value.code == "bad_field"


OLD_LAYOUT = (
    "CREATE TABLE publications ("
    " topic TEXT NOT NULL, local_seq INTEGER NOT NULL, key BLOB NOT NULL,"
    " publisher TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL,"
    " via TEXT NOT NULL, hops INTEGER, stored_at_ms INTEGER NOT NULL,"
    " PRIMARY KEY (topic, local_seq), UNIQUE (topic, key))"
)


def test_a_store_without_the_column_is_upgraded_in_place(tmp_path: Path) -> None:
    old = make_publication(Ref("h:1"), 0, b"before")
    db = sqlite3.connect(tmp_path / "publications.sqlite3")
    db.execute(OLD_LAYOUT)
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    db.execute(
        "INSERT INTO publications VALUES (?, 1, ?, ?, 0, ?, 'local', 0, 5)",
        (T, old.key, old.publisher, old.payload),
    )
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    new = replace(make_publication(Ref("h:1"), 1, b"after"), published_ms=1234)
    with PublicationStore(tmp_path) as store:
        (row,) = store.read(T)
        assert row.publication == old and row.published_ms == 0
        store.append([NewRow(T, new, "local", 0)])
    with PublicationStore(tmp_path) as store:
        assert [s.published_ms for s in store.read(T)] == [0, 1234]
        assert [p.published_ms for p in store.publications(T)] == [0, 1234]


def test_deliveries_and_history_json_carry_the_publish_time(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, None) as (art, _a),
            pnode(srt.ref, None) as (other, _o),
        ):
            async with Client(art.ref) as a, Client(other.ref) as o:
                await a.join(T)
                before = int(time.time() * 1000)
                await a.publish(T, "direct")
                await o.publish(T, "through a non-member")
                after = int(time.time() * 1000)
                history = await a.history(T)
            assert [d.payload for d in history] == [b"direct", b"through a non-member"]
            for d in history:
                assert before <= d.published_ms <= after
                assert d.published_ms <= d.stored_at_ms
                shown = json.loads(format_delivery(d, as_json=True))
                assert shown["published_ms"] == d.published_ms

    run(scenario())


def test_the_docs_list_every_kind_the_tests_check() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text()
    for kind in SCHEMA:
        assert f"### `{kind}`" in doc
    assert os.sep not in INPROGRESS and f"DIR/{INPROGRESS}/" in doc


# --------------------------------------------------------------------------- retention
def test_retention_keeps_the_newest_files_of_this_daemon_only(tmp_path: Path) -> None:
    other = tmp_path / "node-127.0.0.1_7002-7-000000.jsonl"  # another daemon's file
    other.write_text("{}\n")
    earlier = tmp_path / "node-127.0.0.1_7001-5-000000.jsonl"  # this daemon, an earlier run
    earlier.write_text("{}\n")
    os.utime(earlier, (1, 1))
    chaos = tmp_path / "chaos-chaos-9-000000.jsonl"
    chaos.write_text("{}\n")
    writer = EventWriter(tmp_path, "node", "127.0.0.1:7001", rotate_bytes=1024, retain_files=3, pid=42)
    for i in range(60):
        writer.emit("marker", id=f"m{i}", action="test", targets=[], params={"i": i})
    writer.close()
    mine = sorted(p.name for p in tmp_path.glob("node-127.0.0.1_7001-*.jsonl"))
    assert len(mine) == 3 and all(name.startswith("node-127.0.0.1_7001-42-") for name in mine)
    assert mine == sorted(mine)[-3:]  # the newest three: the last lines survive
    last = json.loads((tmp_path / mine[-1]).read_text().splitlines()[-1])
    assert last["params"]["i"] == 59
    assert other.exists() and chaos.exists() and not earlier.exists()
    assert writer.pruned == writer.files + 1 - 3


def test_retention_by_age(tmp_path: Path) -> None:
    clock = FakeClock()
    clock.now = 1_000_000.0
    old = tmp_path / "supervisor-h_1-3-000000.jsonl"
    old.write_text("{}\n")
    os.utime(old, (clock.now - 120, clock.now - 120))
    young = tmp_path / "supervisor-h_1-3-000001.jsonl"
    young.write_text("{}\n")
    os.utime(young, (clock.now - 30, clock.now - 30))
    writer = EventWriter(tmp_path, "supervisor", "h:1", retain_seconds=60, clock=clock)
    writer.emit("marker", id="a", action="start", targets=[], params={})
    writer.rotate()
    assert not old.exists() and young.exists()
    assert len(list(tmp_path.glob("supervisor-h_1-*.jsonl"))) == 2
    with pytest.raises(ValueError):
        EventWriter(tmp_path, "x", "y", retain_files=-1)
