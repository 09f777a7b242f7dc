"""Produce with acks=all: records to partitions, partitions to leaders, RecordBatch v2 on the wire.

Keyed records go where Kafka's Java client would put them (murmur2 of the key, made positive,
modulo the partition count), so a key lands on the same partition whichever tool wrote it;
records without a key all go to one partition per call, rotating between calls (Kafka's sticky
partitioning, simplified). Batches are built by :func:`~rivven_kproto.codec.records.build_batch`
and split so no batch exceeds ``max_batch_bytes`` of record data (brokers cap a batch at
``message.max.bytes``, about 1 MB by default). Without a :class:`~.transactional.Transaction`
there is no idempotence: sequence numbers and producer ids are left unset, which every broker
accepts. With one, every partition is added to the transaction before its first batch (with
transactions V2 by that batch's Produce v12 itself), and the batches carry the transaction's
producer id, epoch and per-partition sequence numbers and the transactional flag.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import add

from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from rivven_kproto.codec.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from rivven_kproto.codec.records.records import Record, build_batch, build_values_batch
from rivven_kproto.net.errors import check

from .client import KafkaClient, TopicInfo
from .transactional import Transaction

ACKS_ALL = -1
PRODUCE_MIN_VERSION = 3  # the first version carrying RecordBatch v2
DEFAULT_MAX_BATCH_BYTES = 512 * 1024
PRODUCE_TIMEOUT_MS = 30_000

_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK32
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for keyed records: ``toPositive(murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass(slots=True)
class ProducerRecord:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    partition: int | None = None
    timestamp_ms: int | None = None


@dataclass
class PartitionResult:
    partition: int
    base_offset: int
    count: int

    @property
    def last_offset(self) -> int:
        return -1 if self.base_offset < 0 else self.base_offset + self.count - 1  # -1: unknown (acks=0)


# Bytes a record's framing can take beyond its key, value and header contents: length prefix (5),
# attributes (1), timestamp delta (10), offset delta (5), key, value and header-count lengths (15).
RECORD_FRAMING_BOUND = 36
HEADER_FRAMING_BOUND = 10  # header key and value lengths


def size_bound(record: ProducerRecord) -> int:
    """An upper bound of the record's encoded size, found without encoding it."""
    size = RECORD_FRAMING_BOUND + len(record.key or b"") + len(record.value or b"")
    for key, value in record.headers:
        size += HEADER_FRAMING_BOUND + 4 * len(key) + len(value or b"")  # UTF-8: at most 4 bytes a character
    return size


def split_batches(records: Sequence[ProducerRecord], max_batch_bytes: int) -> list[list[ProducerRecord]]:
    """Consecutive runs of records whose encoded size stays within ``max_batch_bytes`` (at least one
    each), judged by :func:`size_bound` so that nothing is encoded twice."""
    batches: list[list[ProducerRecord]] = []
    current: list[ProducerRecord] = []
    size = 0
    for record in records:
        record_size = size_bound(record)
        if current and size + record_size > max_batch_bytes:
            batches.append(current)
            current, size = [], 0
        current.append(record)
        size += record_size
    if current:
        batches.append(current)
    return batches


def _to_batch_record(index: int, record: ProducerRecord, base_timestamp: int) -> Record:
    delta = 0 if record.timestamp_ms is None else record.timestamp_ms - base_timestamp
    return Record(index, delta, record.key, record.value, record.headers)  # headers are only read


def split_values(values: Sequence[bytes], overhead: int, max_batch_bytes: int) -> list[tuple[int, int]]:
    """(start, end) of consecutive runs of ``values`` whose size bound (each value's length plus
    ``overhead``) stays within ``max_batch_bytes`` (one value at least): :func:`split_batches` for
    unkeyed values, on running sums built in C rather than a Python loop per value."""
    bounds = list(accumulate(map(add, map(len, values), repeat(overhead)), initial=0))  # bounds[i]: values[:i]
    runs = []
    start = 0
    while start < len(values):
        end = max(bisect_right(bounds, bounds[start] + max_batch_bytes, start + 1) - 1, start + 1)
        runs.append((start, end))
        start = end
    return runs


@dataclass
class _Values:
    """A batch's worth of unkeyed records given by their values (encoded without Record objects)."""

    values: Sequence[bytes]
    headers: list[tuple[str, bytes | None]]

    def __len__(self) -> int:
        return len(self.values)


Batch = list[Record] | _Values


