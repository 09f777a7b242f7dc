"""A driver for GroupCoordinator unit tests: injected clock and member ids, parked results collected."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from rivven_kproto.broker.groups import (
    Awaiting,
    GroupConfig,
    GroupCoordinator,
    JoinParams,
    JoinResult,
    SyncParams,
)
from rivven_kproto.broker.groups.api import SyncResult
from rivven_kproto.broker.groups.consumer_protocol import Subscription, encode_subscription
from rivven_kproto.codec.errors import Errors

NOW = 1_700_000_000_000
SESSION = 10_000
REBALANCE = 30_000


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics), version=1))


RANGE = (("range", subscription("t")),)


class Harness:
    def __init__(self, directory: Path | None = None, **config: Any) -> None:
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(**config)
        self.now = NOW
        self.directory = directory
        self._ids = itertools.count(1)
        self.c = self.open()

    def open(self, **kwargs: Any) -> GroupCoordinator:
        coordinator = GroupCoordinator(self.directory, self.config, new_id=lambda: f"u{next(self._ids)}", **kwargs)
        coordinator.load(self.now)
        return coordinator

    def reopen(self, **kwargs: Any) -> GroupCoordinator:
        """A restart (the old coordinator is dropped without closing, as after kill -9)."""
        self.c = self.open(**kwargs)
        return self.c

    def advance(self, ms: int = 0) -> None:
        self.now += ms
        self.c.tick(self.now)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        client: str = "c",
        session: int = SESSION,
        rebalance: int = REBALANCE,
        protocol_type: str = "consumer",
        protocols: tuple[tuple[str, bytes], ...] = RANGE,
        v4: bool = True,
    ) -> JoinResult | Awaiting:
        params = JoinParams(group, member_id, instance, client, "/127.0.0.1", session, rebalance, protocol_type,
                            protocols, require_known_member_id=v4)
        return self.c.join(params, self.now)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult | Awaiting:
        params = SyncParams(group, generation, member_id, instance, protocol_type, protocol_name,
                            tuple((assignments or {}).items()))
        return self.c.sync(params, self.now)

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None) -> Errors:
        return self.c.heartbeat(group, generation, member_id, instance, self.now)

    def take(self, outcome: Any) -> Any:
        """The result of a parked request (None while it is still parked)."""
        assert isinstance(outcome, Awaiting), outcome
        return self.c.take_result(outcome.ticket)

    def new_member(self, **kwargs: Any) -> tuple[str, JoinResult | Awaiting]:
        """MEMBER_ID_REQUIRED round trip, then the real join."""
        first = self.join(**kwargs)
        assert isinstance(first, JoinResult) and first.error is Errors.MEMBER_ID_REQUIRED, first
        return first.member_id, self.join(first.member_id, **kwargs)

    def stable(self, count: int, group: str = "g", **kwargs: Any) -> tuple[list[str], int]:
        """A Stable group of ``count`` dynamic members; member i is assigned b"a<i>"."""
        ids, parked = [], []
        for _ in range(count):
            member_id, outcome = self.new_member(group=group, **kwargs)
            ids.append(member_id)
            parked.append(outcome)
        self.advance()
        results = [self.take(p) if isinstance(p, Awaiting) else p for p in parked]
        generation = results[0].generation_id
        assert all(r.error is Errors.NONE and r.generation_id == generation for r in results), results
        leader = results[0].leader_id
        assignment = {member_id: f"a{i}".encode() for i, member_id in enumerate(ids)}
        followers = [(m, self.sync(m, generation, group=group)) for m in ids if m != leader]
        assert self.sync(leader, generation, assignment, group=group) == SyncResult(
            Errors.NONE, "consumer", "range", assignment[leader]
        )
        for member_id, outcome in followers:
            assert self.take(outcome) == SyncResult(Errors.NONE, "consumer", "range", assignment[member_id])
        return ids, generation
