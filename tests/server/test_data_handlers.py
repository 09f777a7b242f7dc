"""Metadata, Fetch, ListOffsets, DeleteRecords and DescribeCluster handlers against a real Broker.

Requests go through encode/decode at the tested version (so fields a version lacks take their wire
defaults) and responses are encoded and decoded again, so every assertion is about what a client
would read off the wire.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from rivven_kproto.codec.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from rivven_kproto.codec.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.delayed import Pending
from rivven_kproto.server.handlers import delete_records, describe_cluster, fetch, list_offsets, metadata

from ..broker.log_helpers import make_batch
from .round_trip import answer, wire

NOW = 1_700_000_000_000
NODE = 7
HOST, PORT = "broker.example", 19092
NOT_REQUESTED = -2147483648


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(
        data_dir=tmp_path / "data", node_id=NODE, advertised_host=HOST, advertised_port=PORT, num_partitions=3
    )


@pytest.fixture
def broker(config: BrokerConfig) -> Iterator[Broker]:
    broker = Broker(config, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker, config: BrokerConfig) -> RequestContext:
    return RequestContext(broker, config, NOW, "test-client")


def batch(count: int = 1, ts: int = NOW, value: bytes = b"value") -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=value) for i in range(count)]
    return build_batch(records, base_timestamp=ts)


# -- Metadata -------------------------------------------------------------------------------------


def metadata_request(*names: str | None, **kwargs: Any) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=name) for name in names], **kwargs)


def test_metadata_all_topics(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("b", 2, 1, {}, NOW)
    broker.create_topic("a", 1, 1, {}, NOW)
    for version, request in ((0, MetadataRequest(topics=[])), (1, MetadataRequest(topics=None)),
                             (12, MetadataRequest(topics=None))):
        response: MetadataResponse = answer(metadata, ctx, request, version)
        assert [t.name for t in response.topics] == ["a", "b"]
        assert [len(t.partitions) for t in response.topics] == [1, 2]
        assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [(NODE, HOST, PORT, None)]
    # v1+: an empty list asks for no topics at all.
    assert answer(metadata, ctx, MetadataRequest(topics=[]), 1).topics == []


def test_metadata_partition_layout(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 2, 1, {}, NOW)
    response: MetadataResponse = answer(metadata, ctx, metadata_request("t"), 12)
    assert response.cluster_id == broker.cluster_id
    assert response.controller_id == NODE
    (topic,) = response.topics
    assert (topic.error_code, topic.name, topic.is_internal) == (0, "t", False)
    assert topic.topic_id == broker.topic("t").meta.topic_id != uuid.UUID(int=0)
    assert topic.topic_authorized_operations == NOT_REQUESTED
    for index, partition in enumerate(topic.partitions):
        assert partition.partition_index == index
        assert (partition.error_code, partition.leader_id, partition.leader_epoch) == (0, NODE, 0)
        assert (partition.replica_nodes, partition.isr_nodes, partition.offline_replicas) == ([NODE], [NODE], [])


@pytest.mark.parametrize("version", range(13))
def test_metadata_every_version_encodes(ctx: RequestContext, broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    response: MetadataResponse = answer(metadata, ctx, metadata_request("t"), version)
    assert response.topics[0].partitions[0].leader_id == NODE


def test_metadata_auto_creates_with_default_partitions(ctx: RequestContext, broker: Broker) -> None:
    response: MetadataResponse = answer(metadata, ctx, metadata_request("new-topic"), 9)
    (topic,) = response.topics
    assert (topic.error_code, topic.name, len(topic.partitions)) == (Errors.NONE, "new-topic", 3)
    assert len(broker.topic("new-topic").partitions) == 3


def test_metadata_client_may_refuse_auto_creation(ctx: RequestContext, broker: Broker) -> None:
    request = metadata_request("nope", allow_auto_topic_creation=False)
    (topic,) = answer(metadata, ctx, request, 4).topics
    assert (topic.error_code, topic.name, topic.partitions) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, "nope", [])
    assert "nope" not in broker.topics
    # Before v4 the flag does not exist on the wire and means "allowed".
    (topic,) = answer(metadata, ctx, metadata_request("nope"), 3).topics
    assert topic.error_code == Errors.NONE and "nope" in broker.topics


def test_metadata_broker_may_refuse_auto_creation(ctx: RequestContext, broker: Broker) -> None:
    ctx.config = dataclasses.replace(ctx.config, auto_create_topics=False)
    (topic,) = answer(metadata, ctx, metadata_request("nope"), 1).topics
    assert topic.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert "nope" not in broker.topics


@pytest.mark.parametrize("auto_create", [True, False])
def test_metadata_invalid_topic_name(ctx: RequestContext, broker: Broker, auto_create: bool) -> None:
    ctx.config = dataclasses.replace(ctx.config, auto_create_topics=auto_create)
    (topic,) = answer(metadata, ctx, metadata_request("bad name!"), 5).topics
    assert topic.error_code == Errors.INVALID_TOPIC_EXCEPTION
    assert broker.topics == {}


def test_metadata_never_auto_creates_internal_topics(ctx: RequestContext, broker: Broker) -> None:
    (topic,) = answer(metadata, ctx, metadata_request("__consumer_offsets"), 9).topics
    assert topic.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.topics == {}


def test_metadata_duplicate_topics_answered_once(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    response: MetadataResponse = answer(metadata, ctx, metadata_request("t", "u", "t"), 9)
    assert [t.name for t in response.topics] == ["t", "u"]


def test_metadata_authorized_operations(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    request = metadata_request(
        "t", include_cluster_authorized_operations=True, include_topic_authorized_operations=True
    )
    response: MetadataResponse = answer(metadata, ctx, request, 8)
    # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
    assert response.topics[0].topic_authorized_operations == sum(1 << c for c in (3, 4, 5, 6, 7, 8, 10, 11))
    # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
    assert response.cluster_authorized_operations == sum(1 << c for c in (5, 7, 8, 9, 10, 11, 12))
    request.include_cluster_authorized_operations = False
    response = answer(metadata, ctx, request, 11)  # no cluster field in v11
    assert response.topics[0].topic_authorized_operations != NOT_REQUESTED


def test_metadata_topic_id_lookup(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 2, 1, {}, NOW)
    known, unknown = broker.topic("t").meta.topic_id, uuid.uuid4()
    request = MetadataRequest(
        topics=[MetadataRequestTopic(topic_id=id_, name=None) for id_ in (unknown, known, known)]
    )
    missing, found = answer(metadata, ctx, request, 12).topics  # a repeated id is answered once
    assert (missing.error_code, missing.name, missing.topic_id) == (Errors.UNKNOWN_TOPIC_ID, None, unknown)
    assert (found.error_code, found.name, found.topic_id, len(found.partitions)) == (0, "t", known, 2)


# -- Fetch ----------------------------------------------------------------------------------------


def fetch_request(
    topic: str = "t", *parts: tuple[int, int], max_bytes: int = 0x7FFFFFFF, part_max: int = 1 << 20, **kw: Any
) -> FetchRequest:
    wanted = [
        FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=part_max)
        for index, offset in parts or [(0, 0)]
    ]
    topics = [FetchTopic(topic=topic, partitions=wanted)]
    return FetchRequest(max_wait_ms=500, max_bytes=max_bytes, topics=topics, **{"min_bytes": 1, **kw})


def run_fetch(ctx: RequestContext, request: FetchRequest, version: int = 12) -> tuple[FetchResponse, int, bool]:
    response, size, has_error = fetch.fetch(ctx, wire(request, version), version)
    return FetchResponse.decode(response.encode(version), version), size, has_error


def only_partition(response: FetchResponse) -> PartitionData:
    ((partition,),) = [topic.partitions for topic in response.responses]
    return partition


def test_fetch_returns_the_batches(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    log = broker.partition("t", 0)
    log.append(batch(2), NOW)
    log.append(batch(3), NOW)
    response, size, has_error = run_fetch(ctx, fetch_request())
    data = only_partition(response)
    assert (response.error_code, response.session_id, has_error) == (0, 0, False)
    assert (data.error_code, data.high_watermark, data.last_stable_offset, data.log_start_offset) == (0, 5, 5, 0)
    assert data.records == log.read(0, 1 << 20).data and size == len(data.records) > 0
    assert data.aborted_transactions is None  # read_uncommitted: null, as Kafka sends
    assert data.preferred_read_replica == -1


def test_fetch_at_log_end_is_empty_not_null(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.partition("t", 0).append(batch(4), NOW)
    for version in range(4, 13):
        response, size, has_error = run_fetch(ctx, fetch_request("t", (0, 4)), version)
        data = only_partition(response)
        assert (data.records, size, has_error, data.high_watermark) == (b"", 0, False, 4)


def test_fetch_read_committed(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.partition("t", 0).append(batch(2), NOW)
    response, size, _ = run_fetch(ctx, fetch_request(isolation_level=1))
    data = only_partition(response)
    assert data.aborted_transactions == [] and data.last_stable_offset == 2 and size > 0


@pytest.mark.parametrize(("topic", "partition"), [("missing", 0), ("t", 1), ("t", -1)])
def test_fetch_unknown_partition(ctx: RequestContext, broker: Broker, topic: str, partition: int) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    response, size, has_error = run_fetch(ctx, fetch_request(topic, (partition, 0)))
    data = only_partition(response)
    assert (data.error_code, data.records, size, has_error) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, b"", 0, True)
    assert data.high_watermark == -1


@pytest.mark.parametrize("offset", [-1, 4, 100])
def test_fetch_offset_out_of_range(ctx: RequestContext, broker: Broker, offset: int) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    log = broker.partition("t", 0)
    log.append(batch(3), NOW)
    log.append(batch(3), NOW)
    log.delete_records(5)  # offsets below 5 are gone, so 4 is out of range too
    response, _, has_error = run_fetch(ctx, fetch_request("t", (0, offset)))
    data = only_partition(response)
    assert (data.error_code, data.records, has_error) == (Errors.OFFSET_OUT_OF_RANGE, b"", True)
    assert (data.high_watermark, data.log_start_offset) == (6, 5)


def test_fetch_first_batch_whole_then_response_limit(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 2, 1, {}, NOW)
    big = batch(1, value=b"x" * 1000)
    for index in (0, 1):
        broker.partition("t", index).append(big, NOW)
        broker.partition("t", index).append(big, NOW)
    # Both limits far below one batch: the first partition still returns its first batch whole.
    response, size, _ = run_fetch(ctx, fetch_request("t", (0, 0), (1, 0), max_bytes=10, part_max=10))
    first, second = response.responses[0].partitions
    assert first.records == broker.partition("t", 0).read(0, 1).data and size == len(first.records)
    assert (second.error_code, second.records, second.high_watermark) == (0, b"", 2)
    # Room for exactly one batch overall: the second partition gets nothing.
    response, size, _ = run_fetch(ctx, fetch_request("t", (0, 0), (1, 0), max_bytes=len(big) + 10))
    first, second = response.responses[0].partitions
    assert len(first.records or b"") == len(big) and second.records == b""
    # Plenty of room: per-partition limit caps each partition, both get a batch.
    response, size, _ = run_fetch(ctx, fetch_request("t", (0, 0), (1, 0), part_max=len(big) + 10))
    assert [len(p.records or b"") for p in response.responses[0].partitions] == [len(big), len(big)]
    assert size == 2 * len(big)


def test_fetch_incremental_session_not_found(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    response, size, has_error = run_fetch(ctx, fetch_request(session_id=123, session_epoch=1))
    assert (response.error_code, response.session_id, response.responses) == (
        Errors.FETCH_SESSION_ID_NOT_FOUND, 0, []
    )
    assert (size, has_error) == (0, True)
    for session_id, epoch in ((0, 0), (0, -1), (123, -1)):
        response, _, has_error = run_fetch(ctx, fetch_request(session_id=session_id, session_epoch=epoch))
        assert (response.error_code, response.session_id, has_error) == (0, 0, False)
        assert only_partition(response).error_code == Errors.NONE


def test_fetch_leader_epoch_checks(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    for epoch, error in ((-1, Errors.NONE), (0, Errors.NONE), (1, Errors.UNKNOWN_LEADER_EPOCH)):
        request = fetch_request()
        request.topics[0].partitions[0].current_leader_epoch = epoch
        assert only_partition(run_fetch(ctx, request, 9)[0]).error_code == error


def test_fetch_handle_returns_the_response(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    response = fetch.handle(ctx, fetch_request(min_bytes=0), 12)
    assert isinstance(response, FetchResponse) and response.responses[0].partitions[0].records == b""


def test_fetch_without_min_bytes_waits_as_a_pending_woken_by_appends(ctx: RequestContext, broker: Broker) -> None:
    """The long-poll is a delayed response like JoinGroup's: parked under the append key."""
    broker.create_topic("t", 1, 1, {}, NOW)
    pending = fetch.handle(ctx, fetch_request(), 12)
    assert isinstance(pending, Pending)
    assert (pending.key, pending.deadline_ms) == (fetch.APPENDED, NOW + 500)
    assert pending.complete(NOW + 10) is None  # nothing to read yet
    expired = pending.expire(NOW + 500)
    assert isinstance(expired, FetchResponse) and expired.responses[0].partitions[0].records == b""
    broker.partition("t", 0).append(make_batch(2), NOW)
    woken = pending.complete(NOW + 20)
    assert isinstance(woken, FetchResponse) and woken.responses[0].partitions[0].records


