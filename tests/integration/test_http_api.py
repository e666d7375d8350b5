"""The node's HTTP API (issue 12, "clients in any language") against real daemons: publish
and read history with the real `curl`, follow a topic over Server-Sent Events with a plain
HTTP client that drops the connection mid-stream and resumes with ``Last-Event-ID`` (every
publication exactly once, in order), de-duplication by ``msg_id``, refused cursors, JSON
errors for bad input, and schemathesis against the live ``/v1/openapi.json``."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import aiohttp
import pytest

from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.members import members_of
from pubsub.ops.processes import pick_free_ports, poll

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl binary"),
]

#: Seconds a ring may take to form or a publication to spread on a loaded 2-core machine.
SPREAD_TIMEOUT = 60.0
#: Seconds one HTTP request (curl or the stream reader) may take.
REQUEST_TIMEOUT = 30.0
TOPIC = "news"


def curl(*args: str) -> tuple[int, Any]:
    """Run curl; (HTTP status, the JSON body)."""
    done = subprocess.run(
        ["curl", "-sS", "--max-time", str(int(REQUEST_TIMEOUT)), "-w", "\n%{http_code}", *args],
        capture_output=True,
        text=True,
        timeout=REQUEST_TIMEOUT + 5,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    body, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(body) if body else None


class Api:
    """The HTTP API of one node of the cluster."""

    def __init__(self, cluster: LocalCluster, port: int) -> None:
        self.cluster = cluster
        self.base = f"http://127.0.0.1:{port}"

    def publish(self, payload: str, topic: str = TOPIC, **extra: str) -> tuple[int, Any]:
        return curl(
            "-X", "POST", f"{self.base}/v1/topics/{topic}/publications",
            "-H", "Content-Type: application/json", "-d", json.dumps({"payload": payload, **extra}),
        )


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """Three nodes; node 0 serves the HTTP API and all three subscribe to `TOPIC` (node 0
    through the API)."""
    (port,) = pick_free_ports(1)
    with LocalCluster(
        tmp_path_factory.mktemp("http"), 3, interval=0.2,
        node_args={0: ["--http-listen", f"127.0.0.1:{port}"]},
    ) as cluster:
        node_api = Api(cluster, port)

        def unanswered() -> list[str]:
            done = subprocess.run(["curl", "-s", "-o", "/dev/null", f"{node_api.base}/v1/status"], check=False)
            return [] if done.returncode == 0 else [f"{node_api.base} does not answer (curl exit {done.returncode})"]

        poll(unanswered, SPREAD_TIMEOUT, "the HTTP API", 0.1)
        status, body = curl("-X", "PUT", f"{node_api.base}/v1/topics/{TOPIC}/membership")
        assert status == 200 and body["action"] == "join" and body["persisted"] is True, body
        for i in (1, 2):
            cluster.subscribe(i, TOPIC)

        def unconfigured() -> list[str]:
            listed = set(members_of(cluster.supervisor_status(), TOPIC))
            problems = [f"{ref} not listed" for ref in cluster.node_refs if ref not in listed]
            for i in range(3):
                if ((cluster.node_status(i).get("topics") or {}).get(TOPIC) or {}).get("label") is None:
                    problems.append(f"node {i} has no label")
            return problems

        cluster.poll(unconfigured, SPREAD_TIMEOUT, f"the members of {TOPIC}")
        yield node_api


def test_publish_and_history_with_curl(api: Api) -> None:
    status, ack = api.publish("hello over http")
    assert status == 200, ack
    assert ack["stored_by"] == api.cluster.node_refs[0] and ack["durable"] is True
    assert ack["duplicate"] is False and len(ack["msg_id"]) == 32 and len(ack["key"]) == 32
    status, history = curl(f"{api.base}/v1/topics/{TOPIC}/publications?since=0")
    assert status == 200, history
    found = [p for p in history["publications"] if p["key"] == ack["key"]]
    assert len(found) == 1 and found[0]["payload"] == "hello over http"
    assert found[0]["local_seq"] == ack["local_seq"]
    assert found[0]["cursor"] == f"{history['incarnation']}:{ack['local_seq']}"
    # resume the history from its cursor: nothing more, and the cursor stays
    status, rest = curl(f"{api.base}/v1/topics/{TOPIC}/publications?since={history['cursor']}")
    assert status == 200 and rest["publications"] == [] and rest["cursor"] == history["cursor"]
    # binary payloads travel as base64
    status, ack2 = curl(
        "-X", "POST", f"{api.base}/v1/topics/{TOPIC}/publications", "-H", "Content-Type: application/json",
        "-d", json.dumps({"payload_base64": "/wD+"}),
    )
    assert status == 200, ack2
    status, tail = curl(f"{api.base}/v1/topics/{TOPIC}/publications?since={history['cursor']}")
    assert [(p["payload"], p.get("payload_base64")) for p in tail["publications"]] == [(None, "/wD+")]


def test_a_repeated_msg_id_is_stored_once_everywhere(api: Api) -> None:
    first = api.publish("once only", msg_id="http-dedupe-1")
    again = api.publish("once only", msg_id="http-dedupe-1")
    assert first[0] == again[0] == 200
    assert again[1]["duplicate"] is True and first[1]["duplicate"] is False
    assert (again[1]["publisher"], again[1]["seq"], again[1]["key"]) == (
        first[1]["publisher"], first[1]["seq"], first[1]["key"])

    def copies() -> list[str]:
        problems = []
        for ref, held in api.cluster.histories(api.cluster.node_refs, TOPIC).items():
            n = sum(1 for p in held if p["msg_id"] == "http-dedupe-1")
            if n != 1:
                problems.append(f"{ref} holds {n} copies")
        return problems

    api.cluster.poll(copies, SPREAD_TIMEOUT, "one copy at every node")


async def read_events(
    url: str, count: int, headers: dict[str, str] | None = None, ready: asyncio.Event | None = None
) -> list[tuple[str, str, Any]]:
    """Open the stream, read `count` publication events (id, event, data) and drop the
    connection (the ready event is returned first, and sets `ready` when it arrives)."""
    events: list[tuple[str, str, Any]] = []
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url, headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            events.append((fields.get("id", ""), fields["event"], json.loads(fields["data"])))
            if ready is not None and fields["event"] == "ready":
                ready.set()
            fields = {}
            if sum(1 for e in events if e[1] == "publication") == count:
                break  # leaving the block drops the connection mid-stream
    return events


def test_sse_resumes_after_a_dropped_connection_exactly_once_in_order(api: Api) -> None:
    status, before = curl(f"{api.base}/v1/topics/{TOPIC}/publications")
    start = before["cursor"]
    payloads = [f"sse-{i:02d}" for i in range(30)]
    for payload in payloads[:20]:
        assert api.publish(payload)[0] == 200
    url = f"{api.base}/v1/topics/{TOPIC}/stream?since={start}"
    first = asyncio.run(read_events(url, 12))
    assert first[0][1] == "ready" and first[0][0] == start and first[0][2]["reset"] is False
    got = [e for e in first if e[1] == "publication"]
    for payload in payloads[20:]:  # published while nobody follows
        assert api.publish(payload)[0] == 200
    last_id = got[-1][0]
    # resume with Last-Event-ID (what EventSource sends); the since= of the URL is overridden
    second = asyncio.run(read_events(url, 18, {"Last-Event-ID": last_id}))
    assert second[0][1] == "ready" and second[0][0] == last_id
    got += [e for e in second if e[1] == "publication"]
    assert [e[2]["payload"] for e in got] == payloads
    numbers = [e[2]["local_seq"] for e in got]
    first_number = int(start.rpartition(":")[2]) + 1
    assert numbers == list(range(first_number, first_number + 30))
    assert all(e[0] == e[2]["cursor"] for e in got)


def test_a_live_stream_at_its_end_gets_each_commit_directly(api: Api) -> None:
    """A stream parked at the end of the topic is written to inside the commit
    (`Deliveries._deliver_now`), which asks the HTTP session `takes_more`; the session class
    once lacked it, so every such commit raised, logged and fell back to the stream's task."""
    payloads = [f"live-{i:02d}" for i in range(5)]

    async def follow_then_publish() -> list[tuple[str, str, Any]]:
        url = f"{api.base}/v1/topics/{TOPIC}/stream?new_only=true"
        ready = asyncio.Event()
        reading = asyncio.ensure_future(read_events(url, len(payloads), ready=ready))
        await asyncio.wait_for(ready.wait(), REQUEST_TIMEOUT)  # the stream started at the end
        for payload in payloads:
            status, _ = await asyncio.to_thread(api.publish, payload)
            assert status == 200
        return await asyncio.wait_for(reading, REQUEST_TIMEOUT)

    events = asyncio.run(follow_then_publish())
    assert [e[2]["payload"] for e in events if e[1] == "publication"] == payloads
    log = api.cluster.node(0).log_of_current_run()
    assert "writing at the commit failed" not in log, log[-2000:]