class Producer:
    """Sends records of one topic; keeps the topic's layout and the sticky partition between calls."""

    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        *,
        compression: Compression = Compression.NONE,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        transaction: Transaction | None = None,
        acks: int = ACKS_ALL,
    ) -> None:
        if acks not in (0, 1, ACKS_ALL):
            raise ValueError(f"acks must be 0, 1 or -1 (all), got {acks}")
        self.acks = acks
        self.client = client
        self.topic = topic
        self.compression = compression
        self.max_batch_bytes = max_batch_bytes
        self.transaction = transaction
        self._info: TopicInfo | None = None
        self._sticky = random.randrange(1 << 30)

    async def _layout(self) -> TopicInfo:
        if self._info is None:
            self._info = await self.client.topic(self.topic, auto_create=True)
        return self._info

    def _assign(self, info: TopicInfo, records: Sequence[ProducerRecord]) -> dict[int, list[ProducerRecord]]:
        count = len(info.partitions)
        sticky = info.partitions[self._sticky % count].partition
        self._sticky += 1
        assigned: dict[int, list[ProducerRecord]] = defaultdict(list)
        for record in records:
            if record.partition is not None:
                info.partition(record.partition)  # raises for a partition the topic lacks
                partition = record.partition
            elif record.key is not None:
                partition = info.partitions[partition_for_key(record.key, count)].partition
            else:
                partition = sticky
            assigned[partition].append(record)
        return assigned

    async def send(self, records: Sequence[ProducerRecord]) -> list[PartitionResult]:
        """Produce ``records`` and wait for acks=all; one result per batch written."""
        if not records:
            return []
        info = await self._layout()
        assigned = self._assign(info, records)
        pending: dict[int, list[Batch]] = {}
        timestamp = _now_ms()
        for partition, items in assigned.items():
            pending[partition] = [
                [_to_batch_record(i, r, timestamp) for i, r in enumerate(run)]
                for run in split_batches(items, self.max_batch_bytes)
            ]
        return await self._send_pending(info, pending, timestamp)

    async def send_values(
        self, values: Sequence[bytes], headers: Sequence[tuple[str, bytes | None]] = (), partition: int | None = None
    ) -> list[PartitionResult]:
        """Produce unkeyed records with these values (and the same headers) to ``partition`` or the
        sticky one, as :meth:`send` would, without a ProducerRecord per value: the bulk path of
        ``kproto produce`` (a record's cost is then its Record and its encoding)."""
        if not values:
            return []
        info = await self._layout()
        if partition is None:
            partition = info.partitions[self._sticky % len(info.partitions)].partition
            self._sticky += 1
        else:
            info.partition(partition)  # raises for a partition the topic lacks
        header_list = list(headers)
        overhead = RECORD_FRAMING_BOUND + sum(HEADER_FRAMING_BOUND + 4 * len(k) + len(v or b"") for k, v in header_list)
        runs: list[Batch] = [
            _Values(values[start:end], header_list)
            for start, end in split_values(values, overhead, self.max_batch_bytes)
        ]
        return await self._send_pending(info, {partition: runs}, _now_ms())

    async def _send_pending(
        self, info: TopicInfo, pending: dict[int, list[Batch]], timestamp: int
    ) -> list[PartitionResult]:
        results: list[PartitionResult] = []
        # One request per leader and round; a partition whose records need several batches takes several rounds.
        if self.transaction is not None:
            await self.transaction.add_partitions(self.topic, sorted(pending))
        while pending:
            round_batches = {p: batches.pop(0) for p, batches in pending.items()}
            pending = {p: batches for p, batches in pending.items() if batches}
            by_leader: dict[int, dict[int, Batch]] = defaultdict(dict)
            for partition, batch_records in round_batches.items():
                by_leader[info.partition(partition).leader][partition] = batch_records
            for leader, partitions in sorted(by_leader.items()):
                results.extend(await self._send_to(leader, partitions, timestamp))
        return sorted(results, key=lambda r: (r.partition, r.base_offset))

    async def _send_to(self, leader: int, partitions: dict[int, Batch], timestamp: int) -> list[PartitionResult]:
        data = []
        for partition, batch_records in sorted(partitions.items()):  # offset deltas already 0..n-1
            data.append(PartitionProduceData(index=partition, records=self._batch(partition, batch_records, timestamp)))
        txn = self.transaction

        def build(version: int) -> ProduceRequest:
            return ProduceRequest(
                transactional_id=None if txn is None else txn.transactional_id,
                acks=self.acks,
                timeout_ms=PRODUCE_TIMEOUT_MS,
                topic_data=[TopicProduceData(name=self.topic, partition_data=data)],
            )

        counts = {p: len(r) for p, r in partitions.items()}
        low, high = (PRODUCE_MIN_VERSION, None) if txn is None else txn.produce_versions
        low = max(low, PRODUCE_MIN_VERSION)
        if self.acks == 0:  # no answer comes: offsets are unknown (-1), as for Kafka's producers
            await self.client.send_only(ProduceRequest, build, node_id=leader, min_version=low, max_version=high)
            return [PartitionResult(p, -1, n) for p, n in sorted(counts.items())]
        response = await self.client.call(
            ProduceRequest, build, ProduceResponse, node_id=leader, min_version=low, max_version=high
        )
        results = []
        for topic_response in response.responses:
            for answer in topic_response.partition_responses:
                check(answer.error_code, answer.error_message, context=f"{self.topic}-{answer.index}")
                results.append(PartitionResult(answer.index, answer.base_offset, counts.get(answer.index, 0)))
        return results

    def _batch(self, partition: int, records: Batch, timestamp: int) -> bytes:
        txn = self.transaction
        pid, epoch, sequence = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
        if txn is not None:
            pid, epoch = txn.producer_id, txn.producer_epoch
            sequence = txn.next_sequence(self.topic, partition, len(records))
        if isinstance(records, _Values):
            return build_values_batch(records.values, records.headers, compression=self.compression,
                                      base_timestamp=timestamp, producer_id=pid, producer_epoch=epoch,
                                      base_sequence=sequence, is_transactional=txn is not None)
        return build_batch(records, compression=self.compression, base_timestamp=timestamp, producer_id=pid,
                           producer_epoch=epoch, base_sequence=sequence, is_transactional=txn is not None)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
