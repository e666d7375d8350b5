"""The node's HTTP API (aiohttp): publish, history, a live Server-Sent-Events stream, topic
membership and status, for clients in any language (README, "HTTP API").

Served beside the node's own port when the node is started with ``--http-listen HOST:PORT``
(`pubsub.runtime.httpserve.HttpService`, on the node's event loop).  The handlers talk to the
node in-process, through the same entry points as a TCP client: a request is turned into
the client message it stands for (``PublishRequest``, ``Follow``, ``JoinTopic``,
``LeaveTopic``, ``StatusRequest``) and handed to `Runtime.serve_request`, where a TCP
client's requests go after the connection's own checks (then `NodeApp.session_request` or
`NodeApp.control`; an exception there is counted and answered ``handler_error``), with a
`pubsub.runtime.local.QueuedSession`, a `ClientSession` whose messages go to a queue the
handler reads instead of to a socket.  Publishing,
de-duplication by message id, hand-overs, cursors and delivery order are therefore exactly
those of the TCP protocol; this module only validates input (topic names with
`pubsub.kernel.wire.validate_topic`, message ids with `pubsub.publications.fields.validate_msg_id`,
cursors, base64) and translates answers.

Errors are JSON objects ``{"code", "detail"}`` with the node's own codes, mapped to HTTP
statuses by `STATUS_OF` (the README's table): bad input is 4xx, a publication that was
certainly not stored 409/413/503, and ``unknown`` (it may or may not be stored: retry with
the same ``msg_id``) 504, distinct from every definite failure.

The stream: ``GET /v1/topics/{topic}/stream`` answers ``text/event-stream``.  The first
event, ``ready``, says where the stream starts; then one ``publication`` event per delivery,
in the node's local order, each exactly once.  Every event's ``id`` is the resume cursor
``INCARNATION:LOCAL_SEQ``, so a client that reconnects with ``Last-Event-ID`` (what browsers'
EventSource do by themselves) or ``?since=`` continues without gaps or repeats; a cursor the
node cannot honour is refused (``cursor_incarnation``, ``cursor_beyond_end``) unless
``from_now=true``.  ``new_only=true`` skips the history (`pubsub.node.delivery`: what the
node holds and what it fetches later that was published before the request); ``ready``
names the bound it chose (``published_from_ms``), which a client may give again as
``?published_from_ms=`` when it resumes.  A reconnection with ``Last-Event-ID`` resumes
after that event even if the URL says ``new_only=true`` (an EventSource reconnects to the
same URL): nothing published while it was away is skipped.  A comment line is sent every
`KEEPALIVE` seconds of silence.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Send, Topic
from pubsub.node.openapi import openapi_document
from pubsub.node.permits import refusal as client_refusal
from pubsub.publications.fields import validate_msg_id
from pubsub.publications.hosted import HostedNode
from pubsub.publications.messages import (
    Delivery,
    Follow,
    JoinTopic,
    LeaveTopic,
    MsgId,
    Payload,
    PublishAck,
    PublishFailed,
    PublishRequest,
)
from pubsub.runtime.connection import ClientSession
from pubsub.runtime.local import QueuedSession
from pubsub.runtime.net import Runtime
from pubsub.runtime.permissions import DENIED
from pubsub.runtime.tls import peer_identity

log = logging.getLogger(__name__)

#: Seconds a publish request waits for the node's answer before it says ``unknown``.
PUBLISH_TIMEOUT = 15.0
#: Seconds of silence after which a stream sends a keep-alive comment.
KEEPALIVE = 15.0
#: Publications one history request returns at most (``limit``).
MAX_HISTORY_LIMIT = 10_000

#: HTTP status of each error code (the README's table, and cursor and input errors).
STATUS_OF: dict[str, int] = {
    "bad_request": 400,
    "bad_topic": 400,
    "bad_msg_id": 400,
    "bad_payload": 400,
    "bad_since": 400,
    "not_found": 404,
    "not_member": 404,
    "permission_denied": 403,
    "method_not_allowed": 405,
    "no_members": 409,
    "cursor_incarnation": 409,
    "cursor_beyond_end": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "handover_failed": 503,
    "store_error": 503,
    "unavailable": 503,
    "unknown": 504,
    "handler_error": 500,
}

_CURSOR = re.compile(r"(?:([0-9a-f]{1,64}):)?([0-9]{1,18})")
#: A number in a query: ASCII digits only (str.isdigit also takes "²" and "٣").
_DIGITS = re.compile(r"[0-9]{1,18}")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


class ApiError(Exception):
    """A request that is answered with a JSON error (`code` from `STATUS_OF`)."""

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra

    def response(self) -> web.Response:
        return error_response(self.code, self.detail, **self.extra)


def error_response(code: str, detail: str, **extra: Any) -> web.Response:
    """``{"code", "detail", ...}`` with the status `STATUS_OF` gives the code (500 if none)."""
    return web.json_response({"code": code, "detail": detail, **extra}, status=STATUS_OF.get(code, 500))


class Node(Protocol):
    """What the API uses of the node's application (`pubsub.node.app.NodeApp`)."""

    runtime: Runtime | None
    core: HostedNode

    # what its runtime's `serve_request` calls
    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]: ...

    def session_request(self, msg: Message, session: ClientSession, now: float) -> list[Send] | None: ...


