"""A subscription that rides out lost connections and broker restarts (issue 46 item 5).

`ResumingSubscription` opens a session (`broker.durable`) at the first broker of its list that
answers and subscribes in it.  When the connection is lost it tries the brokers in turn, with
a backoff doubling from `backoff_min` to `backoff_max` seconds, for at most `retry_for`
seconds from the loss, and resumes the session after the last delivery it received: the
broker hands over, in order and none twice, what was delivered meanwhile, and a `DeliveryGap`
says how many it could not keep.  A broker that no longer knows the session (it expired, or
this is another broker, or one that restarted without ``--state-dir``) gets the subscription
again, and a gap of unknown size (-1, ``expired``) says so.

    async for event in ResumingSubscription(["127.0.0.1:7101"], 'symbol = "IBM"'):
        ...  # broker.cores.messages.Deliver or DeliveryGap

`on_change` (if given) is told, in one line each, of every connection lost, retry and resume.
Giving up raises `pubsub.client.connection.ClientError` (``connection``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from broker.client import DEFAULT_TIMEOUT, BrokerClient, Subscription
from broker.cores.language.filters import Filter
from broker.cores.messages import Deliver, DeliveryGap
from pubsub.client.connection import ClientError, ConnectionLost

SUB_ID = "s1"


class ResumingSubscription:
    """One filter, subscribed in a session that is resumed after every lost connection."""

    def __init__(
        self,
        brokers: Sequence[str],
        sub: Filter | str,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry_for: float = 30.0,
        backoff_min: float = 0.1,
        backoff_max: float = 2.0,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        if not brokers:
            raise ValueError("a resuming subscription needs at least one broker")
        self.brokers = list(brokers)
        self.sub = sub
        self.client_id = client_id
        self.timeout = timeout
        self.retry_for = retry_for
        self.backoff = (backoff_min, backoff_max)
        self.on_change = on_change or (lambda _line: None)
        self.token = ""
        self.last_seq = 0
        #: the broker of the current session and the answer to the subscription there
        self.broker = ""
        self.reply: dict[str, object] = {}
        self._client: BrokerClient | None = None
        self._subscription: Subscription | None = None

    async def _connect(self) -> Subscription:
        """A connection with the session opened or resumed, trying the brokers in turn."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_for
        delay = self.backoff[0]
        attempt = 0
        while True:
            broker = self.brokers[attempt % len(self.brokers)]
            attempt += 1
            client = BrokerClient(broker, client_id=self.client_id, timeout=self.timeout)
            try:
                await client.connect()
                adopted = client.adopt(self.sub, SUB_ID)  # before the request: the hand-over follows the answer
                body = await client.open_session(self.token, self.last_seq)
                if body.get("resumed"):
                    sub = adopted
                    self.on_change(f"resumed the session at {broker} after delivery {self.last_seq}")
                else:
                    resumed_before = bool(self.token)
                    self.token, self.last_seq = str(body["session"]), 0
                    sub = await client.subscribe(self.sub, SUB_ID)
                    self.on_change(f"subscribed {SUB_ID} ({sub.reply.get('uid')}) at broker {sub.reply.get('broker')}: "
                                   f"{sub.filter.to_text()}")
                    if resumed_before:
                        self.on_change(f"{broker} no longer knew the session: subscribed again")
                        sub.notice(DeliveryGap(client.client_id, -1, "expired", [SUB_ID]))
                self.broker, self.reply = broker, sub.reply
                self._client = client
                return sub
            except ClientError as exc:
                await client.close()
                if loop.time() + delay > deadline:
                    raise ClientError("connection", f"gave up after {self.retry_for:g} s: {exc}") from None
                self.on_change(f"{broker}: {exc}; trying again in {delay:.1f} s")
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff[1])

    async def events(self) -> AsyncIterator[Deliver | DeliveryGap]:
        """Deliveries and gap notices, across reconnects, until `close` or giving up."""
        sub = self._subscription = await self._connect()
        while True:
            try:
                event = await sub.next_event()
            except ConnectionLost as exc:
                self.on_change(f"{exc}; reconnecting")
                if self._client is not None:
                    await self._client.close()
                sub = self._subscription = await self._connect()
                continue
            except StopAsyncIteration:
                return
            if isinstance(event, Deliver):
                if event.seq and event.seq <= self.last_seq:
                    continue  # handed over twice: the broker resent what was on its way
                self.last_seq = max(self.last_seq, event.seq)
            yield event

    def __aiter__(self) -> AsyncIterator[Deliver | DeliveryGap]:
        return self.events()

    async def close(self) -> None:
        """Unsubscribe (if connected) and close the connection."""
        if self._subscription is not None:
            await self._subscription.close()
        if self._client is not None:
            await self._client.close()
