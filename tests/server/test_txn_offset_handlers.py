"""TxnOffsetCommit and OffsetFetch's require_stable against a real Broker, through encode/decode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.groups import GroupConfig
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from rivven_kproto.codec.messages.end_txn import EndTxnRequest
from rivven_kproto.codec.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from rivven_kproto.codec.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import (
    HANDLERS,
    add_offsets_to_txn,
    end_txn,
    offset_fetch,
    txn_offset_commit,
)

from .test_group_handlers import answer, stable_member

NOW = 1_700_000_000_000
TID = "app"


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[RequestContext]:
    config = BrokerConfig(data_dir=tmp_path / "data", groups=GroupConfig(initial_rebalance_delay_ms=0))
    broker = Broker(config, NOW)
    broker.create_topic("t", 3, 1, {}, NOW)
    yield RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")
    broker.close()


def begin(ctx: RequestContext, group: str = "g") -> tuple[int, int]:
    error, pid, epoch = ctx.broker.txn.init_producer_id(TID, 60_000, -1, -1, NOW)
    assert error is Errors.NONE
    added = answer(add_offsets_to_txn, ctx, AddOffsetsToTxnRequest(
        transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id=group), 3)
    assert added.error_code == 0
    return pid, epoch


def txn_commit(ctx: RequestContext, pid: int, epoch: int, version: int, offsets: dict[tuple[str, int], int],
               group: str = "g", **kwargs: object) -> dict[tuple[str, int], int]:
    topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata="m"))
    request = TxnOffsetCommitRequest(
        transactional_id=TID, group_id=group, producer_id=pid, producer_epoch=epoch,
        topics=[TxnOffsetCommitRequestTopic(name=name, partitions=parts) for name, parts in topics.items()],
        **kwargs,
    )
    response = answer(txn_offset_commit, ctx, request, version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch(ctx: RequestContext, version: int, *, stable: bool) -> list[tuple[int, int, int]]:
    """(partition, offset, error) of t-0 and t-1 for group g."""
    if version >= 8:
        request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id="g", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])])], require_stable=stable)
        response = answer(offset_fetch, ctx, request, version)
        assert response.groups[0].error_code == 0
        partitions = response.groups[0].topics[0].partitions
    else:
        request = OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
                                     require_stable=stable)
        response = answer(offset_fetch, ctx, request, version)
        assert response.error_code == 0
        partitions = response.topics[0].partitions
    return [(p.partition_index, p.committed_offset, p.error_code) for p in partitions]


def test_advertised_versions() -> None:
    assert (HANDLERS[28].versions.low, HANDLERS[28].versions.high) == (0, 5)


@pytest.mark.parametrize("version", range(0, 4))
@pytest.mark.parametrize("commit", [True, False])
def test_commit_then_end(ctx: RequestContext, version: int, commit: bool) -> None:
    pid, epoch = begin(ctx)
    assert txn_commit(ctx, pid, epoch, version, {("t", 0): 10, ("x", 0): 1, ("t", 9): 1}) == {
        ("t", 0): 0, ("x", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION, ("t", 9): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    unstable = Errors.UNSTABLE_OFFSET_COMMIT
    for fetch_version in (7, 8, 9):
        assert fetch(ctx, fetch_version, stable=True) == [(0, -1, unstable), (1, -1, 0)]
        assert fetch(ctx, fetch_version, stable=False) == [(0, -1, 0), (1, -1, 0)]
    assert fetch(ctx, 6, stable=False) == [(0, -1, 0), (1, -1, 0)]  # no require_stable before v7
    ended = answer(end_txn, ctx, EndTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                               committed=commit), 3)
    assert ended.error_code == 0
    for fetch_version in (7, 8):
        assert fetch(ctx, fetch_version, stable=True) == [(0, 10 if commit else -1, 0), (1, -1, 0)]
    assert fetch(ctx, 6, stable=False) == [(0, 10 if commit else -1, 0), (1, -1, 0)]


@pytest.mark.parametrize(("version", "fenced"), [(0, Errors.INVALID_PRODUCER_EPOCH), (2, Errors.INVALID_PRODUCER_EPOCH),
                                                 (3, Errors.PRODUCER_FENCED)])
def test_transaction_verification(ctx: RequestContext, version: int, fenced: Errors) -> None:
    error, pid, epoch = ctx.broker.txn.init_producer_id(TID, 60_000, -1, -1, NOW)
    assert txn_commit(ctx, pid, epoch, version, {("t", 0): 1}) == {("t", 0): Errors.INVALID_TXN_STATE}
    pid, epoch = begin(ctx)
    assert txn_commit(ctx, pid, epoch, version, {("t", 0): 1}, group="other") == {("t", 0): Errors.INVALID_TXN_STATE}
    assert txn_commit(ctx, pid, epoch - 1 if epoch else epoch + 1, version, {("t", 0): 1}) == {("t", 0): fenced}
    assert txn_commit(ctx, pid + 7, epoch, version, {("t", 0): 1}) == {("t", 0): Errors.INVALID_PRODUCER_ID_MAPPING}
    assert txn_commit(ctx, pid, epoch, version, {("t", 0): 1}, group="") == {("t", 0): Errors.INVALID_GROUP_ID}
    assert not ctx.broker.groups.offsets.has_pending("g")


def test_kip_447_member_fencing_v3(ctx: RequestContext) -> None:
    member, generation = stable_member(ctx)
    pid, epoch = begin(ctx)
    ok = txn_commit(ctx, pid, epoch, 3, {("t", 0): 1}, generation_id=generation, member_id=member)
    assert ok == {("t", 0): 0}
    stale = txn_commit(ctx, pid, epoch, 3, {("t", 0): 2}, generation_id=generation - 1, member_id=member)
    assert stale == {("t", 0): Errors.ILLEGAL_GENERATION}
    unknown = txn_commit(ctx, pid, epoch, 3, {("t", 0): 2}, generation_id=generation, member_id="zombie")
    assert unknown == {("t", 0): Errors.UNKNOWN_MEMBER_ID}
    assert txn_commit(ctx, pid, epoch, 2, {("t", 0): 3}) == {("t", 0): 0}  # v2: no member to check
