"""The daemons' glue, in one process: supervisor and node applications on real runtimes.

Also the supervisor's durable store, the node's topics file and the CLI's flag checks and
text rendering.  (Separate OS processes are the integration tests' business.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvloop
from click.testing import CliRunner

from pubsub.cli.formats import format_node_status, format_supervisor_status
from pubsub.cli.main import main
from pubsub.kernel.control import Reply, StatusRequest
from pubsub.kernel.message import Ref, Topic
from pubsub.node.app import NodeApp
from pubsub.node.topicfile import TopicFile, TopicFileError
from pubsub.publications.messages import JoinTopic, LeaveTopic
from pubsub.runtime.client import request
from pubsub.runtime.net import Runtime
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.stats import Stats
from pubsub.skipring.nodecore import NodeCore
from pubsub.skipring.supervisor.core import SupervisorCore
from pubsub.supervisor.app import SupervisorApp
from pubsub.supervisor.store import StoreError, SupervisorStore

FAST = RuntimeSettings(
    timeout_interval=0.02, reconnect_backoff_min=0.01, reconnect_backoff_max=0.05, flush_timeout=0.2
)


def bound_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def ref_of(sock: socket.socket) -> Ref:
    return Ref(f"127.0.0.1:{sock.getsockname()[1]}")


async def wait_until(cond: Any, timeout: float = 10.0, what: str = "") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def supervisor(data: Path, port: int = 0) -> AsyncIterator[tuple[Runtime, SupervisorApp]]:
    sock = bound_socket(port)
    ref = ref_of(sock)
    store = SupervisorStore(data)
    core = SupervisorCore(ref, rng=random.Random(1))
    core.load(store.load())
    stats = Stats()
    app = SupervisorApp(ref, core, store, stats, retention=core.retention)
    rt = Runtime(app, FAST, stats=stats, sock=sock)
    try:
        await rt.start()
        yield rt, app
    finally:
        await rt.stop()
        app.flush()
        store.close()
        sock.close()


@contextlib.asynccontextmanager
async def node(sup: Ref, data: Path | None = None) -> AsyncIterator[tuple[Runtime, NodeApp]]:
    sock = bound_socket()
    ref = ref_of(sock)
    stats = Stats()
    app = NodeApp(
        ref, NodeCore(ref, sup, rng=random.Random(2)), stats, TopicFile(data) if data else None
    )
    initial = app.rejoin()
    rt = Runtime(app, FAST, stats=stats, sock=sock)
    try:
        await rt.start()
        rt.dispatch(initial)
        yield rt, app
    finally:
        await rt.stop()
        sock.close()


async def members(sup: Ref, topic: str) -> dict[str, str]:
    reply = await request(sup, StatusRequest(), timeout=5)
    assert isinstance(reply, Reply)
    entry = reply.body["topics"].get(topic, {"members": []})
    return {m["ref"]: m["label"] for m in entry["members"]}


def test_subscribe_status_persist_and_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with contextlib.AsyncExitStack() as stack:
            srt, _ = await stack.enter_async_context(supervisor(tmp_path / "sup"))
            port = int(srt.ref.rsplit(":", 1)[1])
            nodes = [
                await stack.enter_async_context(node(srt.ref, tmp_path / f"n{i}")) for i in range(3)
            ]
            for rt, _ in nodes:
                reply = await request(rt.ref, JoinTopic(topic=Topic("news")), timeout=5)
                assert isinstance(reply, Reply) and reply.body["persisted"] is True

            async def all_in() -> bool:
                return set(await members(srt.ref, "news")) == {rt.ref for rt, _ in nodes}

            await wait_until(all_in, what="three members")
            status = (await request(nodes[0][0].ref, StatusRequest(), timeout=5)).body  # type: ignore[attr-defined]
            assert "news" in status["topics"] and "stats" in status
            assert json.loads((tmp_path / "n0" / "topics.json").read_text())["topics"] == ["news"]

            # the supervisor's database survives a restart on the same port
            before = await members(srt.ref, "news")
            await srt.stop()
            with SupervisorStore(tmp_path / "sup") as store:
                assert set(store.load()) == {("news", label, ref) for ref, label in before.items()}
            async with supervisor(tmp_path / "sup", port) as (srt2, _):
                assert set(await members(srt2.ref, "news")) == {rt.ref for rt, _ in nodes}

                # leaving is confirmed by the supervisor and persisted by the node
                reply = await request(nodes[2][0].ref, LeaveTopic(topic=Topic("news")), timeout=5)
                assert isinstance(reply, Reply) and reply.body["action"] == "leave"

                async def left() -> bool:
                    return nodes[2][0].ref not in await members(srt2.ref, "news")

                await wait_until(left, what="node 2 gone")
                assert json.loads((tmp_path / "n2" / "topics.json").read_text())["topics"] == []

    uvloop.run(asyncio.wait_for(scenario(), 60))


def test_node_rejoins_stored_topics(tmp_path: Path) -> None:
    TopicFile(tmp_path / "n").save({Topic("a"), Topic("b")})

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            node(srt.ref, tmp_path / "n") as (rt, _),
        ):

            async def joined() -> bool:
                return rt.ref in await members(srt.ref, "a") and rt.ref in await members(
                    srt.ref, "b"
                )

            await wait_until(joined, what="rejoined a and b")

    uvloop.run(asyncio.wait_for(scenario(), 60))


# --- store and topics file -------------------------------------------------------------------
def test_store_apply_and_load(tmp_path: Path) -> None:
    with SupervisorStore(tmp_path / "deep" / "dir") as store:
        store.apply([("t", "0", "h:1"), ("t", "1", "h:2"), ("t", "0", "h:3"), ("u", "0", "h:4")])
        store.apply([("u", "0", None), ("v", "1", None)])
        assert sorted(store.load()) == [("t", "0", "h:3"), ("t", "1", "h:2")]
        store._db.execute("INSERT INTO members VALUES ('t', '2', 'not a ref')")
        assert sorted(store.load()) == [("t", "0", "h:3"), ("t", "1", "h:2")]
    with SupervisorStore(tmp_path / "deep" / "dir") as again:
        assert ("t", "0", "h:3") in again.load()
    assert (tmp_path / "deep" / "dir" / "supervisor.sqlite3").exists()


def test_store_unusable_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot create data directory"):
        SupervisorStore(tmp_path / "file" / "sub")


def test_topic_file(tmp_path: Path) -> None:
    f = TopicFile(tmp_path)
    assert f.load() == set()
    f.save({Topic("x"), Topic("y")})
    assert f.load() == {"x", "y"}
    assert not list(tmp_path.glob(".*tmp"))
    (tmp_path / "topics.json").write_text("{broken")
    with pytest.raises(TopicFileError, match="not a topics file"):
        f.load()
    (tmp_path / "topics.json").write_text(json.dumps({"topics": ["ok", "", 5]}))
    assert f.load() == {"ok"}


# --- CLI -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["supervisor", "--listen", "nohost", "--data", "d"],
        ["supervisor", "--listen", "127.0.0.1:0", "--data", "d"],
        ["node", "--listen", "127.0.0.1:7000", "--supervisor", "x:99999"],
        ["subscribe", "t", "--node", "a b:1"],
        ["status", "--node", "127.0.0.1:1", "--supervisor", "127.0.0.1:2"],
        ["status"],
        ["supervisor", "--listen", "127.0.0.1:7000"],
        ["node", "--listen", "127.0.0.1:7000", "--supervisor", "127.0.0.1:7001", "--interval", "0"],
    ],
)
def test_cli_rejects_bad_flags(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PUBSUB_DATA_DIR", raising=False)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_cli_unreachable_daemon_is_one_line() -> None:
    with bound_socket() as sock:
        addr = ref_of(sock)  # bound, not listening: connection refused
        result = CliRunner().invoke(main, ["status", "--node", addr])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"Error: cannot reach {addr}: connection refused"]


def test_status_text_rendering() -> None:
    sup = format_supervisor_status(
        {
            "ref": "h:1",
            "topics": {
                "t": {"members": [{"label": "1", "ref": "h:3"}, {"label": "0", "ref": "h:2"}]}
            },
            "stats": {"frames_in": {"x": 2}, "errors": {"bad_field": 1}},
        }
    )
    assert "topic t: 2 members" in sup and sup.index("h:2") < sup.index("h:3")
    assert "bad_field=1" in sup
    text = format_node_status(
        {
            "ref": "h:2",
            "supervisor": "h:1",
            "topics": {
                "t": {
                    "label": "0",
                    "left": None,
                    "right": ["1", "h:3"],
                    "ring": ["1", "h:3"],
                    "shortcuts": {"01": None},
                },
            },
        }
    )
    assert "right      1 @ h:3" in text and "01 @ ?" in text
