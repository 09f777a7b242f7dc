"""Transactions V2 (KIP-890 part 2) at the handlers, against a real Broker through encode/decode:
which request versions get V2 semantics on which ``transaction.version``, the implicit adds of
Produce v12 and TxnOffsetCommit v5, EndTxn v5's bumped epoch, the stale-epoch rejection, and
TRANSACTION_ABORTABLE only for the versions that know it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig, ConfigError, load_config
from rivven_kproto.broker.groups import GroupConfig
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.end_txn import EndTxnRequest
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import (
    HANDLERS,
    add_partitions_to_txn,
    api_versions,
    end_txn,
    produce,
)

from .test_group_handlers import answer
from .test_txn_offset_handlers import txn_commit

NOW = 1_700_000_000_000
TID = "app"


def make_ctx(tmp_path: Path, level: int) -> RequestContext:
    config = BrokerConfig(
        data_dir=tmp_path / f"data-{level}", groups=GroupConfig(initial_rebalance_delay_ms=0), transaction_version=level
    )
    broker = Broker(config, NOW)
    broker.create_topic("t", 2, 1, {}, NOW)
    return RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")


@pytest.fixture(params=[2], ids=["tv2"])
def ctx(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RequestContext]:
    context = make_ctx(tmp_path, request.param)
    yield context
    context.broker.close()


@pytest.fixture
def ctx_v1(tmp_path: Path) -> Iterator[RequestContext]:
    context = make_ctx(tmp_path, 1)
    yield context
    context.broker.close()


def init(ctx: RequestContext) -> tuple[int, int]:
    error, pid, epoch = ctx.broker.txn.init_producer_id(TID, 60_000, -1, -1, NOW)
    assert error is Errors.NONE
    return pid, epoch


def produce_txn(ctx: RequestContext, pid: int, epoch: int, seq: int, version: int, partition: int = 0) -> int:
    batch = build_batch([Record(0, 0, None, b"v", [])], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    request = ProduceRequest(transactional_id=TID, acks=-1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=partition, records=batch)])])
    response = answer(produce, ctx, request, version)
    return int(response.responses[0].partition_responses[0].error_code)


def end(ctx: RequestContext, pid: int, epoch: int, version: int, commit: bool = True) -> tuple[int, int, int]:
    response = answer(end_txn, ctx, EndTxnRequest(
        transactional_id=TID, producer_id=pid, producer_epoch=epoch, committed=commit), version)
    return response.error_code, response.producer_id, response.producer_epoch


@pytest.mark.parametrize("level", [0, 1, 2])
def test_api_versions_advertises_the_feature(tmp_path: Path, level: int) -> None:
    ctx = make_ctx(tmp_path, level)
    try:
        response = answer(api_versions, ctx, ApiVersionsRequest(), 3)
        supported = [(f.name, f.min_version, f.max_version) for f in response.supported_features
                     if f.name == "transaction.version"]
        finalized = [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features
                     if f.name == "transaction.version"]
        assert supported == [("transaction.version", 0, 2)]
        assert finalized == ([("transaction.version", level, level)] if level else [])
        assert answer(api_versions, ctx, ApiVersionsRequest(), 2).finalized_features == []  # no features before v3
        advertised = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
        assert {k: advertised[k] for k in (0, 22, 24, 25, 26, 28)} == {
            0: (0, 12), 22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 5), 28: (0, 5)
        }
    finally:
        ctx.broker.close()


def test_config_key(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    assert load_config().transaction_version == 2
    props.write_text("transaction.version=1\n")
    assert load_config(props).transaction_version == 1
    props.write_text("transaction.version=3\n")
    with pytest.raises(ConfigError):
        load_config(props)
    assert HANDLERS[22].versions.high == 5  # InitProducerId v6 (KIP-939, unstable in Kafka) not advertised


def test_produce_v12_adds_the_partition_and_end_v5_bumps(ctx: RequestContext) -> None:
    pid, epoch = init(ctx)
    assert produce_txn(ctx, pid, epoch, 0, 12) == Errors.NONE
    txn = ctx.broker.txn.txns[TID]
    assert txn.state is TxnState.ONGOING and txn.partitions == frozenset({("t", 0)}) and txn.client_txn_version == 2
    assert end(ctx, pid, epoch, 5) == (Errors.NONE, pid, epoch + 1)
    # The delayed batch of the ended transaction, once the next one began: fenced.
    assert produce_txn(ctx, pid, epoch + 1, 0, 12, partition=1) == Errors.NONE
    assert produce_txn(ctx, pid, epoch, 1, 12) == Errors.INVALID_PRODUCER_EPOCH
    assert produce_txn(ctx, pid, epoch, 1, 11) == Errors.INVALID_PRODUCER_EPOCH  # V1 verification too
    assert ctx.broker.txn.txns[TID].partitions == frozenset({("t", 1)})
    assert end(ctx, pid, epoch + 1, 5) == (Errors.NONE, pid, epoch + 2)


@pytest.mark.parametrize(("version", "error"), [(11, Errors.TRANSACTION_ABORTABLE), (10, Errors.INVALID_TXN_STATE)])
def test_v1_produce_of_an_unadded_partition(ctx: RequestContext, version: int, error: Errors) -> None:
    pid, epoch = init(ctx)
    assert produce_txn(ctx, pid, epoch, 0, version) == error
    assert ctx.broker.txn.txns[TID].state is TxnState.EMPTY


def test_end_txn_v4_keeps_v1_semantics_on_a_v2_broker(ctx: RequestContext) -> None:
    pid, epoch = init(ctx)
    assert produce_txn(ctx, pid, epoch, 0, 12) == Errors.NONE
    assert end(ctx, pid, epoch, 4) == (Errors.NONE, -1, -1)  # v4 has no producer id / epoch fields
    assert ctx.broker.txn.txns[TID].producer_epoch == epoch


def test_a_transaction_version_1_broker_gives_v2_versions_v1_semantics(ctx_v1: RequestContext) -> None:
    pid, epoch = init(ctx_v1)
    assert produce_txn(ctx_v1, pid, epoch, 0, 12) == Errors.TRANSACTION_ABORTABLE  # no implicit add
    ctx_v1.broker.txn.add_partitions(TID, pid, epoch, [("t", 0)], NOW)
    assert produce_txn(ctx_v1, pid, epoch, 0, 12) == Errors.NONE
    assert end(ctx_v1, pid, epoch, 5) == (Errors.NONE, pid, epoch)  # no bump
    assert ctx_v1.broker.txn.txns[TID].client_txn_version == 0


def test_txn_offset_commit_v5_adds_the_group(ctx: RequestContext) -> None:
    pid, epoch = init(ctx)
    assert txn_commit(ctx, pid, epoch, 3, {("t", 0): 5}) == {("t", 0): Errors.INVALID_TXN_STATE}
    assert txn_commit(ctx, pid, epoch, 4, {("t", 0): 5}) == {("t", 0): Errors.TRANSACTION_ABORTABLE}
    assert txn_commit(ctx, pid, epoch, 5, {("t", 0): 5}) == {("t", 0): Errors.NONE}
    assert ctx.broker.txn.txns[TID].groups == frozenset({"g"})
    assert end(ctx, pid, epoch, 5) == (Errors.NONE, pid, epoch + 1)
    assert txn_commit(ctx, pid, epoch, 5, {("t", 0): 6}) == {("t", 0): Errors.INVALID_PRODUCER_EPOCH}


def test_add_partitions_to_txn_broker_form(ctx: RequestContext) -> None:
    pid, epoch = init(ctx)

    def call(version: int, verify_only: bool, partitions: list[int], producer_epoch: int = epoch) -> list[int]:
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
            transactional_id=TID, producer_id=pid, producer_epoch=producer_epoch, verify_only=verify_only,
            topics=[AddPartitionsToTxnTopic(name="t", partitions=partitions)])])
        response = answer(add_partitions_to_txn, ctx, request, version)
        assert response.error_code == 0
        (result,) = response.results_by_transaction
        return [p.partition_error_code for t in result.topic_results for p in t.results_by_partition]

    assert call(5, False, [0]) == [Errors.NONE]
    assert ctx.broker.txn.txns[TID].client_txn_version == 2
    assert call(5, True, [0, 1]) == [Errors.NONE, Errors.TRANSACTION_ABORTABLE]
    assert call(4, True, [0, 1]) == [Errors.NONE, Errors.INVALID_TXN_STATE]
    assert call(5, True, [0], epoch - 1) == [Errors.PRODUCER_FENCED]
