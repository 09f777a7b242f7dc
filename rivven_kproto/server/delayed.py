"""Delayed responses: a handler may return a :class:`Pending` and answer later.

JoinGroup waits for the join phase to complete, SyncGroup for the leader's assignment. The broker
core stays synchronous: the handler asks the coordinator, gets a ticket back, and returns a
``Pending`` naming a wake-up key, a deadline and two plain callables. The server parks the
request; its connection reads nothing more until the response is written (as Kafka mutes a
channel while a request is in flight), so responses keep request order even when a client
pipelines. ``complete(now_ms)`` is tried again whenever :meth:`DelayedResponses.notify` names the
key (the server does so for the groups a coordinator reports changed: those a request used, after
it, and all of them after each coordinator tick) and at the deadline, when ``expire(now_ms)`` answers instead. ``expire``
is also called, its answer discarded, when the wait is abandoned (connection closed, shutdown),
so the pending can release what it holds. Nothing in :class:`Pending` is trio-specific.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import trio

from rivven_kproto.broker.broker import Broker

APPENDED = "records-appended"  # the wake key of parked fetches: records or markers were appended


def wake_key(group_id: str) -> Hashable:
    """The wake key of a group's parked requests (JoinGroup, SyncGroup)."""
    return ("group", group_id)


def wake_keys(group_ids: Iterable[str]) -> list[Hashable]:
    return [wake_key(group_id) for group_id in group_ids]


def group_keys(keys: Iterable[Hashable]) -> list[Hashable]:
    """Of parked requests' wake-up keys, those of groups."""
    return [key for key in keys if isinstance(key, tuple) and key[:1] == ("group",)]


# The wake key of answers held until the next heartbeat was followed (a FindCoordinator waiting
# for a shard's holder, a Fetch past a partition's end waiting for the ownership check).
HEARTBEAT_FOLLOWED = "heartbeat-followed"
HEARTBEAT_HOLD_MS = 4_000  # how long such an answer waits: well under every client's request timeout (30-60 s)


@dataclass(frozen=True)
class Pending:
    key: Hashable
    deadline_ms: int
    complete: Callable[[int], Any | None]  # now_ms -> the response, or None if not ready yet
    expire: Callable[[int], Any]  # now_ms -> the response at the deadline; also the release hook


def after_claims_checked(broker: Broker, doubts: Iterable[tuple[str, int]], now_ms: int,
                         answer: Callable[[int], Any]) -> Pending:
    """An answer that must wait until a heartbeat started after now checked these partitions'
    claims in the store (a lost one is fenced meanwhile), or ``HEARTBEAT_HOLD_MS``: ``answer``
    gives it then, from what the broker holds at that time."""
    claims = broker.claims
    asked_at = claims.clock()
    broker.doubted.update(doubts)

    def complete(at_ms: int) -> Any | None:
        return answer(at_ms) if claims.confirmed_at > asked_at else None

    return Pending(HEARTBEAT_FOLLOWED, now_ms + HEARTBEAT_HOLD_MS, complete, answer)


class DelayedResponses:
    """Parks pending responses and wakes them by key; ``clock()`` is the broker's epoch-ms clock."""

    def __init__(self, clock: Callable[[], int], before_answer: Callable[[], object] | None = None) -> None:
        self._clock = clock
        # Called before each try of a parked request (the broker re-checks its claims: it may have
        # been paused while the request waited).
        self._before_answer = before_answer
        self._events: dict[Hashable, trio.Event] = {}
        self._closed = False
        self.parked = 0

    def notify(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            event = self._events.pop(key, None)
            if event is not None:
                event.set()

    def parked_keys(self) -> list[Hashable]:
        return list(self._events)

    def close(self) -> None:
        """Shutdown: every parked request answers now, through its ``expire``."""
        self._closed = True
        self.notify(list(self._events))

    async def wait(self, pending: Pending) -> Any:
        answered = False
        self.parked += 1
        try:
            while True:
                if self._before_answer is not None:
                    self._before_answer()
                now = self._clock()
                response = pending.complete(now)
                if response is None and (now >= pending.deadline_ms or self._closed):
                    response = pending.expire(now)
                if response is not None:
                    answered = True
                    return response
                event = self._events.get(pending.key)
                if event is None:
                    event = self._events[pending.key] = trio.Event()
                with trio.move_on_after((pending.deadline_ms - now) / 1000):
                    await event.wait()
        finally:
            self.parked -= 1
            if not answered:
                pending.expire(self._clock())
