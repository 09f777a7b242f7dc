"""Coordinator requests for keys of shards another broker holds (#19): NOT_COORDINATOR, as Kafka's
brokers answer; FindCoordinator names the shard's holder, or COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.cluster import Node, shard_of
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_groups import DescribeGroupsRequest
from rivven_kproto.codec.messages.end_txn import EndTxnRequest
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from rivven_kproto.codec.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.delayed import HEARTBEAT_FOLLOWED, HEARTBEAT_HOLD_MS, Pending
from rivven_kproto.server.handlers import (
    describe_groups,
    end_txn,
    find_coordinator,
    heartbeat,
    init_producer_id,
    offset_commit,
    txn_offset_commit,
)

from .round_trip import answer

NOW = 1_700_000_000_000
SHARDS = 4
LOCAL = next(f"k{i}" for i in range(100) if shard_of(f"k{i}", SHARDS) == 0)
REMOTE = next(f"k{i}" for i in range(100) if shard_of(f"k{i}", SHARDS) == 1)
UNHELD = next(f"k{i}" for i in range(100) if shard_of(f"k{i}", SHARDS) == 2)


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[RequestContext]:
    """Node 1 of two holding shard 0 of four; node 2 holds shard 1; shards 2 and 3 are free."""
    broker = Broker(BrokerConfig(data_dir=tmp_path, node_id=1, advertised_host="a", advertised_port=1), NOW)
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.shard_count = broker.storage.coordinator_shards = SHARDS  # type: ignore[misc]
    broker.cluster = dataclasses.replace(broker.cluster, nodes=(Node(1, "a", 1), Node(2, "b", 2)), shard_count=SHARDS,
                                         shard_owners={0: 1, 1: 2})
    yield RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")
    broker.close()


def test_find_coordinator_answers_each_keys_shard_holder(ctx: RequestContext) -> None:
    for key_type in (0, 1):
        response = answer(find_coordinator, ctx, FindCoordinatorRequest(key_type=key_type,
                                                                        coordinator_keys=[LOCAL, REMOTE]), 4)
        assert [(c.key, c.error_code, c.node_id, c.host) for c in response.coordinators] == [
            (LOCAL, 0, 1, "a"), (REMOTE, 0, 2, "b")]


def _held(ctx: RequestContext, keys: list[str]) -> Pending:
    held = find_coordinator.handle(ctx, FindCoordinatorRequest(key_type=0, coordinator_keys=keys), 4)
    assert isinstance(held, Pending)
    assert held.key == HEARTBEAT_FOLLOWED and held.deadline_ms == NOW + HEARTBEAT_HOLD_MS
    return held


def test_find_coordinator_holds_a_lookup_until_the_shard_has_a_holder(ctx: RequestContext) -> None:
    """librdkafka gives up after three quick COORDINATOR_NOT_AVAILABLE answers: the answer waits
    (a delayed response, woken by heartbeats) for the broker that takes the shard."""
    held = _held(ctx, [LOCAL, UNHELD])
    assert held.complete(NOW + 1000) is None  # nobody holds it yet
    ctx.broker.cluster = dataclasses.replace(ctx.broker.cluster, shard_owners={0: 1, 1: 2, 2: 2})
    response = held.complete(NOW + 2000)
    assert response is not None
    assert [(c.key, c.error_code, c.node_id, c.host) for c in response.coordinators] == [
        (LOCAL, 0, 1, "a"), (UNHELD, 0, 2, "b")]


def test_a_held_lookup_answers_coordinator_not_available_at_its_deadline(ctx: RequestContext) -> None:
    held = _held(ctx, [REMOTE, UNHELD])
    response = held.expire(NOW + HEARTBEAT_HOLD_MS)
    assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
        (REMOTE, 0, 2), (UNHELD, Errors.COORDINATOR_NOT_AVAILABLE, -1)]


def test_requests_for_another_brokers_shard_get_not_coordinator(ctx: RequestContext) -> None:
    assert answer(heartbeat, ctx, HeartbeatRequest(group_id=REMOTE, generation_id=1, member_id="m"), 4
                  ).error_code == Errors.NOT_COORDINATOR
    assert answer(heartbeat, ctx, HeartbeatRequest(group_id=LOCAL, generation_id=1, member_id="m"), 4
                  ).error_code == Errors.UNKNOWN_MEMBER_ID  # served here
    commit = OffsetCommitRequest(group_id=REMOTE, topics=[OffsetCommitRequestTopic(
        name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])
    response = answer(offset_commit, ctx, commit, 2)
    assert response.topics[0].partitions[0].error_code == Errors.NOT_COORDINATOR
    assert answer(init_producer_id, ctx, InitProducerIdRequest(transactional_id=UNHELD, transaction_timeout_ms=1000),
                  2).error_code == Errors.NOT_COORDINATOR
    assert answer(end_txn, ctx, EndTxnRequest(transactional_id=REMOTE, producer_id=1, producer_epoch=0,
                                              committed=True), 3).error_code == Errors.NOT_COORDINATOR
    described = answer(describe_groups, ctx, DescribeGroupsRequest(groups=[LOCAL, REMOTE]), 5)
    assert [(g.group_id, g.error_code) for g in described.groups] == [(LOCAL, 0), (REMOTE, Errors.NOT_COORDINATOR)]


@pytest.mark.parametrize("version", [3, 5])
def test_txn_offsets_of_a_transaction_coordinated_elsewhere(ctx: RequestContext, version: int) -> None:
    """Taken as pending only once the transaction's coordinator (``txn_offsets_added``, asked
    before the handler) verified that its ongoing transaction holds the group's shard (V1, v3) or
    added it (V2, v5); the transaction's marker then completes them. V1 used to take them
    unverified: retried after the transaction ended, they stayed pending for good (#36)."""
    request = TxnOffsetCommitRequest(transactional_id=REMOTE, group_id=LOCAL, producer_id=9, producer_epoch=0,
                                     topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[
                                         TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                                         committed_metadata="")])])

    def error() -> int:
        return int(answer(txn_offset_commit, ctx, request, version).topics[0].partitions[0].error_code)

    assert error() == Errors.COORDINATOR_NOT_AVAILABLE  # not asked (or not reached)
    ctx.txn_offsets_added = Errors.PRODUCER_FENCED
    assert error() == (Errors.INVALID_PRODUCER_EPOCH if version >= 5 else Errors.PRODUCER_FENCED)
    assert not ctx.broker.groups.offsets.has_pending(LOCAL)
    ctx.txn_offsets_added = Errors.NONE
    assert error() == Errors.NONE
    assert ctx.broker.groups.offsets.pending_producers(LOCAL) == {9}


