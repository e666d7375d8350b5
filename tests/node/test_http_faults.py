"""The HTTP API serves requests through its runtime (`Runtime.serve_request`), as the node's
port serves a TCP client's: a node that raises on a request is counted (``handler_error``)
and the HTTP client gets the JSON error, never aiohttp's bare 500 page."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from pubsub.kernel.message import Message, Ref, Send
from pubsub.node.http import NodeHttpApi, http_application
from pubsub.ops.processes import pick_free_ports
from pubsub.publications.messages import Follow, PublishRequest
from pubsub.runtime.connection import ClientSession
from pubsub.runtime.net import Runtime


class FaultyNode:
    """A node application whose every client request raises (a bug in the node)."""

    def __init__(self) -> None:
        self.ref = Ref(f"127.0.0.1:{pick_free_ports(1)[0]}")
        self.core = SimpleNamespace(max_payload_bytes=1024, wanted_topics={"news"})
        self.runtime: Runtime | None = None
        self.asked: list[str] = []

    def attach(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def handle(self, msg: Message, now: float) -> list[Send]:
        return []

    def timeout(self, now: float) -> list[Send]:
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        return []

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        self.asked.append(msg.kind)
        raise RuntimeError("control broke")

    def session_request(self, msg: Message, session: ClientSession, now: float) -> list[Send] | None:
        if isinstance(msg, (PublishRequest, Follow)):
            self.asked.append(msg.kind)
            raise RuntimeError(f"{msg.kind} broke")
        return None


@contextlib.asynccontextmanager
async def serving(node: FaultyNode) -> AsyncIterator[tuple[TestClient, Runtime]]:
    """`node`'s runtime and its HTTP API, on a test server."""
    runtime = Runtime(node)
    await runtime.start()
    client = TestClient(TestServer(http_application(node)))  # type: ignore[arg-type]
    await client.start_server()
    try:
        yield client, runtime
    finally:
        await client.close()
        await runtime.stop()


@pytest.fixture
async def served() -> AsyncIterator[tuple[TestClient, Runtime, FaultyNode]]:
    node = FaultyNode()
    async with serving(node) as (client, runtime):
        yield client, runtime, node


async def test_a_node_that_raises_is_a_counted_json_error(served: tuple[TestClient, Runtime, FaultyNode]) -> None:
    client, runtime, node = served
    status = await client.get("/v1/status")
    assert status.status == 500 and status.content_type == "application/json"
    assert (await status.json())["code"] == "handler_error"
    published = await client.post("/v1/topics/news/publications", json={"payload": "aGk=", "msg_id": "m1"})
    body = await published.json()
    assert published.status == 500 and body["code"] == "handler_error" and body["msg_id"] == "m1"
    history = await client.get("/v1/topics/news/publications")
    assert history.status == 500 and (await history.json())["code"] == "handler_error"
    joined = await client.put("/v1/topics/news/membership")
    assert joined.status == 500 and (await joined.json())["code"] == "handler_error"
    assert node.asked == ["status", "publish_request", "follow", "join"]
    assert runtime.stats.errors["handler_error"] == 4


async def test_a_failing_route_is_a_counted_json_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the HTTP layer itself (here: a route that raises) is answered as JSON 500
    ``handler_error``, logged and counted -- not aiohttp's plain-text 500 page."""

    async def broken(self: NodeHttpApi, request: web.Request) -> web.Response:
        raise RuntimeError("route broke")

    monkeypatch.setattr(NodeHttpApi, "status", broken)
    async with serving(FaultyNode()) as (client, runtime):
        answer = await client.get("/v1/status")
        assert answer.status == 500 and answer.content_type == "application/json"
        assert (await answer.json())["code"] == "handler_error"
        assert runtime.stats.errors["handler_error"] == 1


async def test_hostile_bodies_are_json_errors_that_say_what_is_wrong(served: tuple[TestClient, Runtime, FaultyNode]) -> None:
    """JSON nested deeper than the decoder recurses is a 400, not a 500 with a traceback;
    a body over the limit is a 413 whose detail names the limit and the setting."""
    client, runtime, node = served
    deep = await client.post(
        "/v1/topics/news/publications", data="[" * 20_000 + "]" * 20_000, headers={"Content-Type": "application/json"}
    )
    body = await deep.json()
    assert deep.status == 400 and body["code"] == "bad_request" and "nested too deeply" in body["detail"], body
    huge = await client.post(
        "/v1/topics/news/publications", data=b"x" * 200_000, headers={"Content-Type": "application/json"}
    )
    body = await huge.json()
    assert huge.status == 413 and body["code"] == "payload_too_large", body
    limit = 4 * node.core.max_payload_bytes // 3 + 64 * 1024
    assert f"limit of {limit} bytes" in body["detail"] and "PUBSUB_MAX_PAYLOAD_BYTES" in body["detail"], body
    assert node.asked == [] and runtime.stats.errors["handler_error"] == 0


async def test_a_route_failing_after_its_stream_began_is_counted_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure after the response's head and some of its body went out cannot be
    answered with JSON: it is counted, and the client sees its stream end -- nothing
    appended to what it already received."""

    async def half(self: NodeHttpApi, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: first\n\n")
        raise RuntimeError("stream broke")

    monkeypatch.setattr(NodeHttpApi, "stream", half)
    async with serving(FaultyNode()) as (client, runtime):
        answer = await client.get("/v1/topics/news/stream")
        assert answer.status == 200
        received = b""
        with contextlib.suppress(aiohttp.ClientPayloadError):
            async for chunk in answer.content.iter_any():
                received += chunk
        assert received == b"data: first\n\n" and b"handler_error" not in received
        assert runtime.stats.errors["handler_error"] == 1
