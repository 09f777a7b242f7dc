"""The ``kafka_py`` PySpark data source: Spark's Kafka source and sink, batch and streaming, in Python.

``spark.read.format("kafka_py")`` and ``spark.readStream.format("kafka_py")`` take the options of
Spark's own Kafka connector (see :mod:`.options`) and produce its schema::

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp, timestampType int [, headers array<struct<key string, value binary>>]

Planning (topic discovery, offset resolution) runs in the driver; every Spark task reads one
offset range of one topic-partition (:mod:`.reader`), so reads are partition-parallel. Streaming
offsets are Spark's Kafka offsets JSON, ``{"topic": {"0": 42, "1": 17}}``, checkpointed by Spark;
a restarted query resumes from its checkpoint, replaying exactly the planned ranges.

Writes (``df.write`` / ``df.writeStream``) go to the sink in :mod:`.sink`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rivven_kproto.codec.enums import EARLIEST

from .options import FIXED_SCHEMA_MESSAGE, KafkaOptions, OffsetSpec, TopicPartition, parse
from .planning import OffsetRange, batch_ranges, data_loss, discover, resolve, split_ranges
from .wire import Cluster

try:  # PySpark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    _StreamBases: tuple[type, ...] = (DataSourceStreamReader, SupportsTriggerAvailableNow)
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    ReadAllAvailable = ReadMaxRows = ReadLimit = None  # type: ignore[assignment,misc]
    _StreamBases = (DataSourceStreamReader,)

SOURCE_NAME = "kafka_py"


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka schema (``KafkaRecordToRowConverter.kafkaSchema``); built without a session,
    since Spark's Python workers have none to parse DDL with."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class KafkaInputPartition(InputPartition):
    """One offset range of one topic-partition: one Spark task."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__((offset_range.topic, offset_range.partition, offset_range.start, offset_range.end))
        self.range = offset_range


def _read(options: KafkaOptions, partition: InputPartition) -> Iterator[Any]:
    from .reader import RangeReader  # pyarrow is imported in the workers only

    if not isinstance(partition, KafkaInputPartition):
        return  # Spark's placeholder partition when planning found nothing to read
    yield from RangeReader(options, partition.range)


def _check_schema(schema: StructType, options: KafkaOptions) -> None:
    if schema != kafka_schema(options.include_headers):
        raise ValueError(FIXED_SCHEMA_MESSAGE)


class KafkaDataSource(DataSource):
    """``format("kafka_py")``; the Java shim maps ``format("kafka")`` here too."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        options = parse(self.options, streaming=None)  # fail at load() on bad options, like Spark
        return kafka_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse(self.options, streaming=False)
        _check_schema(schema, options)
        return KafkaBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse(self.options, streaming=True)
        _check_schema(schema, options)
        return KafkaStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from . import sink_options
        from .sink import KafkaBatchWriter

        options = sink_options.parse(self.options)
        return KafkaBatchWriter(options, sink_options.columns(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from . import sink_options
        from .sink import KafkaStreamWriter

        options = sink_options.parse(self.options)
        return KafkaStreamWriter(options, sink_options.columns(schema, options))


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: KafkaOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        with Cluster(self.options.bootstrap_servers, timeout=self.options.request_timeout_s, security=self.options.security) as cluster:
            ranges = batch_ranges(cluster, self.options)
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition)


Offsets = dict[str, dict[str, int]]  # Spark's Kafka offsets JSON: {"topic": {"0": 42}}


def to_json(offsets: dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: Offsets) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def rate_limit(start: dict[TopicPartition, int], latest: dict[TopicPartition, int], limit: int,
               new_start: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Spark's maxOffsetsPerTrigger: share ``limit`` offsets across partitions by backlog."""
    begin = {tp: start.get(tp, new_start.get(tp, 0)) for tp in latest}
    sizes = {tp: max(latest[tp] - begin[tp], 0) for tp in latest}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        share = limit * sizes[tp] / total
        step = int(share) if share >= 1 else (1 if share > 0 else 0)
        out[tp] = min(begin[tp] + step, end)
    return out


class KafkaStreamReader(*_StreamBases):  # type: ignore[misc]
    """Micro-batch reader; offsets are Spark's Kafka offsets JSON."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow

    def _cluster(self) -> Cluster:
        return Cluster(self.options.bootstrap_servers, timeout=self.options.request_timeout_s, security=self.options.security)

    def initialOffset(self) -> Offsets:
        with self._cluster() as cluster:
            partitions = discover(cluster, self.options)
            spec = self.options.starting or OffsetSpec("latest")
            return to_json(resolve(cluster, self.options, spec, partitions, position="starting"))

    def _latest(self) -> dict[TopicPartition, int]:
        with self._cluster() as cluster:
            partitions = discover(cluster, self.options)
            return resolve(cluster, self.options, OffsetSpec("latest"), partitions, position="ending")

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def getDefaultReadLimit(self) -> Any:
        if self.options.max_offsets_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:
        latest = dict(self._target) if self._target is not None else self._latest()
        max_rows = getattr(limit, "max_rows", None)
        if limit is None and self.options.max_offsets_per_trigger is not None and ReadMaxRows is None:
            max_rows = self.options.max_offsets_per_trigger
        if start is not None:
            begun = from_json(start)
            # Never go backwards (an AvailableNow target older than a restored checkpoint).
            latest = {tp: max(o, begun.get(tp, o)) if self._target is not None else o for tp, o in latest.items()}
            if max_rows is not None:
                new = [tp for tp in latest if tp not in begun]
                new_start = self._earliest(new) if new else {}
                latest = rate_limit(begun, latest, max_rows, new_start)
        return to_json(latest)

    def _earliest(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        with self._cluster() as cluster:
            found = cluster.list_offsets(dict.fromkeys(partitions, EARLIEST), self.options.isolation_level)
        return {tp: found[tp].offset for tp in partitions}

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        begun, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begun]
        if new:  # partitions discovered after the query started begin at their earliest offset
            earliest = self._earliest(new)
            for tp in new:
                if earliest[tp] != 0:
                    data_loss(
                        f"Added partition {tp[0]}-{tp[1]} starts from {earliest[tp]} instead of 0.", self.options
                    )
                begun[tp] = earliest[tp]
        deleted = [tp for tp in begun if tp not in until]
        if deleted:
            data_loss(f"Partitions {', '.join(f'{t}-{p}' for t, p in sorted(deleted))} have been deleted.",
                      self.options)
        ranges = []
        for tp, end_offset in sorted(until.items()):
            start_offset = begun[tp]
            if end_offset < start_offset:
                data_loss(
                    f"Partition {tp[0]}-{tp[1]} offset was changed from {start_offset} to {end_offset}.",
                    self.options,
                )
                continue
            ranges.append(OffsetRange(tp[0], tp[1], start_offset, end_offset))
        pieces = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        return [KafkaInputPartition(r) for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets; no consumer group is involved."""
