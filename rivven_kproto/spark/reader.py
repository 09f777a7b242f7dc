"""Executor side: read one offset range of one partition as Arrow record batches.

One Spark task reads one :class:`~.planning.OffsetRange` with single-partition Fetch requests on
one connection to the partition's leader. Requests are pipelined one deep: as soon as the batch
headers of an answer say where the next fetch starts, that fetch is sent, and the broker serves
it while this process decodes the records of the current answer.

Gaps are normal: under read_committed, aborted records and transaction markers occupy offsets
that are never shown, so the position always advances past every *complete batch* received, not
past the last record shown. Missing data (an offset below the log start, or a range ending beyond
what the broker can serve) follows ``failOnDataLoss`` like Spark's connector.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa

from rivven_kproto.codec.compression import CompressionError
from rivven_kproto.codec.enums import EARLIEST
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.records.records import RecordFormatError

from .decode import decode_rows, select_batches
from .options import KafkaOptions
from .planning import OffsetRange, data_loss
from .wire import RETRY_BACKOFF_S, Cluster, Connection, KafkaWireError, check

MAX_FETCH_BYTES = 256 * 1024 * 1024
MIN_FETCH_BYTES = 64 * 1024
LONG_POLL_MS = 500
MAX_RETRIES = 20


class RangeReader:
    """Reads ``[start, end)`` of one partition; iterate it for ``pyarrow.RecordBatch`` objects."""

    def __init__(self, options: KafkaOptions, offset_range: OffsetRange) -> None:
        self.options = options
        self.range = offset_range
        self.max_bytes = options.fetch_max_bytes

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self.range.size <= 0:
            return
        with Cluster(self.options.bootstrap_servers, timeout=self.options.request_timeout_s, security=self.options.security) as cluster:
            yield from self._read(cluster)

    def _send(self, cluster: Cluster, connection: Connection, position: int, wait_ms: int = 0) -> tuple:
        return cluster.send_fetch(
            connection,
            self.range.topic,
            self.range.partition,
            position,
            isolation_level=self.options.isolation_level,
            max_bytes=self._fetch_size(position),
            max_wait_ms=wait_ms,
        )

    _bytes_per_offset: float | None = None

    def _fetch_size(self, position: int) -> int:
        """Ask for about what is left of the range (split ranges end mid-partition), else the maximum."""
        if self._bytes_per_offset is None:
            return self.max_bytes
        wanted = int(self._bytes_per_offset * (self.range.end - position) * 1.1) + MIN_FETCH_BYTES
        return max(MIN_FETCH_BYTES, min(self.max_bytes, wanted))

    def _learn(self, raw_size: int, offsets: int) -> None:
        if raw_size and offsets > 0:
            self._bytes_per_offset = raw_size / offsets

    def _read(self, cluster: Cluster) -> Iterator[pa.RecordBatch]:
        topic, partition, end = self.range.topic, self.range.partition, self.range.end
        position = self.range.start
        connection = cluster.leader_of(topic, partition)
        in_flight = self._send(cluster, connection, position)
        retries = 0
        waited_since: float | None = None
        while position < end:
            try:
                data = cluster.receive_fetch(connection, in_flight, topic, partition)
            except KafkaWireError as exc:
                if not exc.retriable or retries >= MAX_RETRIES:
                    raise
                retries += 1
                time.sleep(RETRY_BACKOFF_S)
                cluster.close()
                connection = cluster.leader_of(topic, partition)
                in_flight = self._send(cluster, connection, position)
                continue
            if data.error_code == Errors.OFFSET_OUT_OF_RANGE:
                position = self._out_of_range(cluster, position)
                if position >= end:
                    return
                in_flight = self._send(cluster, connection, position)
                continue
            if data.error_code and Errors.for_code(data.error_code).retriable and retries < MAX_RETRIES:
                retries += 1
                time.sleep(RETRY_BACKOFF_S)
                cluster.close()
                connection = cluster.leader_of(topic, partition)
                in_flight = self._send(cluster, connection, position)
                continue
            check(data.error_code, f"Fetch {topic}-{partition} at offset {position}")
            retries = 0
            raw = data.record_bytes()
            aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
            try:
                shown, next_offset, seen = select_batches(raw, aborted, self.options.read_committed)
                if seen:
                    waited_since = None
                    previous, position = position, max(position, next_offset)
                    self._learn(len(raw), position - previous)
                    if position < end:  # pipelined: the broker serves this while we decode
                        in_flight = self._send(cluster, connection, position)
                    rows = decode_rows(
                        raw, shown, topic=topic, partition=partition, start=previous, end=end,
                        include_headers=self.options.include_headers,
                    )
                    if rows is not None:
                        yield rows
                    continue
            except (RecordFormatError, CompressionError) as exc:
                raise KafkaWireError(f"corrupt records in {topic}-{partition} at offset {position}: {exc}",
                                     Errors.CORRUPT_MESSAGE) from None
            if raw:  # only a partial batch: it is larger than we asked for
                if self.max_bytes >= MAX_FETCH_BYTES:
                    raise KafkaWireError(f"a batch at {topic}-{partition} offset {position} exceeds "
                                         f"{MAX_FETCH_BYTES} bytes", Errors.RECORD_LIST_TOO_LARGE)
                self.max_bytes = min(MAX_FETCH_BYTES, 2 * self.max_bytes)
                self._bytes_per_offset = None
                in_flight = self._send(cluster, connection, position)
                continue
            # Nothing at this position although the range says there should be.
            available = data.last_stable_offset if self.options.read_committed else data.high_watermark
            if available < 0:
                available = data.high_watermark
            if position >= available:
                now = time.monotonic()
                waited_since = waited_since or now
                if now - waited_since > self.options.poll_timeout_ms / 1000:
                    data_loss(
                        f"Could not read records in offset [{position}, {end}) for topic partition "
                        f"{topic}-{partition}: the broker serves offsets up to {available}.",
                        self.options,
                    )
                    return
                in_flight = self._send(cluster, connection, position, LONG_POLL_MS)
                continue
            raise KafkaWireError(f"empty Fetch answer at {topic}-{partition} offset {position} below {available}")

    def _out_of_range(self, cluster: Cluster, position: int) -> int:
        """The start of the range was deleted: fail, or skip to the log start (failOnDataLoss=false)."""
        topic, partition = self.range.topic, self.range.partition
        earliest = cluster.list_offsets({(topic, partition): EARLIEST}, self.options.isolation_level)
        log_start = earliest[(topic, partition)].offset
        data_loss(
            f"Starting offset for {topic}-{partition} was {position} but consumer reset to {log_start}.",
            self.options,
        )
        return max(position, log_start)