class NodeHttpApi:
    """The routes of the HTTP API over one node application (`Node`) (see the module docstring)."""

    def __init__(self, app: Node, *, publish_timeout: float = PUBLISH_TIMEOUT) -> None:
        self.app = app
        self.publish_timeout = publish_timeout
        self.sessions: set[QueuedSession] = set()
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------ plumbing
    def _runtime(self) -> Runtime:
        runtime = self.app.runtime
        if runtime is None:
            raise ApiError("unavailable", "the node is not serving yet")
        return runtime

    def _session(self, request: web.Request) -> QueuedSession:
        session = QueuedSession(f"http {request.remote or '?'}")
        self.sessions.add(session)
        session.on_close(lambda: self.sessions.discard(session))
        return session

    async def close_all(self, _app: web.Application | None = None) -> None:
        """End every open request's session (at shutdown: open streams end at once)."""
        for session in list(self.sessions):
            session.close()

    def _permit(self, request: web.Request, msg: Message) -> None:
        """With TLS: ApiError ``permission_denied`` (counted) unless the client certificate
        of `request` may make request `msg` (`pubsub.node.permits`, as on the node's port)."""
        runtime = self._runtime()
        if runtime.authority is None:
            return
        transport = request.transport
        identity = peer_identity(transport) if transport is not None else None
        refusal = client_refusal(msg, identity, runtime.authority)
        if refusal is not None:
            runtime.stats.error(DENIED)
            raise ApiError(DENIED, getattr(refusal, "detail", DENIED))

    def _control(self, msg: Message, request: web.Request) -> dict[str, Any]:
        """`NodeApp.control`, once `request` may make `msg`, through `Runtime.serve_request`
        as a TCP client's request goes (the sends go out; an exception of the node is
        counted and answered ``handler_error``); the reply's body."""
        self._permit(request, msg)
        runtime = self._runtime()
        replies: list[Message] = []
        runtime.serve_request(msg, None, replies.append, runtime.now())
        reply = replies[0]  # `control` answers at once
        if isinstance(reply, ErrorReply):
            raise ApiError(reply.code, reply.detail)
        if not isinstance(reply, Reply):
            raise ApiError("unavailable", f"the node answered with {reply.kind!r}")
        return reply.body

    # ------------------------------------------------------------------ handlers
    async def status(self, request: web.Request) -> web.Response:
        """GET /v1/status: the node's status (as ``pubsub status --node --json``)."""
        _query(request)
        return web.json_response(self._control(StatusRequest(), request), dumps=_dumps)

    async def openapi(self, request: web.Request) -> web.Response:
        """GET /v1/openapi.json: the OpenAPI document of this API."""
        _query(request)
        return web.json_response(openapi_document())

    async def join(self, request: web.Request) -> web.Response:
        """PUT /v1/topics/{topic}/membership: the node subscribes to the topic."""
        _query(request)
        topic = _topic(request)
        return web.json_response(_membership(self._control(JoinTopic(topic=topic), request)))

    async def leave(self, request: web.Request) -> web.Response:
        """DELETE /v1/topics/{topic}/membership: the node unsubscribes (404 if it does not
        run the topic)."""
        _query(request)
        topic = _topic(request)
        if topic not in self.app.core.wanted_topics:
            raise ApiError("not_member", f"this node does not subscribe to {topic!r}")
        return web.json_response(_membership(self._control(LeaveTopic(topic=topic), request)))

    async def publish(self, request: web.Request) -> web.Response:
        """POST /v1/topics/{topic}/publications: publish; the acknowledgement or an error."""
        _query(request)
        topic = _topic(request)
        payload, msg_id = await _publish_body(request)
        runtime = self._runtime()
        msg = PublishRequest(topic=topic, payload=Payload(payload), id=next(self._ids), msg_id=MsgId(msg_id))
        self._permit(request, msg)
        session = self._session(request)
        try:
            runtime.serve_request(msg, session, session.send, runtime.now())
            try:
                answer = await session.next(self.publish_timeout)
            except TimeoutError:
                raise ApiError(
                    "unknown",
                    f"no answer within {self.publish_timeout:g} s: the publication may or may not be "
                    "stored; publishing again with the same msg_id is safe",
                    msg_id=msg_id,
                ) from None
        finally:
            session.close()
        if isinstance(answer, PublishAck):
            return web.json_response(
                {
                    "topic": answer.topic,
                    "publisher": answer.publisher,
                    "seq": answer.seq,
                    "key": answer.key.hex(),
                    "stored_by": answer.stored_by,
                    "local_seq": answer.local_seq,
                    "durable": answer.durable,
                    "duplicate": answer.duplicate,
                    "msg_id": msg_id,
                }
            )
        if isinstance(answer, (PublishFailed, ErrorReply)):
            raise ApiError(answer.code, answer.detail, msg_id=msg_id)
        raise ApiError("unknown", "the node answered nothing", msg_id=msg_id)

    async def history(self, request: web.Request) -> web.Response:
        """GET /v1/topics/{topic}/publications: what the node holds after ``since``, at most
        ``limit`` of them, in local order."""
        query = _query(request, "since", "limit")
        topic = _topic(request)
        since, incarnation = _cursor(query.get("since", "0"), "since")
        limit = _int(query.get("limit", "1000"), "limit", 1, MAX_HISTORY_LIMIT)
        session, start = await self._follow(request, Follow(topic, since, False, False, incarnation, False))
        inc = str(start.get("incarnation") or "")
        out: list[dict[str, Any]] = []
        more = False
        try:
            while True:
                msg = await session.next()
                if isinstance(msg, Delivery):
                    if len(out) == limit:
                        more = True
                        break
                    out.append(delivery_json(msg, inc))
                elif isinstance(msg, ErrorReply):
                    raise ApiError(msg.code, msg.detail)
                else:  # the end
                    break
        finally:
            session.close()
        last = out[-1]["local_seq"] if out else int(start.get("since", since))
        return web.json_response(
            {
                "topic": topic,
                "incarnation": inc,
                "latest": start.get("latest"),
                "publications": out,
                "cursor": f"{inc}:{last}",
                "more": more,
            }
        )

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """GET /v1/topics/{topic}/stream: Server-Sent Events (see the module docstring)."""
        query = _query(request, "since", "new_only", "from_now", "published_from_ms", "join")
        topic = _topic(request)
        resumed = request.headers.get("Last-Event-ID")
        given = resumed or query.get("since", "0")
        since, incarnation = _cursor(given, "Last-Event-ID" if resumed else "since")
        new_only = _bool(query.get("new_only"), "new_only") and not resumed  # see the module docstring
        from_now = _bool(query.get("from_now"), "from_now")
        published_from_ms = _int(query.get("published_from_ms", "0"), "published_from_ms", 0, MAX_MS)
        if _bool(query.get("join"), "join"):
            self._control(JoinTopic(topic=topic), request)
        follow = Follow(topic, since, new_only, True, incarnation, from_now, published_from_ms)
        session, start = await self._follow(request, follow)
        inc = str(start.get("incarnation") or "")
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        try:
            await response.prepare(request)
            ready = {k: start.get(k) for k in ("topic", "since", "latest", "incarnation", "reset", "published_from_ms")}
            await response.write(_event("ready", f"{inc}:{start.get('since', since)}", ready))
            while True:
                try:
                    msg = await session.next(KEEPALIVE)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if msg is None:
                    break
                if isinstance(msg, Delivery):
                    await response.write(_event("publication", f"{inc}:{msg.local_seq}", delivery_json(msg, inc)))
                elif isinstance(msg, ErrorReply):
                    await response.write(_event("error", None, {"code": msg.code, "detail": msg.detail}))
                    break
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away: it resumes with Last-Event-ID
        finally:
            session.close()
        return response

    async def _follow(self, request: web.Request, follow: Follow) -> tuple[QueuedSession, dict[str, Any]]:
        """Open a delivery stream in the node; the session and the node's start reply (an
        ApiError with the node's code if it refused)."""
        self._permit(request, follow)
        runtime = self._runtime()
        session = self._session(request)
        runtime.serve_request(follow, session, session.send, runtime.now())
        first = await session.next()
        if isinstance(first, Reply):
            return session, first.body
        session.close()
        if isinstance(first, ErrorReply):
            raise ApiError(first.code, first.detail)
        raise ApiError("unavailable", "the node did not start the stream")


