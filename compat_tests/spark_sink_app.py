"""A streaming driver for ``test_spark_sink.py``: Kafka source -> UDF -> Kafka sink, checkpointed.

    python spark_sink_app.py BOOTSTRAP SOURCE SINK CHECKPOINT EXACTLY_ONCE FAIL_VALUE

Reads SOURCE with ``format("kafka")`` (a few rows per micro-batch), maps each value through a
Python UDF and writes ``format("kafka")`` to SINK until everything available at start is written
(Trigger.AvailableNow), then exits 0. The test SIGKILLs this process group mid-stream and starts it
again on the same checkpoint; it also runs :func:`start` in its own session for the runs it does
not kill. The UDF raises on the first attempt of the task that sees FAIL_VALUE, so Spark retries
that task (``local[2,4]``: up to 4 attempts per task, as on a cluster).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

MASTER = "local[2,4]"  # Spark's default spark.task.maxFailures on a cluster


def start(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: str, exactly_once: str,
          fail_value: str) -> Any:
    """Start the query; returns the StreamingQuery."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F  # noqa: N812

    @F.udf("string")
    def transform(value: str) -> str:
        context = TaskContext.get()
        if value == fail_value and context is not None and context.attemptNumber() == 0:
            raise RuntimeError(f"first attempt of the task holding {fail_value} fails")
        return f"out-{value}"

    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "40").load())
    out = rows.select("key", transform(F.col("value").cast("string")).alias("value"))
    return (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
            .option("exactlyOnce", exactly_once).option("kafka.transaction.timeout.ms", "20000")
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def main() -> int:
    bootstrap, source, sink, checkpoint, exactly_once, fail_value = sys.argv[1:7]
    from pyspark.sql import SparkSession

    from rivven_kproto.spark import with_kafka_source

    builder = (SparkSession.builder.master(MASTER).appName("spark-sink-app")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.local.dir", str(Path(checkpoint).parent / "local")))
    spark = with_kafka_source(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    query = start(spark, bootstrap, source, sink, checkpoint, exactly_once, fail_value)
    query.awaitTermination()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main())
