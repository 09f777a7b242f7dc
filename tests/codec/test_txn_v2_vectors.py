"""Byte vectors of the transactions V2 (KIP-890) request and response versions, written out by
hand from Kafka's 4.x schemas and checked three ways: our decoder reads the expected object, our
encoder writes the same bytes, and kio (generated from Kafka's schemas) reads them and writes
them back unchanged, with the field values we meant."""

from __future__ import annotations

import io
from typing import Any

import pytest

from rivven_kproto.codec.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from rivven_kproto.codec.messages.api_versions import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from rivven_kproto.codec.messages.end_txn import EndTxnRequest, EndTxnResponse
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from rivven_kproto.codec.schema import Message

from .test_messages_oracle import kio_class

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TX = "037478"  # compact string "tx"
PID7 = "0000000000000007"
FEATURE = "14" + b"transaction.version".hex()  # compact string, 19 bytes

VECTORS: list[tuple[Message, int, str, dict[str, Any]]] = [
    (
        EndTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=3, committed=True),
        5, TX + PID7 + "0003" + "01" + "00",
        {"producer_epoch": 3, "committed": True},
    ),
    (
        EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=7, producer_epoch=4),
        5, "00000000" + "0000" + PID7 + "0004" + "00",
        {"producer_id": 7, "producer_epoch": 4},
    ),
    (
        ProduceRequest(
            transactional_id="tx", acks=-1, timeout_ms=1000,
            topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=b"\x01\x02\x03")])],
        ),
        12, TX + "ffff" + "000003e8" + "02" + "0274" + "02" + "00000000" + "04010203" + "00" + "00" + "00",
        {"acks": -1, "transactional_id": "tx"},
    ),
    (
        TxnOffsetCommitRequest(
            transactional_id="tx", group_id="g", producer_id=7, producer_epoch=3, generation_id=-1, member_id="",
            group_instance_id=None,
            topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])],
        ),
        5, TX + "0267" + PID7 + "0003" + "ffffffff" + "01" + "00" + "02" + "0274" + "02" + "00000000"
        + "0000000000000005" + "ffffffff" + "01" + "00" + "00" + "00",
        {"group_id": "g", "producer_epoch": 3},
    ),
    (
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=3, group_id="g"),
        4, TX + PID7 + "0003" + "0267" + "00",
        {"group_id": "g"},
    ),
    (
        AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=7, producer_epoch=3, verify_only=True,
            topics=[AddPartitionsToTxnTopic(name="t", partitions=[0])])]),
        5, "02" + TX + PID7 + "0003" + "01" + "02" + "0274" + "0200000000" + "00" + "00" + "00",
        {},
    ),
    (
        AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=[AddPartitionsToTxnResult(
            transactional_id="tx", topic_results=[AddPartitionsToTxnTopicResult(name="t", results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=120)])])]),
        5, "00000000" + "0000" + "02" + TX + "02" + "0274" + "02" + "00000000" + "0078" + "00" + "00" + "00" + "00",
        {},
    ),
    (
        InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1),
        6, TX + "0000ea60" + "ffffffffffffffff" + "ffff" + "00" + "00" + "00",
        {"enable2_pc": False, "keep_prepared_txn": False},
    ),
    (
        InitProducerIdResponse(throttle_time_ms=0, error_code=120, producer_id=-1, producer_epoch=-1),
        5, "00000000" + "0078" + "ffffffffffffffff" + "ffff" + "00",
        {"error_code": 120},
    ),
    (
        ApiVersionsResponse(
            error_code=0, api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)], throttle_time_ms=0,
            supported_features=[SupportedFeatureKey(name="transaction.version", min_version=0, max_version=2)],
            finalized_features_epoch=0,
            finalized_features=[FinalizedFeatureKey(name="transaction.version", max_version_level=2, min_version_level=2)],
        ),
        3, "0000" + "02" + "0012" + "0000" + "0004" + "00" + "00000000"
        + "03"  # three tagged fields, by tag: supported features, epoch, finalized features
        + "00" + "1a" + "02" + FEATURE + "0000" + "0002" + "00"
        + "01" + "08" + "0000000000000000"
        + "02" + "1a" + "02" + FEATURE + "0002" + "0002" + "00",
        {},
    ),
]


@pytest.mark.parametrize(("message", "version", "hex_bytes", "kio_fields"), VECTORS,
                         ids=[f"{type(m).__name__}-v{v}" for m, v, _, _ in VECTORS])
def test_vector(message: Message, version: int, hex_bytes: str, kio_fields: dict[str, Any]) -> None:
    from kio.serial import entity_reader, entity_writer

    data = bytes.fromhex(hex_bytes)
    assert message.encode(version) == data
    assert type(message).decode(data, version) == message
    kcls = kio_class(type(message), version)
    assert kcls is not None
    theirs, size = entity_reader(kcls)(data, 0)
    assert size == len(data)
    for name, value in kio_fields.items():
        assert getattr(theirs, name) == value
    out = io.BytesIO()
    entity_writer(kcls)(out, theirs)
    assert out.getvalue() == data


def test_kio_reads_the_bumped_epoch_and_the_feature_levels() -> None:
    from kio.serial import entity_reader

    _, version, hex_bytes, _ = VECTORS[1]
    end_txn, _ = entity_reader(kio_class(EndTxnResponse, version))(bytes.fromhex(hex_bytes), 0)
    assert (end_txn.producer_id, end_txn.producer_epoch) == (7, 4)
    _, version, hex_bytes, _ = VECTORS[-1]
    api_versions, _ = entity_reader(kio_class(ApiVersionsResponse, version))(bytes.fromhex(hex_bytes), 0)
    (finalized,) = api_versions.finalized_features
    assert (finalized.name, finalized.max_version_level, finalized.min_version_level) == ("transaction.version", 2, 2)
    (supported,) = api_versions.supported_features
    assert (supported.name, supported.min_version, supported.max_version) == ("transaction.version", 0, 2)
