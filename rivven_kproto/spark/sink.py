"""The Kafka sink: ``df.write.format("kafka")`` and ``df.writeStream.format("kafka")``.

Same data source as the reader (``kafka_py``, and ``kafka`` through the shim), same options as
Spark's connector (:mod:`.sink_options`); every Spark task produces its own rows from its executor
(:mod:`.sink_task`). Spark's Python data sources accept ``mode("append")`` (and ``overwrite``,
which for Kafka appends too, as Spark's connector's truncate does nothing); ``format("kafka")``
also takes the default mode (ErrorIfExists) as append, as Spark's connector does (the Java shim
sends batch writes through Spark's V1 path, which lets it choose).

Guarantees
----------
At least once (default): a retried task, or a micro-batch Spark replays after a driver restart,
writes its rows again; the idempotent producer only removes duplicates of its own retries.

Exactly once (``exactlyOnce=true``): each task writes its rows in one Kafka transaction and
records, in the same transaction, that this (micro-)batch of this Spark partition is done (an
offset committed for a consumer group named after the transactional id). Therefore, for a reader
with ``isolation.level=read_committed``:

* batch jobs: a failed, retried or speculative task attempt never leaves rows behind, and an
  attempt retried after an earlier one committed writes nothing again. Tasks commit one by one:
  a job that fails part way leaves the rows of its committed tasks; running the job again writes
  them again (a new job is a new scope).
* streaming: a micro-batch that Spark replays after a driver restart (its offsets were logged,
  its commit log entry was not) finds the tasks that had committed and writes only the others.
  The scope is the query id, which Spark keeps in the checkpoint, so the guarantee holds across
  restarts from the same ``checkpointLocation``; ``transactionalIdPrefix`` replaces it (it must
  then be unique to the query and never change).

Not guaranteed: a replay must give each Spark partition the same rows as the first run (a
deterministic input and partitioning: Kafka or file sources are, ``rand()``, non-deterministic
UDFs, or a repartition by something unstable are not); deleting the checkpoint starts a new query
(a new scope) unless ``transactionalIdPrefix`` is fixed; read_uncommitted readers see aborted
attempts. Transactional ids and marker groups (one per query and Spark partition, or per batch
job and partition) are left behind in the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from .sink_options import Columns, SinkOptions
from .sink_task import TaskScope, records, write_at_least_once, write_exactly_once

try:  # PySpark 4.0+: Arrow batches instead of rows
    from pyspark.sql.datasource import DataSourceArrowWriter

    _BatchBase: type = DataSourceArrowWriter
except ImportError:  # pragma: no cover
    _BatchBase = DataSourceWriter
try:  # newer PySpark: Arrow for streaming writes too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    _StreamBase: type = DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - PySpark before the Arrow stream writer
    _StreamBase = DataSourceStreamWriter

log = logging.getLogger(__name__)
DEFAULT_PREFIX = "spark-kafka-sink"


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    partition: int
    rows: int
    skipped: bool


def _scope(options: SinkOptions, streaming: bool) -> TaskScope:
    """The task's transactional id: query (or job) and Spark partition; and its batch id."""
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None, "the sink's write runs in a Spark task"
    partition = context.partitionId()
    if streaming:
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            raise RuntimeError("no streaming query id or batch id in the task's local properties")
        prefix = options.transactional_id_prefix or f"{DEFAULT_PREFIX}-{query}"
        return TaskScope(f"{prefix}-{partition}", int(batch))
    app = context.getLocalProperty("spark.app.id") or "app"
    execution = context.getLocalProperty("spark.sql.execution.id") or f"stage{context.stageId()}"
    prefix = options.transactional_id_prefix or DEFAULT_PREFIX
    return TaskScope(f"{prefix}-{app}-{execution}-{partition}", 0)


def _write(options: SinkOptions, cols: Columns, batches: Iterator[Any], streaming: bool) -> KafkaCommitMessage:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else -1
    rows = records(batches, cols, options.topic)
    if options.exactly_once:
        result = write_exactly_once(options, _scope(options, streaming), rows)
    else:
        result = write_at_least_once(options, rows)
    return KafkaCommitMessage(partition, result.rows, result.skipped)


def _summary(messages: list[Any]) -> str:
    done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    return f"{sum(m.rows for m in done)} rows from {len(done)} tasks ({sum(m.skipped for m in done)} replays skipped)"


class KafkaBatchWriter(_BatchBase):  # type: ignore[misc,valid-type]
    def __init__(self, options: SinkOptions, cols: Columns) -> None:
        self.options = options
        self.cols = cols

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return _write(self.options, self.cols, iterator, streaming=False)

    def commit(self, messages: list[Any]) -> None:
        log.info("Kafka sink job committed: %s", _summary(messages))

    def abort(self, messages: list[Any]) -> None:
        """Committed tasks stay committed (Kafka has no job-wide transaction); see the module."""
        log.warning("Kafka sink job aborted after %s", _summary(messages))


class KafkaStreamWriter(_StreamBase):  # type: ignore[misc,valid-type]
    def __init__(self, options: SinkOptions, cols: Columns) -> None:
        self.options = options
        self.cols = cols

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return _write(self.options, self.cols, iterator, streaming=True)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - PySpark's name
        log.info("Kafka sink batch %d committed: %s", batchId, _summary(messages))

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        log.warning("Kafka sink batch %d aborted after %s", batchId, _summary(messages))