# ---------------------------------------------------------------------- input and output
def _topic(request: web.Request) -> Topic:
    try:
        return wire.validate_topic(request.match_info["topic"])
    except wire.WireError as exc:
        raise ApiError("bad_topic", exc.detail) from None


def _cursor(value: str, name: str) -> tuple[int, str | None]:
    """(local number, incarnation or None) of ``N`` or ``INCARNATION:N``."""
    found = _CURSOR.fullmatch(value)
    if found is None:
        raise ApiError("bad_since", f"{name} must be a local number N or a cursor INCARNATION:N, got {value[:80]!r}")
    return int(found.group(2)), found.group(1)


#: The largest wall-clock millisecond a query may name (the year 9999).
MAX_MS = 253_402_300_799_999


def _query(request: web.Request, *allowed: str) -> Mapping[str, str]:
    """The request's query parameters, each of `allowed` at most once; 400 ``bad_request``
    for any other (a misspelt ``new-only`` would otherwise be ignored without a word, as an
    unknown body field is not) or for one given twice."""
    query = request.query
    for name in query:
        if name not in allowed:
            takes = f"takes {', '.join(allowed)}" if allowed else "takes no query parameter"
            raise ApiError("bad_request", f"unknown query parameter {name[:80]!r}: this request {takes}")
        if len(query.getall(name)) > 1:
            raise ApiError("bad_request", f"query parameter {name!r} given more than once")
    return query


