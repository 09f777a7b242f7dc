"""The limit: a "broker" that answers Produce and Fetch from memory with no log, no checks.

Built on our codec (``rivven_kproto.codec``), it serves what confluent-kafka needs to create a
topic, produce idempotently and transactionally and consume with ``assign()``: ApiVersions,
Metadata, CreateTopics, FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn, Produce,
ListOffsets, Fetch (transactional requests are answered "done" at once: no coordinator, no markers). Produced batches are kept as bytes in a list per
partition (base offset rewritten), nothing is validated, fsynced or indexed, so a client's
throughput against it is the client's own ceiling on this machine.

    python -m tools.bench.nullbroker [--port 0]     # prints "listening on 127.0.0.1:PORT"
"""

from __future__ import annotations

import argparse
import bisect
import logging
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import trio

from rivven_kproto.codec.connection import (
    ProtocolError,
    ServerConnection,
    encode_response,
    encode_unsupported_api_versions,
)
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsResponse
from rivven_kproto.codec.messages.create_topics import CreatableTopicResult, CreateTopicsResponse
from rivven_kproto.codec.messages.end_txn import EndTxnResponse
from rivven_kproto.codec.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from rivven_kproto.codec.messages.find_coordinator import Coordinator, FindCoordinatorResponse
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdResponse
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from rivven_kproto.codec.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from rivven_kproto.codec.messages.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from rivven_kproto.codec.schema.fields import ZERO_UUID
from rivven_kproto.server.handlers import HANDLERS

log = logging.getLogger(__name__)

# The APIs answered, at the versions our broker serves, so clients negotiate the same requests.
SERVED = {
    key: (HANDLERS[key].versions.low, HANDLERS[key].versions.high) for key in (0, 1, 2, 3, 10, 18, 19, 22, 24, 26)
}
RECORDS_COUNT = struct.Struct(">i")  # the last-offset-delta field of a batch header, at byte 23
PARTITIONS = 8



@dataclass
class Partition:
    bases: list[int] = field(default_factory=list)
    batches: list[bytes] = field(default_factory=list)
    end: int = 0

    def append(self, batch: bytes) -> int:
        base = self.end
        (last_delta,) = RECORDS_COUNT.unpack_from(batch, 23)
        self.bases.append(base)
        self.batches.append(base.to_bytes(8, "big") + batch[8:])
        self.end = base + last_delta + 1
        return base

    def read(self, offset: int, max_bytes: int) -> bytes:
        index = max(bisect.bisect_right(self.bases, offset) - 1, 0)
        out: list[bytes] = []
        size = 0
        for batch in self.batches[index:]:
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
        return b"".join(out)