def test_a_new_only_event_source_that_reconnects_misses_nothing(api: Api) -> None:
    """An EventSource reconnects to the same URL with Last-Event-ID: with ``new_only=true``
    in that URL the stream used to start again at the node's end, skipping what was
    published while it was away.  The reconnection resumes after its last event; ``ready``
    names the new-only bound the node chose, and a malformed bound is refused."""
    url = f"{api.base}/v1/topics/{TOPIC}/stream?new_only=true"

    async def follow_then_publish(payloads: list[str]) -> list[tuple[str, str, Any]]:
        ready = asyncio.Event()
        reading = asyncio.ensure_future(read_events(url, len(payloads), ready=ready))
        await asyncio.wait_for(ready.wait(), REQUEST_TIMEOUT)
        for payload in payloads:
            assert (await asyncio.to_thread(api.publish, payload))[0] == 200
        return await asyncio.wait_for(reading, REQUEST_TIMEOUT)

    first = asyncio.run(follow_then_publish(["away-0"]))
    assert first[0][1] == "ready" and first[0][2]["published_from_ms"] > 0
    last_id = first[-1][0]
    missed = ["away-1", "away-2"]
    for payload in missed:  # published while nobody follows
        assert api.publish(payload)[0] == 200
    again = asyncio.run(read_events(url, len(missed), {"Last-Event-ID": last_id}))
    assert again[0][1] == "ready" and again[0][0] == last_id
    assert [e[2]["payload"] for e in again if e[1] == "publication"] == missed
    status, body = curl(f"{url}&published_from_ms=soon")
    assert status == 400 and body["code"] == "bad_request" and "published_from_ms" in body["detail"], body


