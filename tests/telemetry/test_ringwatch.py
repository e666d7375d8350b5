"""The supervisor's web view without processes (pubsub/supervisor/webview.py): one topic judged
against the independent checker (the skip ring's view of a topic,
pubsub/skipring/supervisor/webtopic.py), the event log of a fault and its repair, the HTTP routes
and the loopback rule of its setting.  The browser test against a live cluster is
tests/integration/test_webview.py."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from pubsub.runtime.httpserve import HttpService
from pubsub.runtime.settings import SettingsError, load
from pubsub.skipring.supervisor.webtopic import topic_view
from pubsub.supervisor.settings import SupervisorSettings
from pubsub.supervisor.webview import RingWatch, application
from tests.checker import ideal_edges, ideal_skip_ring, sr_members, to_reported

TOPIC = "t"


def supervisor_entry(members: Mapping[str, str]) -> dict[str, Any]:
    """A topic's part of the supervisor's status for `members` (ref -> label bits)."""
    return {"n": len(members), "legitimate_database": True,
            "members": [{"label": bits, "ref": ref} for ref, bits in members.items()]}


def answers_for(members: Mapping[str, str], count: int = 0) -> dict[str, Any]:
    """Status bodies of nodes that hold exactly the ideal SR(n) state (tests/checker.py)."""
    states = to_reported(ideal_skip_ring(members))
    return {
        ref: {"topics": {TOPIC: {**state, "publications": {"count": count, "root": ["", "00"]}}}}
        for ref, state in states.items()
    }


@pytest.mark.parametrize("n", [1, 2, 3, 8, 16])
def test_an_ideal_ring_is_legitimate_and_drawn_with_the_checkers_edges(n: int) -> None:
    members = sr_members(n)
    view = topic_view(TOPIC, supervisor_entry(members), answers_for(members, count=5))
    assert view["legitimate"], view["problems"]
    assert view["n"] == n and view["publications_agree"]
    assert {(e["from"], e["to"]) for e in view["edges"]} == ideal_edges(members)
    assert [m["label"] for m in view["members"]] == sorted(members.values(), key=lambda b: (int(b, 2) / 2 ** len(b), len(b)))
    assert all(m["publications"] == 5 and m["answering"] for m in view["members"])


def test_what_makes_a_topic_not_legitimate() -> None:
    members = sr_members(8)
    refs = sorted(members)
    # A wrong shortcut.
    answers = answers_for(members)
    state = answers[refs[0]]["topics"][TOPIC]
    bits = next(iter(state["shortcuts"]))
    state["shortcuts"][bits] = refs[1] if state["shortcuts"][bits] != refs[1] else refs[2]
    view = topic_view(TOPIC, supervisor_entry(members), answers)
    assert not view["legitimate"] and any(refs[0] in p and "edges as in SR(8)" in p for p in view["problems"])
    # A member that does not answer: drawn, marked, not legitimate.
    answers = answers_for(members)
    answers[refs[2]] = "connection refused"
    view = topic_view(TOPIC, supervisor_entry(members), answers, suspects=[refs[2]])
    silent = next(m for m in view["members"] if m["ref"] == refs[2])
    assert not silent["answering"] and silent["suspect"] and not view["legitimate"]
    assert not view["publications_agree"]
    # Labels that are not l(0..n-1), and a non-member holding state for the topic.
    answers = answers_for(members)
    answers["127.0.0.1:9999"] = {"topics": {TOPIC: answers[refs[0]]["topics"][TOPIC]}}
    view = topic_view(TOPIC, supervisor_entry(members), answers)
    assert view["problems"] == ["127.0.0.1:9999 holds state for the topic but is not a member"]
    del members[refs[3]]
    view = topic_view(TOPIC, supervisor_entry(members), answers_for(members))
    assert "labels are not l(0..6)" in view["problems"]


class FakeCluster:
    """A supervisor's status and its nodes' answers, changed by the test between polls."""

    def __init__(self, members: dict[str, str]) -> None:
        self.members = members
        self.silent: set[str] = set()
        self.crashes = 0

    def status(self) -> dict[str, Any]:
        return {"topics": {TOPIC: supervisor_entry(self.members)}, "suspects": [], "crashes_detected": self.crashes}

    async def ask(self, ref: str) -> Mapping[str, Any] | str:
        if ref in self.silent:
            return f"cannot reach {ref}: connection refused"
        return answers_for(self.members)[ref]


async def test_the_log_marks_a_fault_and_the_convergence_after_it() -> None:
    members = sr_members(8)
    fake = FakeCluster(dict(members))
    watch = RingWatch("127.0.0.1:7999", fake.status, fake.ask, clock=lambda: 0.0)
    await watch.poll()
    killed = sorted(members)[3]
    fake.silent.add(killed)
    await watch.poll()
    await watch.poll()  # nothing new: logged once
    # The supervisor removes it and hands its label to the holder of l(7) = 111.
    fake.crashes = 1
    label = fake.members.pop(killed)
    last = next(ref for ref, bits in fake.members.items() if bits == "111")
    fake.members[last] = label
    fake.silent.clear()
    await watch.poll()
    kinds = [(e["kind"], e["ref"]) for e in watch.log]
    assert kinds == [
        ("topic", None),
        ("fault", killed),
        ("diverged", None),
        ("fault", killed),
        ("converged", None),
    ]
    assert watch.log[3]["text"] == f"{killed} removed from {TOPIC} as crashed"
    assert watch.log[-1]["text"] == f"{TOPIC} is legitimate again: SR(7)"
    view = watch.view()
    assert view["polls"] == 4 and view["topics"][TOPIC]["n"] == 7 and view["topics"][TOPIC]["legitimate"]


async def test_routes_page_json_and_stream() -> None:
    fake = FakeCluster(sr_members(4))
    watch = RingWatch("127.0.0.1:7999", fake.status, fake.ask, interval=0.05)
    client = TestClient(TestServer(application(watch)))
    await client.start_server()
    try:
        page = await client.get("/")
        assert page.status == 200 and page.content_type == "text/html"
        assert "new EventSource(\"api/stream\")" in await page.text()
        stream = await client.get("/api/stream")
        assert stream.headers["Content-Type"] == "text/event-stream"
        views = []
        async with asyncio.timeout(5):
            while len(views) < 3:
                line = (await stream.content.readline()).decode()
                if line.startswith("data: "):
                    views.append(json.loads(line[6:]))
        assert views[-1]["polls"] >= 1 and views[-1]["topics"][TOPIC]["legitimate"]
        rings = await (await client.get("/api/rings")).json()
        assert rings["supervisor"] == "127.0.0.1:7999" and rings["topics"][TOPIC]["n"] == 4
    finally:
        async with asyncio.timeout(5):  # the open stream does not hold the stop up
            await client.close()


def test_the_web_view_is_loopback_only_unless_allowed() -> None:
    flags = {"web_listen": "--web-listen", "web_allow_remote": "--web-allow-remote"}
    assert load(SupervisorSettings, flags, data_dir="d", web_listen="127.0.0.1:8080").web_listen == "127.0.0.1:8080"
    with pytest.raises(SettingsError, match="not a loopback address"):
        load(SupervisorSettings, flags, data_dir="d", web_listen="10.1.2.3:8080")
    with pytest.raises(SettingsError, match="is not HOST:PORT"):
        load(SupervisorSettings, flags, data_dir="d", web_listen="nowhere")
    allowed = load(SupervisorSettings, flags, data_dir="d", web_listen="0.0.0.0:8080", web_allow_remote=True)
    assert allowed.web_allow_remote
    assert load(SupervisorSettings, flags, data_dir="d").web_listen is None


async def test_a_viewer_that_goes_away_ends_its_stream_quietly(caplog: pytest.LogCaptureFixture) -> None:
    """Closing the browser tab is routine: its stream ends without an error or a traceback
    (served as the supervisor serves it, `HttpService`, to a client that just disconnects)."""
    fake = FakeCluster(sr_members(4))
    watch = RingWatch("127.0.0.1:7999", fake.status, fake.ask, interval=0.05)
    service = HttpService("web view", application(watch), "127.0.0.1", 0)
    await service.start()
    try:
        with caplog.at_level(logging.ERROR):
            reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
            writer.write(b"GET /api/stream HTTP/1.1\r\nHost: x\r\n\r\n")
            async with asyncio.timeout(5):
                while not (await reader.readline()).startswith(b"data: "):
                    pass
            writer.close()  # the viewer leaves while the view keeps changing
            async with asyncio.timeout(5):
                while watch._streams:  # noqa: SLF001 - the stream's queue is gone once it ended
                    await asyncio.sleep(0.05)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    finally:
        async with asyncio.timeout(5):
            await service.stop()