def _int(value: str, name: str, low: int, high: int) -> int:
    if _DIGITS.fullmatch(value) is None or not low <= int(value) <= high:
        raise ApiError("bad_request", f"{name} must be an integer {low}..{high}, got {value[:80]!r}")
    return int(value)


def _bool(value: str | None, name: str) -> bool:
    if value is None or value.lower() in _FALSE:
        return False
    if value.lower() in _TRUE:
        return True
    raise ApiError("bad_request", f"{name} must be true or false, got {value[:80]!r}")


async def _publish_body(request: web.Request) -> tuple[bytes, str]:
    """(payload, message id) of a publish request: a JSON object with ``payload`` (text,
    sent as UTF-8) or ``payload_base64``, and optionally ``msg_id`` (generated if absent)."""
    if request.content_type != "application/json":
        raise ApiError("unsupported_media_type", f"the body must be application/json, not {request.content_type}")
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("bad_request", f"the body is not JSON: {exc}") from None
    except RecursionError:  # json's decoder recurses once per nested array or object
        raise ApiError("bad_request", "the body is not a publish request: JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError("bad_request", "the body must be a JSON object")
    unknown = set(body) - {"payload", "payload_base64", "msg_id"}
    if unknown:
        raise ApiError("bad_request", f"unknown field(s): {', '.join(sorted(unknown))[:200]}")
    if ("payload" in body) == ("payload_base64" in body):
        raise ApiError("bad_payload", "give exactly one of payload (text) and payload_base64")
    if "payload" in body:
        if not isinstance(body["payload"], str):
            raise ApiError("bad_payload", "payload must be a string (use payload_base64 for bytes)")
        try:
            payload = body["payload"].encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError("bad_payload", "payload is not valid Unicode text") from None
    else:
        value = body["payload_base64"]
        try:
            if not isinstance(value, str):
                raise ValueError
            payload = base64.b64decode(value, validate=True)
        except (ValueError, binascii.Error):
            raise ApiError("bad_payload", "payload_base64 must be a base64 string") from None
    msg_id = body.get("msg_id")
    if msg_id is None:
        return payload, uuid.uuid4().hex
    try:
        if msg_id == "":
            raise wire.WireError("bad_field", "a message id must not be empty")
        return payload, validate_msg_id(msg_id)
    except wire.WireError as exc:
        raise ApiError("bad_msg_id", exc.detail) from None


def delivery_json(d: Delivery, incarnation: str) -> dict[str, Any]:
    """A delivery as JSON (the fields of ``pubsub subscribe --json``)."""
    try:
        text: str | None = bytes(d.payload).decode("utf-8")
        encoded = None
    except UnicodeDecodeError:
        text, encoded = None, base64.b64encode(d.payload).decode("ascii")
    return {
        "topic": d.topic,
        "local_seq": d.local_seq,
        "cursor": f"{incarnation}:{d.local_seq}",
        "publisher": d.publisher,
        "seq": d.seq,
        "key": bytes(d.key).hex(),
        "stored_at_ms": d.stored_at_ms,
        "published_ms": d.published_ms or None,
        "msg_id": d.msg_id or None,
        "payload": text,
        **({"payload_base64": encoded} if encoded is not None else {}),
    }


def _membership(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("action", "topic", "persisted", "warning") if k in body}


def _event(kind: str, event_id: str | None, data: dict[str, Any]) -> bytes:
    """One Server-Sent Event (the JSON on one data line)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _dumps(value: Any) -> str:
    """JSON for status bodies, which may hold bytes (as hex) and other non-JSON values."""
    return json.dumps(value, default=lambda v: v.hex() if isinstance(v, bytes) else str(v))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Our error codes for aiohttp's own refusals (any other 4xx is ``bad_request``).
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def _error_middleware(app: Node, body_limit: int) -> Middleware:
    """Every error as JSON ``{"code", "detail"}``: ours, aiohttp's own (unknown path, wrong
    method, oversize body: its detail names the limit) and a failure of a handler (a bug:
    logged and counted as ``handler_error``, as for a TCP client, and answered 500)."""

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            code = _HTTP_CODES.get(exc.status, "bad_request")
            detail = exc.reason
            if exc.status == 413:
                detail = (f"the request body exceeds this node's limit of {body_limit} bytes (a payload of at "
                          f"most {app.core.max_payload_bytes} bytes, PUBSUB_MAX_PAYLOAD_BYTES, in base64 and JSON)")
            response = web.json_response({"code": code, "detail": detail}, status=exc.status)
            if exc.status == 405 and "Allow" in exc.headers:
                response.headers["Allow"] = exc.headers["Allow"]
            return response
        except Exception:  # noqa: BLE001 - the node must answer, and survive its own bug
            log.exception("HTTP %s %s failed", request.method, request.path)
            if app.runtime is not None:
                app.runtime.stats.error("handler_error")
            if request.writer.output_size > 0:
                raise  # a stream already under way cannot take another response: aiohttp closes it
            return error_response("handler_error", "the node failed on this request (logged)")

    return errors


def http_application(app: Node, *, publish_timeout: float = PUBLISH_TIMEOUT) -> web.Application:
    """The aiohttp application of the HTTP API over `app` (see the module docstring)."""
    api = NodeHttpApi(app, publish_timeout=publish_timeout)
    # A base64 payload of the largest size, with room for the JSON around it.
    limit = 4 * app.core.max_payload_bytes // 3 + 64 * 1024
    web_app = web.Application(middlewares=[_error_middleware(app, limit)], client_max_size=limit)
    web_app.on_shutdown.append(api.close_all)
    topic = "/v1/topics/{topic}"
    web_app.router.add_get("/v1/status", api.status)
    web_app.router.add_get("/v1/openapi.json", api.openapi)
    web_app.router.add_put(f"{topic}/membership", api.join)
    web_app.router.add_delete(f"{topic}/membership", api.leave)
    web_app.router.add_post(f"{topic}/publications", api.publish)
    web_app.router.add_get(f"{topic}/publications", api.history)
    web_app.router.add_get(f"{topic}/stream", api.stream)
    return web_app