def test_refused_cursors_and_from_now(api: Api) -> None:
    url = f"{api.base}/v1/topics/{TOPIC}/stream"
    status, body = curl("-H", "Last-Event-ID: deadbeef:1", url)
    assert status == 409 and body["code"] == "cursor_incarnation", body
    status, history = curl(f"{api.base}/v1/topics/{TOPIC}/publications?limit=1")
    inc = history["incarnation"]
    status, body = curl(f"{url}?since={inc}:999999")
    assert status == 409 and body["code"] == "cursor_beyond_end", body
    status, body = curl(f"{api.base}/v1/topics/{TOPIC}/publications?since=deadbeef:1")
    assert status == 409 and body["code"] == "cursor_incarnation", body
    events = asyncio.run(read_events(f"{url}?from_now=true", 0, {"Last-Event-ID": "deadbeef:1"}))
    ready = events[0]
    assert ready[1] == "ready" and ready[2]["reset"] is True and ready[0] == f"{inc}:{ready[2]['latest']}"


BAD_INPUT = [
    # (method, path, body or None, content type, status, code)
    ("POST", "/v1/topics/news/publications", "{not json", "application/json", 400, "bad_request"),
    ("POST", "/v1/topics/news/publications", "[1]", "application/json", 400, "bad_request"),
    ("POST", "/v1/topics/news/publications", "{}", "application/json", 400, "bad_payload"),
    ("POST", "/v1/topics/news/publications", '{"payload": "a", "payload_base64": "YQ=="}', "application/json", 400, "bad_payload"),
    ("POST", "/v1/topics/news/publications", '{"payload_base64": "not base64!"}', "application/json", 400, "bad_payload"),
    ("POST", "/v1/topics/news/publications", '{"payload": 5}', "application/json", 400, "bad_payload"),
    ("POST", "/v1/topics/news/publications", '{"payload": "a", "extra": 1}', "application/json", 400, "bad_request"),
    ("POST", "/v1/topics/news/publications", '{"payload": "a", "msg_id": "has space"}', "application/json", 400, "bad_msg_id"),
    ("POST", "/v1/topics/news/publications", '{"payload": "a", "msg_id": ""}', "application/json", 400, "bad_msg_id"),
    ("POST", "/v1/topics/news/publications", json.dumps({"payload": "a", "msg_id": "x" * 65}), "application/json", 400, "bad_msg_id"),
    ("POST", "/v1/topics/news/publications", json.dumps({"payload": "x" * 65537}), "application/json", 413, "payload_too_large"),
    ("POST", "/v1/topics/news/publications", "hello", "text/plain", 415, "unsupported_media_type"),
    ("POST", "/v1/topics/bad%01topic/publications", '{"payload": "a"}', "application/json", 400, "bad_topic"),
    ("PUT", "/v1/topics/" + "t" * 257 + "/membership", None, "", 400, "bad_topic"),
    ("GET", "/v1/topics/news/publications?since=-1", None, "", 400, "bad_since"),
    ("GET", "/v1/topics/news/publications?since=xyz:1", None, "", 400, "bad_since"),
    ("GET", "/v1/topics/news/publications?limit=0", None, "", 400, "bad_request"),
    ("GET", "/v1/topics/news/stream?from_now=maybe", None, "", 400, "bad_request"),
    ("GET", "/v1/topics/news/publications?limit=%C2%B2", None, "", 400, "bad_request"),  # "²": isdigit, not int
    ("GET", "/v1/topics/news/publications?limit=%D9%A3", None, "", 400, "bad_request"),  # an Arabic-Indic 3
    ("GET", "/v1/topics/news/stream?published_from_ms=%D9%A3", None, "", 400, "bad_request"),
    ("GET", "/v1/topics/news/publications?limt=5", None, "", 400, "bad_request"),
    ("GET", "/v1/topics/news/publications?limit=1&limit=2", None, "", 400, "bad_request"),
    ("GET", "/v1/topics/news/stream?new-only=true", None, "", 400, "bad_request"),
    ("POST", "/v1/topics/news/publications?msg_id=m", '{"payload": "a"}', "application/json", 400, "bad_request"),
    ("GET", "/v1/status?verbose=1", None, "", 400, "bad_request"),
    ("DELETE", "/v1/topics/never-joined/membership", None, "", 404, "not_member"),
    ("GET", "/v1/topics/never-joined/stream", None, "", 404, "not_member"),
    ("POST", "/v1/topics/nobody-here/publications", '{"payload": "a"}', "application/json", 409, "no_members"),
    ("GET", "/v1/nothing", None, "", 404, "not_found"),
    ("PATCH", "/v1/status", None, "", 405, "method_not_allowed"),
]