async def test_fetch_reads_sealed_segments_on_a_worker_thread(
        ctx: RequestContext, broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer catching up reads old segments off the loop; the answer is the inline one."""
    broker.create_topic("t", 2, 1, {"segment.bytes": "1024"}, NOW)
    for _ in range(30):
        broker.partition("t", 0).append(batch(3, value=b"x" * 40), NOW)
    broker.partition("t", 1).append(batch(1), NOW)  # one segment only: read on the loop
    request = wire(fetch_request("t", (0, 0), (1, 0), max_bytes=2000, part_max=1500), 12)
    inline, _, _ = fetch.fetch(ctx, request, 12)
    real_pread = os.pread
    on_loop: list[bool] = []

    def recording(fd: int, size: int, position: int) -> bytes:
        on_loop.append(threading.current_thread() is threading.main_thread())
        return real_pread(fd, size, position)

    monkeypatch.setattr(os, "pread", recording)
    cold = RequestContext(broker, ctx.config, NOW, "test-client")
    await fetch.prepare(cold, request, trio.CapacityLimiter(1))
    assert set(cold.prefetched) == {("t", 0)} and on_loop and not any(on_loop)
    response = fetch.handle(cold, request, 12)
    assert response == inline and cold.prefetched == {}
    assert response.responses[0].partitions[0].records  # type: ignore[union-attr]


# -- ListOffsets ----------------------------------------------------------------------------------


def list_request(
    timestamp: int, *partitions: int, topic: str = "t", isolation_level: int = 0
) -> ListOffsetsRequest:
    wanted = [ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions or (0,)]
    return ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation_level, topics=[ListOffsetsTopic(name=topic, partitions=wanted)]
    )


def list_one(ctx: RequestContext, request: ListOffsetsRequest, version: int = 7) -> ListOffsetsPartitionResponse:
    response: ListOffsetsResponse = answer(list_offsets, ctx, request, version)
    ((partition,),) = [topic.partitions for topic in response.topics]
    return partition


def offsets(found: ListOffsetsPartitionResponse) -> tuple[int, int, int, int]:
    return found.error_code, found.offset, found.timestamp, found.leader_epoch


@pytest.fixture
def timed(broker: Broker) -> Broker:
    """Topic t: batches of 2 records at NOW+1000 (offsets 0-1), NOW+3000 (2-3), NOW+2000 (4-5)."""
    broker.create_topic("t", 1, 1, {}, NOW)
    for ts in (NOW + 1000, NOW + 3000, NOW + 2000):
        broker.partition("t", 0).append(batch(2, ts=ts), NOW)
    return broker


def test_list_offsets_empty_partition(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    assert offsets(list_one(ctx, list_request(-1))) == (0, 0, -1, 0)
    assert offsets(list_one(ctx, list_request(-2))) == (0, 0, -1, 0)
    assert offsets(list_one(ctx, list_request(-3))) == (0, -1, -1, -1)
    assert offsets(list_one(ctx, list_request(NOW))) == (0, -1, -1, -1)


def test_list_offsets_latest_earliest(ctx: RequestContext, timed: Broker) -> None:
    assert offsets(list_one(ctx, list_request(-1))) == (0, 6, -1, 0)
    assert offsets(list_one(ctx, list_request(-2))) == (0, 0, -1, 0)
    assert offsets(list_one(ctx, list_request(-1, isolation_level=1), 2)) == (0, 6, -1, -1)  # no epoch before v4
    timed.partition("t", 0).delete_records(3)
    assert offsets(list_one(ctx, list_request(-2), 1)) == (0, 3, -1, -1)


def test_list_offsets_by_timestamp(ctx: RequestContext, timed: Broker) -> None:
    assert offsets(list_one(ctx, list_request(NOW))) == (0, 0, NOW + 1000, 0)
    assert offsets(list_one(ctx, list_request(NOW + 1500))) == (0, 2, NOW + 3000, 0)
    assert offsets(list_one(ctx, list_request(NOW + 3000), 4)) == (0, 2, NOW + 3000, 0)
    assert offsets(list_one(ctx, list_request(NOW + 3001))) == (0, -1, -1, -1)


def test_list_offsets_max_timestamp(ctx: RequestContext, timed: Broker) -> None:
    assert offsets(list_one(ctx, list_request(-3))) == (0, 2, NOW + 3000, 0)


def test_list_offsets_errors(ctx: RequestContext, timed: Broker) -> None:
    for request in (list_request(-1, topic="missing"), list_request(-1, 5)):
        assert offsets(list_one(ctx, request)) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)
    response: ListOffsetsResponse = answer(list_offsets, ctx, list_request(-1, 0, 0), 5)
    assert [p.error_code for p in response.topics[0].partitions] == [Errors.INVALID_REQUEST] * 2
    request = list_request(-1)
    request.topics[0].partitions[0].current_leader_epoch = 3
    assert list_one(ctx, request, 4).error_code == Errors.UNKNOWN_LEADER_EPOCH


# -- DeleteRecords --------------------------------------------------------------------------------


def delete_request(offset: int, partition: int = 0, topic: str = "t") -> DeleteRecordsRequest:
    wanted = [DeleteRecordsPartition(partition_index=partition, offset=offset)]
    return DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=topic, partitions=wanted)], timeout_ms=1000)


def delete_one(ctx: RequestContext, request: DeleteRecordsRequest, version: int = 2) -> tuple[int, int]:
    response: DeleteRecordsResponse = answer(delete_records, ctx, request, version)
    ((partition,),) = [topic.partitions for topic in response.topics]
    return partition.error_code, partition.low_watermark


def test_delete_records(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    log = broker.partition("t", 0)
    for _ in range(3):
        log.append(batch(2), NOW)
    assert delete_one(ctx, delete_request(2), 0) == (0, 2)
    assert delete_one(ctx, delete_request(1), 1) == (0, 2)  # never moves backwards
    assert log.log_start_offset == 2
    assert only_partition(run_fetch(ctx, fetch_request())[0]).error_code == Errors.OFFSET_OUT_OF_RANGE
    assert delete_one(ctx, delete_request(-1)) == (0, 6)  # -1: the high watermark
    assert only_partition(run_fetch(ctx, fetch_request("t", (0, 6)))[0]).log_start_offset == 6


def test_delete_records_errors(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"}, NOW)
    broker.partition("t", 0).append(batch(2), NOW)
    assert delete_one(ctx, delete_request(3)) == (Errors.OFFSET_OUT_OF_RANGE, -1)
    assert delete_one(ctx, delete_request(-2)) == (Errors.OFFSET_OUT_OF_RANGE, -1)
    assert delete_one(ctx, delete_request(0, partition=1)) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert delete_one(ctx, delete_request(0, topic="missing")) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert delete_one(ctx, delete_request(0, topic="compacted")) == (Errors.POLICY_VIOLATION, -1)
    assert broker.partition("t", 0).log_start_offset == 0


# -- DescribeCluster ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(ctx: RequestContext, broker: Broker, version: int) -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=False)
    response: DescribeClusterResponse = answer(describe_cluster, ctx, request, version)
    assert (response.error_code, response.error_message) == (0, None)
    assert (response.cluster_id, response.controller_id, response.endpoint_type) == (broker.cluster_id, NODE, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [(NODE, HOST, PORT, None)]
    assert response.cluster_authorized_operations == NOT_REQUESTED
    request.include_cluster_authorized_operations = True
    response = answer(describe_cluster, ctx, request, version)
    assert response.cluster_authorized_operations == sum(1 << c for c in (5, 7, 8, 9, 10, 11, 12))


def test_describe_cluster_endpoint_types(ctx: RequestContext) -> None:
    for endpoint_type, error in ((2, Errors.MISMATCHED_ENDPOINT_TYPE), (9, Errors.UNSUPPORTED_ENDPOINT_TYPE)):
        request = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=endpoint_type)
        response: DescribeClusterResponse = answer(describe_cluster, ctx, request, 1)
        assert response.error_code == error and response.brokers == [] and response.error_message
