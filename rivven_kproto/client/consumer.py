"""Consume without a group: Fetch from explicit positions, decode records, honour isolation.

Positions start at the log start (``earliest``), the end (``latest``, what the isolation level
may see) or a given offset; each poll sends one Fetch per leader and advances each partition past
every batch it received, shown or not. Control batches (transaction markers) are never shown.
With read_committed the broker stops at the last stable offset and lists the aborted
transactions overlapping the data it returned; records of those producers' transactional batches
are dropped until their ABORT marker, exactly as Kafka's Java consumer does (:func:`visible_records`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import trio

from rivven_kproto.codec.compression import CompressionError
from rivven_kproto.codec.enums import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from rivven_kproto.codec.records.control import is_abort_marker
from rivven_kproto.codec.records.records import (
    Record,
    RecordBatch,
    RecordFormatError,
    decode_batch,
    decode_batch_tuples,
    decode_batch_values,
    iter_batch_positions,
)
from rivven_kproto.codec.records.visibility import Visibility
from rivven_kproto.net.errors import ClientError, KafkaResponseError, check

from .admin import list_offsets
from .client import KafkaClient, TopicInfo

FETCH_MIN_VERSION = 4  # isolation level and aborted transactions
# Larger than Kafka's 1 MiB max.partition.fetch.bytes: this consumer fetches, then prints, with no
# prefetch in the background, so a bulk read (``consume -e``) wants few, large round trips.
PARTITION_MAX_BYTES = 8 * 1024 * 1024
MAX_PARTITION_MAX_BYTES = 64 * 1024 * 1024
RESPONSE_MAX_BYTES = 50 * 1024 * 1024
MAX_WAIT_MS = 500

StartAt = int | str  # an offset, "earliest" or "latest"
# (partition, offset of the last, values): what ``run(values=True)`` hands over, a batch's worth at a time
ValueChunk = tuple[int, int, list[bytes | None]]


@dataclass(slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def visible_records(
    batches: Iterable[RecordBatch], aborted: Iterable[tuple[int, int]] | None, read_committed: bool
) -> Iterator[tuple[int, int, Record]]:
    """(offset, timestamp, record) a consumer may see; ``aborted`` holds (producer id, first offset)
    (Kafka's rule: see ``codec/records/visibility.py``)."""
    visibility = Visibility(aborted, read_committed)
    for batch in batches:
        if visibility.shows(batch, lambda: is_abort_marker(batch)):  # noqa: B023 - called at once
            yield from batch.iter_absolute()


class Consumer:
    """Reads some partitions of one topic from chosen positions."""

    def __init__(self, client: KafkaClient, topic: str, *, isolation_level: int = READ_UNCOMMITTED) -> None:
        self.client = client
        self.topic = topic
        self.isolation_level = isolation_level
        self.positions: dict[int, int] = {}
        self._info: TopicInfo | None = None
        self._max_bytes: dict[int, int] = {}
        self._ends: dict[int, int] = {}  # from the latest Fetch: where each partition ends for us

    async def assign(self, partitions: list[int] | None, start: StartAt) -> dict[int, int]:
        """Choose partitions (None: all) and resolve their start positions."""
        info = self._info = await self.client.topic(self.topic)
        chosen = [p.partition for p in info.partitions] if partitions is None else partitions
        for partition in chosen:
            info.partition(partition)
        if isinstance(start, int):
            self.positions = dict.fromkeys(chosen, start)
            return self.positions
        timestamp = EARLIEST if start == "earliest" else LATEST
        for leader, indexes in self._by_leader(chosen).items():
            offsets = await list_offsets(self.client, leader, self.topic, indexes, timestamp, self.isolation_level)
            self.positions.update(offsets)
        return self.positions

    def _by_leader(self, partitions: Iterable[int]) -> dict[int, list[int]]:
        assert self._info is not None
        grouped: dict[int, list[int]] = defaultdict(list)
        for partition in partitions:
            grouped[self._info.partition(partition).leader].append(partition)
        return dict(sorted(grouped.items()))

    async def poll(self, max_wait_ms: int = MAX_WAIT_MS, *, values: bool = False) -> list[Any]:
        """One Fetch per leader; the records now visible past each position (as ConsumedRecord, or
        with ``values`` as ValueChunks: the bulk path of ``kproto consume``)."""
        records: list[Any] = []
        for leader, partitions in self._by_leader(self.positions).items():
            response = await self._fetch(leader, partitions, max_wait_ms)
            check(response.error_code, context="Fetch")
            for topic_response in response.responses:
                for data in topic_response.partitions:
                    records.extend(self._absorb(data, values))
        return records

    async def _fetch(self, leader: int, partitions: list[int], max_wait_ms: int) -> FetchResponse:
        def build(version: int) -> FetchRequest:
            wanted = [
                FetchPartition(
                    partition=p,
                    fetch_offset=self.positions[p],
                    partition_max_bytes=self._max_bytes.get(p, PARTITION_MAX_BYTES),
                )
                for p in partitions
            ]
            return FetchRequest(
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=RESPONSE_MAX_BYTES,
                isolation_level=self.isolation_level,
                topics=[FetchTopic(topic=self.topic, partitions=wanted)],
                forgotten_topics_data=[],
            )

        return await self.client.call(FetchRequest, build, FetchResponse, node_id=leader, min_version=FETCH_MIN_VERSION)

    def _absorb(self, data: PartitionData, values: bool = False) -> list[Any]:
        partition = data.partition_index
        position = self.positions.get(partition)
        if position is None:
            return []
        if data.error_code == Errors.OFFSET_OUT_OF_RANGE:
            raise KafkaResponseError(data.error_code, context=f"offset {position} of {self.topic}-{partition}")
        check(data.error_code, context=f"Fetch {self.topic}-{partition}")
        read_committed = self.isolation_level == READ_COMMITTED
        self._ends[partition] = data.last_stable_offset if read_committed and data.last_stable_offset >= 0 else data.high_watermark
        raw = data.record_bytes()
        aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
        visibility = Visibility(aborted, read_committed)
        out: list[Any] = []
        next_offset = None
        topic = self.topic
        try:
            for pos, header in iter_batch_positions(raw):
                next_offset = header.next_offset
                if not visibility.shows(header, lambda: is_abort_marker(decode_batch(raw, pos))):  # noqa: B023 - called at once
                    continue
                if values:
                    shown, last = decode_batch_values(raw, pos, position)
                    if shown:
                        out.append((partition, last, shown))
                    continue
                base_offset = header.base_offset
                _, tuples = decode_batch_tuples(raw, pos)
                log_append = header.timestamp_type == 1
                base_timestamp = header.max_timestamp if log_append else header.base_timestamp
                out += [
                    ConsumedRecord(topic, partition, base_offset + t[0], base_timestamp + (0 if log_append else t[1]),
                                   t[2], t[3], t[4])
                    for t in tuples if base_offset + t[0] >= position
                ]
        except (RecordFormatError, CompressionError) as exc:
            raise ClientError(Errors.CORRUPT_MESSAGE, f"{self.topic}-{partition} at offset {position}: {exc}") from None
        if raw and next_offset is None:  # a batch larger than we asked for: ask for more next time
            self._max_bytes[partition] = min(MAX_PARTITION_MAX_BYTES, 2 * self._max_bytes.get(partition, PARTITION_MAX_BYTES))
            return []
        if next_offset is not None:
            self.positions[partition] = max(position, next_offset)
        return out

    async def run(
        self,
        on_record: Callable[[Any], None],
        *,
        max_records: int | None = None,
        idle_timeout: float | None = None,
        stop_at_end: bool = False,
        on_poll: Callable[[], None] | None = None,
        values: bool = False,
    ) -> int:
        """Poll until ``max_records`` were delivered, nothing new arrived for ``idle_timeout`` s, or
        (``stop_at_end``) every partition was read up to its end; else follow until cancelled.
        ``on_poll`` runs after each poll's records were handed over (to flush buffered output);
        with ``values`` ``on_record`` gets a ValueChunk (a batch's values) instead of each ConsumedRecord."""
        if values and max_records is not None:
            raise ValueError("values=True hands over whole batches: no max_records")
        delivered = 0
        last_progress = trio.current_time()
        while max_records is None or delivered < max_records:
            wait_ms = int(min(MAX_WAIT_MS, self.client.timeout * 500))
            if idle_timeout is not None:
                idle_left = idle_timeout - (trio.current_time() - last_progress)
                if idle_left <= 0:
                    break
                wait_ms = int(min(wait_ms, idle_left * 1000))
            records = await self.poll(0 if stop_at_end else max(wait_ms, 0), values=values)
            if records:
                last_progress = trio.current_time()
            if values:  # whole batches (no max_records here: a cut batch's last offset is unknown)
                for chunk in records:
                    on_record(chunk)
                    delivered += len(chunk[2])
            for record in records if not values else ():
                if max_records is not None and delivered >= max_records:
                    break
                on_record(record)
                delivered += 1
            if on_poll is not None:
                on_poll()
            if stop_at_end and self.at_end():
                break
        return delivered

    def at_end(self) -> bool:
        """Every position has reached its partition's end (high watermark, or LSO for read_committed)."""
        return all(
            partition in self._ends and position >= self._ends[partition]
            for partition, position in self.positions.items()
        )