@pytest.mark.parametrize(("method", "path", "body", "ctype", "status", "code"), BAD_INPUT)
def test_bad_input_is_a_json_error(
    api: Api, method: str, path: str, body: str | None, ctype: str, status: int, code: str
) -> None:
    args = ["-X", method, f"{api.base}{path}"]
    if body is not None:
        args += ["-H", f"Content-Type: {ctype}", "--data-binary", body]
    got, answer = curl(*args)
    assert (got, answer["code"]) == (status, code), answer
    assert isinstance(answer["detail"], str) and answer["detail"]


def test_a_non_loopback_address_needs_the_allow_flag(tmp_path: Any) -> None:
    """Refused at start, with the flag and variable that allow it."""
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "node", "--listen", "127.0.0.1:1", "--supervisor",
         "127.0.0.1:2", "--http-listen", "0.0.0.0:8080"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "--http-allow-remote" in done.stderr, done.stderr


def test_schemathesis_finds_no_failure(api: Api) -> None:
    """Every operation but the stream (an endless response) with generated valid and
    invalid input: no server error, every status, content type and body as documented,
    invalid input rejected.  (The stream's refusals are tested above.)"""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(f"{api.base}/v1/openapi.json").exclude(path_regex="/stream$")
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {op.label for op in operations}
    assert {"POST /v1/topics/{topic}/publications", "GET /v1/topics/{topic}/publications",
            "PUT /v1/topics/{topic}/membership", "DELETE /v1/topics/{topic}/membership", "GET /v1/status"} <= labels
    calls: Counter[tuple[str, str]] = Counter()
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and not operation.path_parameters and not operation.body:
                continue  # nothing to make invalid

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=40, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case) -> None:
                topic = unquote(str((case.path_parameters or {}).get("topic", "")))
                if re.search("[\x00-\x1f\x7f-\x9f]", topic):
                    # A topic with a control character breaks the documented pattern, yet
                    # schemathesis once took such a case for a valid one (ST202, "schema-valid
                    # request rejected"); the node must refuse it as bad input.
                    response = case.call(base_url=api.base, timeout=REQUEST_TIMEOUT)
                    assert response.status_code == 400, response.text
                    assert response.json()["code"].startswith("bad_"), response.text
                else:
                    case.call_and_validate(base_url=api.base, timeout=REQUEST_TIMEOUT)
                calls[(case.meta.generation.mode.value if case.meta else "?", case.operation.label)] += 1

            check()
    assert calls[("positive", "POST /v1/topics/{topic}/publications")] >= 20, calls
    assert calls[("negative", "POST /v1/topics/{topic}/publications")] >= 20, calls
    assert all(calls[("positive", label)] >= 1 for label in labels), calls
