"""The supervisor's web view (issue 12, item 5): every topic's overlay as it is now.

With ``--web-listen HOST:PORT`` (`pubsub.supervisor.settings.SupervisorSettings.web_listen`) the
supervisor serves, beside its own port (`pubsub.runtime.httpserve.HttpService`):

* ``GET /`` -- one page (``webview.html``: plain JavaScript and SVG) that draws each topic:
  the members on a circle at the angle 2π·r (their place in the overlay), the edges the
  nodes report, whether the topic is legitimate, each member's publication count, and a log
  of faults and convergence;
* ``GET /api/rings`` -- the same data as JSON (`RingWatch.view`);
* ``GET /api/stream`` -- Server-Sent Events: one ``view`` event with that JSON after every
  poll (the first at once).

The supervisor knows the members of every topic (its database).  Once per `POLL_INTERVAL`
the watch asks every member for its status (`pubsub.runtime.client.request`, at most
`MAX_PARALLEL` at a time, each within `NODE_TIMEOUT`) and judges each topic by its
overlay's own view of it (`pubsub.kernel.contracts.Overlay.web_topic`: for the skip ring,
against the ideal skip ring of the supervisor's membership; for the clique, every member
answering with the supervisor's member list).  Whether the members' publication tries
agree is shown beside it (``publications_agree``), not as part of legitimacy.

The log (`LOG_LENGTH` entries, newest last) records what changed between two polls:
``fault`` (a member stops answering, or the supervisor removes a member as crashed),
``recovered`` (it answers again), ``joined`` / ``left`` (membership), ``converged`` (a topic
is legitimate again, or legitimate with a new membership) and ``diverged`` (it no longer
is); ``topic`` when a topic is first seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from pubsub.kernel import registry
from pubsub.kernel.contracts import WebTopic
from pubsub.kernel.control import Reply, StatusRequest
from pubsub.runtime.client import RequestError, request

log = logging.getLogger(__name__)

#: Seconds between two polls of the members (start to start).
POLL_INTERVAL = 1.0
#: Seconds a member has to answer one status request.
NODE_TIMEOUT = 1.0
#: Status requests in flight at once.
MAX_PARALLEL = 32
#: Log entries kept (and sent with every view).
LOG_LENGTH = 200
#: The page.
PAGE = Path(__file__).with_name("webview.html")

#: Asks one node for its status: the reply body, or a one-line reason why there is none.
Ask = Callable[[str], Awaitable["Mapping[str, Any] | str"]]


async def ask_status(ref: str, context: ssl.SSLContext | None = None) -> Mapping[str, Any] | str:
    """A node's status reply body, or why it gave none (the default `Ask`; with TLS, the
    supervisor's own `context`)."""
    try:
        reply = await request(ref, StatusRequest(), NODE_TIMEOUT, context=context)
    except RequestError as exc:
        return str(exc)
    if isinstance(reply, Reply) and isinstance(reply.body, Mapping):
        return reply.body
    return f"{ref} answered status with {reply.kind}"


