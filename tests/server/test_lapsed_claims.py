"""A broker whose claims may have lapsed (broker/claims.py) answers for no partition and no shard:
Fetch past its end is NOT_LEADER_OR_FOLLOWER (never OFFSET_OUT_OF_RANGE, which makes consumers
reset), coordinator requests NOT_COORDINATOR, FindCoordinator COORDINATOR_NOT_AVAILABLE; a
confirmation restores all. The broker here is a native one whose lease is replaced by a cluster's,
on an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.claims import ClaimsLease
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.delayed import HEARTBEAT_FOLLOWED, Pending
from rivven_kproto.server.handlers import fetch, find_coordinator, heartbeat

NOW = 1_700_000_000_000


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data", node_id=1), NOW)
    broker.create_topic("t", 1, 1, {}, NOW)
    yield broker
    broker.close()


def fetch_past_end(ctx: RequestContext) -> int:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchTopic(topic="t", partitions=[
                               FetchPartition(partition=0, fetch_offset=250, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[])
    response = fetch.handle(ctx, request, 11)
    if isinstance(response, Pending):  # past the end on a cluster: held for the claim check, then answered
        assert response.key == HEARTBEAT_FOLLOWED and ("t", 0) in ctx.broker.doubted
        assert response.complete(NOW) is None  # no heartbeat has checked the claim yet
        response = response.expire(NOW)
    assert isinstance(response, FetchResponse)
    return response.responses[0].partitions[0].error_code


def coordinator_errors(ctx: RequestContext) -> tuple[int, int]:
    found = find_coordinator.handle(ctx, FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 4)
    if isinstance(found, Pending):  # held until the claims are confirmed; at its deadline:
        assert found.complete(NOW) is None
        found = found.expire(NOW)
    beat = heartbeat.handle(ctx, HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), 3)
    return found.coordinators[0].error_code, beat.error_code


def test_nothing_is_answered_for_while_the_claims_may_have_lapsed(broker: Broker) -> None:
    clock = Clock()
    broker.claims = ClaimsLease(9.0, 1.0, clock)
    ctx = RequestContext(broker, broker.config, NOW, "test")
    assert broker.claims.refresh()
    assert fetch_past_end(ctx) == Errors.OFFSET_OUT_OF_RANGE  # the leader's answer: the offset is past its end
    assert coordinator_errors(ctx) == (Errors.NONE, Errors.UNKNOWN_MEMBER_ID)

    clock.now += 7.5  # no heartbeat confirmed for longer than the bound (7 s)
    assert not broker.claims.refresh()
    assert fetch_past_end(ctx) == Errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as raised:
        broker.partition("t", 0)
    assert raised.value.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert coordinator_errors(ctx) == (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR)
    assert not broker.coordinates("g") and broker.group_coordinator("g") is None and broker.txn_coordinator("g") is None

    broker.claims.confirm(clock.now - 0.2)  # a heartbeat that started after the gap, followed in full
    assert broker.claims.refresh()
    assert fetch_past_end(ctx) == Errors.OFFSET_OUT_OF_RANGE
    assert coordinator_errors(ctx) == (Errors.NONE, Errors.UNKNOWN_MEMBER_ID)


def test_a_native_broker_is_never_suspended(broker: Broker) -> None:
    assert broker.claims.bound_s is None
    broker.claims.confirmed_at -= 3600
    assert broker.claims.refresh() and broker.partition("t", 0) is not None and broker.coordinates("g")