class NullBroker:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.topics: dict[str, int] = {}
        self.partitions: dict[tuple[str, int], Partition] = defaultdict(Partition)
        self.next_producer_id = 1000
        self.appended = trio.Event()

    def handle(self, key: int, request: Any, version: int) -> Any:
        if key == 18:
            return ApiVersionsResponse(error_code=0, throttle_time_ms=0, api_keys=[
                ApiVersion(api_key=k, min_version=low, max_version=high) for k, (low, high) in sorted(SERVED.items())
            ])
        if key == 3:
            names = [t.name for t in request.topics] if request.topics is not None else list(self.topics)
            return MetadataResponse(
                throttle_time_ms=0, cluster_id="null", controller_id=0,
                brokers=[MetadataResponseBroker(node_id=0, host=self.host, port=self.port, rack=None)],
                topics=[self._topic(name) for name in names if name], cluster_authorized_operations=-2147483648,
            )
        if key == 19:
            for topic in request.topics:
                self.topics[topic.name] = topic.num_partitions if topic.num_partitions > 0 else PARTITIONS
            return CreateTopicsResponse(throttle_time_ms=0, topics=[
                CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=0, error_message=None,
                                     num_partitions=self.topics[t.name], replication_factor=1)
                for t in request.topics
            ])
        if key == 22:
            self.next_producer_id += 1
            return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=self.next_producer_id,
                                          producer_epoch=0)
        if key == 10:
            return FindCoordinatorResponse(
                throttle_time_ms=0, error_code=0, error_message=None, node_id=0, host=self.host, port=self.port,
                coordinators=[Coordinator(key=k, node_id=0, host=self.host, port=self.port, error_code=0,
                                          error_message=None) for k in request.coordinator_keys],
            )
        if key == 24:
            return self._add_partitions(request, version)
        if key == 26:
            return EndTxnResponse(throttle_time_ms=0, error_code=0)
        if key == 0:
            return self._produce(request)
        if key == 2:
            return ListOffsetsResponse(throttle_time_ms=0, topics=[
                ListOffsetsTopicResponse(name=t.name, partitions=[
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=0, timestamp=-1, leader_epoch=0,
                        offset=0 if p.timestamp == -2 else self.partitions[(t.name, p.partition_index)].end,
                    ) for p in t.partitions
                ]) for t in request.topics
            ])
        if key == 1:
            return self._fetch(request)
        raise ProtocolError(f"the null broker does not serve API {key}")

    def _topic(self, name: str) -> MetadataResponseTopic:
        count = self.topics.setdefault(name, PARTITIONS)
        return MetadataResponseTopic(
            error_code=0, name=name, topic_id=ZERO_UUID, is_internal=False, topic_authorized_operations=-2147483648,
            partitions=[MetadataResponsePartition(error_code=0, partition_index=i, leader_id=0, leader_epoch=0,
                                                  replica_nodes=[0], isr_nodes=[0], offline_replicas=[])
                        for i in range(count)],
        )

    @staticmethod
    def _add_partitions(request: Any, version: int) -> AddPartitionsToTxnResponse:
        def results(topics: list[Any]) -> list[AddPartitionsToTxnTopicResult]:
            return [AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=0) for p in t.partitions
            ]) for t in topics]

        if version <= 3:
            return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results(
                request.v3_and_below_topics))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_transaction=[
            AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=results(t.topics))
            for t in request.transactions
        ])

    def _produce(self, request: Any) -> ProduceResponse:
        responses = []
        for topic in request.topic_data:
            parts = []
            for data in topic.partition_data:
                base = self.partitions[(topic.name, data.index)].append(bytes(data.records))
                parts.append(PartitionProduceResponse(index=data.index, error_code=0, base_offset=base,
                                                      log_append_time_ms=-1, log_start_offset=0, error_message=None))
            responses.append(TopicProduceResponse(name=topic.name, partition_responses=parts))
        event, self.appended = self.appended, trio.Event()
        event.set()
        return ProduceResponse(responses=responses, throttle_time_ms=0)

    def _fetch(self, request: Any) -> tuple[FetchResponse, int]:
        total = 0
        topics = []
        for topic in request.topics:
            parts = []
            for wanted in topic.partitions:
                partition = self.partitions[(topic.topic, wanted.partition)]
                data = partition.read(wanted.fetch_offset, wanted.partition_max_bytes)
                total += len(data)
                parts.append(PartitionData(
                    partition_index=wanted.partition, error_code=0, high_watermark=partition.end,
                    last_stable_offset=partition.end, log_start_offset=0,
                    aborted_transactions=[] if request.isolation_level == 1 else None,
                    preferred_read_replica=-1, records=data,
                ))
            topics.append(FetchableTopicResponse(topic=topic.topic, partitions=parts))
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics), total

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        connection = ServerConnection()
        try:
            while True:
                data = await stream.receive_some(256 * 1024)
                if not data:
                    return
                connection.receive_data(data)
                while (event := connection.next_event()) is not None:
                    key, version = event.api_key, event.api_version
                    if event.request is None:  # ApiVersions newer than ours (KIP-511)
                        await stream.send_all(encode_unsupported_api_versions(event.header.correlation_id, [
                            ApiVersion(api_key=k, min_version=low, max_version=high)
                            for k, (low, high) in sorted(SERVED.items())
                        ]))
                        continue
                    if key not in SERVED:
                        return
                    request: Any = event.request
                    if key == 1:
                        response, total = self._fetch(request)
                        if total == 0 and request.max_wait_ms > 0:
                            with trio.move_on_after(request.max_wait_ms / 1000):
                                await self.appended.wait()
                            response, total = self._fetch(request)
                    else:
                        response = self.handle(key, request, version)
                    if key == 0 and request.acks == 0:
                        continue
                    await stream.send_all(encode_response(event.header, response))
        except (ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("connection closed: %s", exc)


async def main(port: int) -> None:
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    bound = listeners[0].socket.getsockname()[1]
    broker = NullBroker("127.0.0.1", bound)
    print(f"listening on 127.0.0.1:{bound}", flush=True)
    await trio.serve_listeners(broker.serve_connection, listeners)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        trio.run(main, args.port)
    except KeyboardInterrupt:
        pass