# --- the watch -------------------------------------------------------------------------------
class RingWatch:
    """Polls the members, keeps the current view and the log, and feeds the streams.

    `supervisor_status` returns the supervisor core's status (read on the daemon's own
    event loop); `ask` asks one node (default `ask_status`; tests pass their own);
    `web_topic` judges one topic (the supervisor's overlay's `Overlay.web_topic`; default:
    that of the overlay the supervisor's status names as its ``overlay``, the default
    overlay when it names none).
    """

    def __init__(
        self,
        ref: str,
        supervisor_status: Callable[[], Mapping[str, Any]],
        ask: Ask = ask_status,
        interval: float = POLL_INTERVAL,
        clock: Callable[[], float] = time.time,
        web_topic: WebTopic | None = None,
    ) -> None:
        self.ref = ref
        self.supervisor_status = supervisor_status
        self.ask = ask
        self.web_topic = web_topic
        self.interval = interval
        self.clock = clock
        self.polls = 0
        self.log: deque[dict[str, Any]] = deque(maxlen=LOG_LENGTH)
        self._logged = 0
        self._topics: dict[str, dict[str, Any]] = {}
        self._answering: dict[str, bool] = {}
        self._crashes: int | None = None
        self._nodes: dict[str, dict[str, Any]] = {}
        self._streams: set[asyncio.Queue[str | None]] = set()
        self._limit = asyncio.Semaphore(MAX_PARALLEL)

    # -- polling ----------------------------------------------------------------------------
    async def poll(self) -> None:
        """Ask every member once, judge every topic, log what changed, feed the streams."""
        status = self.supervisor_status()
        topics: Mapping[str, Any] = status.get("topics") or {}
        refs = sorted(
            {str(m["ref"]) for entry in topics.values() for m in entry.get("members") or [] if m.get("ref")}
        )
        replies = await asyncio.gather(*(self._ask(ref) for ref in refs))
        answers = dict(zip(refs, replies, strict=True))
        suspects = [str(s) for s in status.get("suspects") or []]
        judge = self.web_topic or registry.overlay(str(status.get("overlay") or registry.DEFAULT_OVERLAY)).web_topic
        views = {topic: judge(topic, entry, answers, suspects) for topic, entry in sorted(topics.items())}
        crashes = int(status.get("crashes_detected") or 0)
        self._log_changes(views, answers, crashes)
        self._topics = views
        self._nodes = {
            ref: {"answering": isinstance(a, Mapping), "error": None if isinstance(a, Mapping) else a}
            for ref, a in answers.items()
        }
        self._answering = {ref: isinstance(a, Mapping) for ref, a in answers.items()}
        self._crashes = crashes
        self.polls += 1
        self._publish()

    async def _ask(self, ref: str) -> Mapping[str, Any] | str:
        async with self._limit:
            return await self.ask(ref)

    def _log_changes(
        self, views: Mapping[str, dict[str, Any]], answers: Mapping[str, Mapping[str, Any] | str], crashes: int
    ) -> None:
        crashed = self._crashes is not None and crashes > self._crashes
        for ref, answer in sorted(answers.items()):
            was = self._answering.get(ref)
            topics = ", ".join(t for t, v in views.items() if any(m["ref"] == ref for m in v["members"]))
            if not isinstance(answer, Mapping) and was is not False:
                self._add("fault", f"{ref} does not answer ({answer}); member of {topics}", ref=ref)
            elif isinstance(answer, Mapping) and was is False:
                self._add("recovered", f"{ref} answers again", ref=ref)
        for topic, view in views.items():
            before = self._topics.get(topic)
            if before is None:
                state = "legitimate" if view["legitimate"] else "not legitimate"
                self._add("topic", f"{topic}: {view['n']} members, {state}", topic=topic)
                continue
            now_refs = {m["ref"] for m in view["members"]}
            old_refs = {m["ref"] for m in before["members"]}
            for ref in sorted(now_refs - old_refs):
                self._add("joined", f"{ref} joined {topic}", topic=topic, ref=ref)
            for ref in sorted(old_refs - now_refs):
                if crashed or self._answering.get(ref) is False:
                    self._add("fault", f"{ref} removed from {topic} as crashed", topic=topic, ref=ref)
                else:
                    self._add("left", f"{ref} left {topic}", topic=topic, ref=ref)
            # A repair may complete between two looks (a loaded machine looks seldom): a new
            # membership seen legitimate at once has converged too.
            if view["legitimate"] and (not before["legitimate"] or now_refs != old_refs):
                self._add("converged", f"{topic} is legitimate again: SR({view['n']})", topic=topic)
            elif before["legitimate"] and not view["legitimate"]:
                first = view["problems"][0] if view["problems"] else "?"
                self._add("diverged", f"{topic} is no longer SR({view['n']}): {first}", topic=topic)

    def _add(self, kind: str, text: str, *, topic: str | None = None, ref: str | None = None) -> None:
        self._logged += 1
        self.log.append(
            {"seq": self._logged, "time": self.clock(), "kind": kind, "topic": topic, "ref": ref, "text": text}
        )
        log.info("web view: %s", text)

    async def run(self) -> None:
        """Poll every `interval` seconds (start to start) until cancelled; a failed poll is
        logged and the next one comes as usual."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.poll()
            except Exception:  # noqa: BLE001 - the view must outlive one bad poll
                log.exception("web view: poll failed")
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    # -- what is served ---------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        """The current view (the JSON of ``GET /api/rings``)."""
        return {
            "supervisor": self.ref,
            "time": self.clock(),
            "polls": self.polls,
            "interval": self.interval,
            "topics": self._topics,
            "nodes": self._nodes,
            "crashes_detected": self._crashes,
            "log": list(self.log),
        }

    def _publish(self) -> None:
        data = json.dumps(self.view())
        for queue in self._streams:
            if queue.full():
                queue.get_nowait()  # a slow reader skips to the newest view
            queue.put_nowait(data)

    @contextlib.contextmanager
    def stream(self) -> Iterator[asyncio.Queue[str | None]]:
        """A queue that receives every new view as JSON (None: the server is stopping)."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=1)
        self._streams.add(queue)
        try:
            yield queue
        finally:
            self._streams.discard(queue)

    def close_streams(self) -> None:
        """Tell every open stream to end (at a graceful stop)."""
        for queue in self._streams:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(None)


# --- the aiohttp application -----------------------------------------------------------------
def application(watch: RingWatch) -> web.Application:
    """The web view's routes; the watch polls while the application runs."""
    app = web.Application()

    async def page(request: web.Request) -> web.FileResponse:
        return web.FileResponse(PAGE, headers={"Cache-Control": "no-store"})

    async def rings(request: web.Request) -> web.Response:
        return web.json_response(watch.view(), headers={"Cache-Control": "no-store"})

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        with watch.stream() as queue:
            data: str | None = json.dumps(watch.view())
            try:
                while data is not None:
                    await response.write(f"event: view\ndata: {data}\n\n".encode())
                    data = await queue.get()
            except ConnectionError:
                pass  # the viewer went away (a closed tab): nothing to report
        return response

    async def polling(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(watch.run(), name="web view poll")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def closing(app: web.Application) -> None:
        watch.close_streams()

    app.router.add_get("/", page)
    app.router.add_get("/api/rings", rings)
    app.router.add_get("/api/stream", stream)
    app.cleanup_ctx.append(polling)
    app.on_shutdown.append(closing)
    return app
