"""The OpenAPI 3 document of the node's HTTP API (`pubsub.node.http`), served at
``GET /v1/openapi.json``; schemathesis checks the live API against it
(tests/integration/test_http_api.py)."""

from __future__ import annotations

import copy
from typing import Any

from pubsub.kernel.wire import MAX_TOPIC_CHARS
from pubsub.publications.fields import MAX_MSG_ID_CHARS

_ERROR = {"$ref": "#/components/schemas/Error"}
_CURSOR_PATTERN = "^([0-9a-f]{1,64}:)?[0-9]{1,18}$"


def _errors(*statuses: int) -> dict[str, Any]:
    """Error responses (``{"code", "detail"}``) for `statuses`."""
    what = {
        400: "bad input (bad_topic, bad_msg_id, bad_payload, bad_since, bad_request)",
        403: "permission_denied: with TLS, the client certificate may not do this (nothing was done)",
        404: "no such path, or (DELETE membership) the node does not run the topic (not_member)",
        405: "method not allowed",
        409: "no_members, or a refused cursor (cursor_incarnation, cursor_beyond_end)",
        413: "payload_too_large: nothing was stored",
        415: "the body is not application/json",
        503: "handover_failed, store_error (nothing was stored) or unavailable",
        504: "unknown: it may or may not be stored; publish again with the same msg_id",
    }
    return {str(s): {"description": what[s], "content": {"application/json": {"schema": _ERROR}}} for s in statuses}