def _txn_offset_commit(ctx: RequestContext, version: int) -> int:
    request = TxnOffsetCommitRequest(transactional_id=REMOTE, group_id=LOCAL, producer_id=9, producer_epoch=0,
                                     topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[
                                         TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                                         committed_metadata="")])])
    return int(answer(txn_offset_commit, ctx, request, version).topics[0].partitions[0].error_code)


@pytest.mark.parametrize(("verified", "version", "heard"), [
    (Errors.TRANSACTION_ABORTABLE, 3, Errors.INVALID_TXN_STATE),
    (Errors.TRANSACTION_ABORTABLE, 4, Errors.TRANSACTION_ABORTABLE),
    (Errors.PRODUCER_FENCED, 2, Errors.INVALID_PRODUCER_EPOCH),
    (Errors.INVALID_PRODUCER_ID_MAPPING, 3, Errors.INVALID_PRODUCER_ID_MAPPING),
    (Errors.NOT_COORDINATOR, 3, Errors.COORDINATOR_NOT_AVAILABLE),
    (Errors.CONCURRENT_TRANSACTIONS, 3, Errors.COORDINATOR_NOT_AVAILABLE),  # ending: verified again
])
def test_v1_txn_offsets_refused_as_the_remote_verification_says(ctx: RequestContext, verified: Errors, version: int,
                                                              heard: Errors) -> None:
    ctx.txn_offsets_added = verified
    assert _txn_offset_commit(ctx, version) == heard
    assert not ctx.broker.groups.offsets.has_pending(LOCAL)


def test_v1_txn_offsets_verified_before_the_transactions_marker_are_refused_after_it(ctx: RequestContext) -> None:
    """The verification's answer ("ongoing") is older than the abort's marker that landed meanwhile:
    logged, the offsets would stay pending for good; answered retriable, they are verified again."""
    groups = ctx.broker.groups
    ctx.txn_offsets_added, ctx.txn_offsets_guard = Errors.NONE, groups.txn_guards.start(9)
    groups.complete_transaction(9, [LOCAL], False)  # the transaction's abort marker
    assert _txn_offset_commit(ctx, 3) == Errors.COORDINATOR_NOT_AVAILABLE
    assert not groups.offsets.has_pending(LOCAL)
    ctx.txn_offsets_guard = groups.txn_guards.start(9)  # asked again, after the marker
    assert _txn_offset_commit(ctx, 3) == Errors.NONE
    assert groups.offsets.pending_producers(LOCAL) == {9}