_TOPIC_PARAM = {
    "name": "topic",
    "in": "path",
    "required": True,
    "description": f"the topic: 1..{MAX_TOPIC_CHARS} characters, no control characters",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_TOPIC_CHARS,
        "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
    },
}

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "pubsub node HTTP API",
        "version": "1",
        "description": "Publish, read and follow a topic's publications through one subscriber node "
        "(README, 'HTTP API').  Errors are {code, detail} with the node's codes.",
    },
    "paths": {
        "/v1/status": {
            "get": {
                "operationId": "status",
                "summary": "The node's status (as `pubsub status --node --json`)",
                "responses": {
                    "200": {
                        "description": "the status",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_errors(503),
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "responses": {
                    "200": {
                        "description": "the OpenAPI document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/v1/topics/{topic}/membership": {
            "parameters": [_TOPIC_PARAM],
            "put": {
                "operationId": "join",
                "summary": "The node subscribes to the topic (joins its skip ring)",
                "responses": {
                    "200": {
                        "description": "joined (or already a member)",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Membership"}}},
                    },
                    **_errors(400, 403, 404, 503),
                },
            },
            "delete": {
                "operationId": "leave",
                "summary": "The node unsubscribes from the topic",
                "responses": {
                    "200": {
                        "description": "left",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Membership"}}},
                    },
                    **_errors(400, 403, 404, 503),
                },
            },
        },
        "/v1/topics/{topic}/publications": {
            "parameters": [_TOPIC_PARAM],
            "post": {
                "operationId": "publish",
                "summary": "Publish: answered once a member of the topic has stored it",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PublishBody"}}},
                },
                "responses": {
                    "200": {
                        "description": "acknowledged (durable says how durably; duplicate: the msg_id was "
                        "published before and nothing new was stored)",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Ack"}}},
                    },
                    **_errors(400, 403, 404, 409, 413, 415, 503, 504),
                },
            },
            "get": {
                "operationId": "history",
                "summary": "What the node holds after `since`, in its local order",
                "parameters": [
                    {
                        "name": "since",
                        "in": "query",
                        "required": False,
                        "description": "a local number N or a cursor INCARNATION:N (default 0: everything)",
                        "schema": {"type": "string", "pattern": _CURSOR_PATTERN},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "description": "at most this many publications (default 1000)",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the publications",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/History"}}},
                    },
                    **_errors(400, 403, 404, 409, 503),
                },
            },
        },
        "/v1/topics/{topic}/stream": {
            "parameters": [_TOPIC_PARAM],
            "get": {
                "operationId": "stream",
                "summary": "A live stream of the topic's publications as Server-Sent Events",
                "description": "Events: `ready` (where the stream starts), then one `publication` per "
                "delivery (data: a Publication object), in local order, each exactly once.  Every "
                "event's id is the resume cursor INCARNATION:LOCAL_SEQ: reconnect with a "
                "Last-Event-ID header (or since=) to continue without gaps or repeats.  A topic the "
                "node does not run is refused (404 not_member; join=true joins it first), and if the "
                "node leaves the topic an `error` event (not_member) ends the stream.",
                "parameters": [
                    {
                        "name": "since",
                        "in": "query",
                        "required": False,
                        "description": "a local number N or a cursor INCARNATION:N (default 0: from the "
                        "beginning); a Last-Event-ID header overrides it",
                        "schema": {"type": "string", "pattern": _CURSOR_PATTERN},
                    },
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "description": "the id of the last event received: resume after it",
                        "schema": {"type": "string", "pattern": _CURSOR_PATTERN},
                    },
                    {
                        "name": "new_only",
                        "in": "query",
                        "required": False,
                        "description": "skip the history: what the node holds now and what it stores later "
                        "that was published more than 1 s before the request (ignored with Last-Event-ID)",
                        "schema": {"type": "boolean"},
                    },
                    {
                        "name": "published_from_ms",
                        "in": "query",
                        "required": False,
                        "description": "skip publications published before this Unix ms (0: none; the "
                        "ready event of a new_only stream names the bound it chose)",
                        "schema": {"type": "integer", "minimum": 0, "maximum": 253402300799999},
                    },
                    {
                        "name": "from_now",
                        "in": "query",
                        "required": False,
                        "description": "start from the node's latest publication if the cursor is refused",
                        "schema": {"type": "boolean"},
                    },
                    {
                        "name": "join",
                        "in": "query",
                        "required": False,
                        "description": "first make the node subscribe to the topic",
                        "schema": {"type": "boolean"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the event stream (until the client disconnects or the node leaves the topic)",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    **_errors(400, 403, 404, 409, 503),
                },
            },
        },
    },
    "components": {
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["code", "detail"],
                "properties": {
                    "code": {"type": "string"},
                    "detail": {"type": "string"},
                    "msg_id": {"type": "string", "description": "(publish) the request's message id"},
                },
            },
            "Membership": {
                "type": "object",
                "required": ["action", "topic", "persisted"],
                "properties": {
                    "action": {"type": "string", "enum": ["join", "leave"]},
                    "topic": {"type": "string"},
                    "persisted": {"type": "boolean", "description": "written to the node's topics file"},
                    "warning": {"type": "string"},
                },
            },
            "PublishBody": {
                "type": "object",
                "description": "exactly one of payload (text, sent as UTF-8) and payload_base64",
                "additionalProperties": False,
                "properties": {
                    "payload": {"type": "string"},
                    "payload_base64": {"type": "string", "format": "byte"},
                    "msg_id": {
                        "type": "string",
                        "pattern": f"^[!-~]{{1,{MAX_MSG_ID_CHARS}}}$",
                        "description": "the publication's id (generated when absent); a repeat within "
                        "the node's window is answered as a duplicate",
                    },
                },
                "oneOf": [{"required": ["payload"]}, {"required": ["payload_base64"]}],
            },
            "Ack": {
                "type": "object",
                "required": [
                    "topic", "publisher", "seq", "key", "stored_by", "local_seq", "durable", "duplicate", "msg_id",
                ],
                "properties": {
                    "topic": {"type": "string"},
                    "publisher": {"type": "string"},
                    "seq": {"type": "integer"},
                    "key": {"type": "string", "pattern": "^[0-9a-f]*$"},
                    "stored_by": {"type": "string"},
                    "local_seq": {"type": "integer", "nullable": True},
                    "durable": {"type": "boolean"},
                    "duplicate": {"type": "boolean"},
                    "msg_id": {"type": "string"},
                },
            },
            "Publication": {
                "type": "object",
                "required": [
                    "topic", "local_seq", "cursor", "publisher", "seq", "key", "stored_at_ms", "published_ms",
                    "msg_id", "payload",
                ],
                "properties": {
                    "topic": {"type": "string"},
                    "local_seq": {"type": "integer"},
                    "cursor": {"type": "string"},
                    "publisher": {"type": "string"},
                    "seq": {"type": "integer"},
                    "key": {"type": "string"},
                    "stored_at_ms": {"type": "integer"},
                    "published_ms": {"type": "integer", "nullable": True},
                    "msg_id": {"type": "string", "nullable": True},
                    "payload": {"type": "string", "nullable": True, "description": "null when not UTF-8"},
                    "payload_base64": {"type": "string", "description": "only when payload is null"},
                },
            },
            "History": {
                "type": "object",
                "required": ["topic", "incarnation", "latest", "publications", "cursor", "more"],
                "properties": {
                    "topic": {"type": "string"},
                    "incarnation": {"type": "string"},
                    "latest": {"type": "integer"},
                    "publications": {"type": "array", "items": {"$ref": "#/components/schemas/Publication"}},
                    "cursor": {"type": "string", "description": "resume with since= this"},
                    "more": {"type": "boolean", "description": "limit was reached: ask again from cursor"},
                },
            },
        }
    },
}


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document."""
    return copy.deepcopy(_DOCUMENT)
