"""Read a topic with literal ``format("kafka")`` (our shim) on whatever PySpark runs this script.

    python spark_minor_app.py BOOTSTRAP TOPIC WORKDIR OUT_JSON

Run by ``test_spark_minors.py`` with the interpreter of a virtualenv holding one Spark minor
version, because the shim extends Spark-internal API (``PythonDataSourceV2``) that may move
between minors. Writes to OUT_JSON the Spark version, the rows of a batch read_committed read and
the rows a streaming read_committed query wrote to Parquet (Trigger.AvailableNow, or Trigger.Once
where PySpark lacks AvailableNow for Python sources).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def rows(df: Any) -> list[list[Any]]:
    from pyspark.sql import functions as F  # noqa: N812

    def hex_or_none(data: Any) -> str | None:
        return None if data is None else bytes(data).hex()

    picked = df.select("partition", "offset", "key", "value", F.expr("unix_millis(timestamp)").alias("ms"), "headers")
    return sorted(
        [r["partition"], r["offset"], hex_or_none(r["key"]), hex_or_none(r["value"]), r["ms"],
         [[h["key"], hex_or_none(h["value"])] for h in r["headers"]]]
        for r in picked.collect()
    )


def main() -> int:
    bootstrap, topic, workdir, out = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    import pyspark
    from pyspark.sql import SparkSession

    from rivven_kproto.spark import with_kafka_source

    builder = (SparkSession.builder.master("local[2]").appName("spark-minor")
               .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
               .config("spark.local.dir", str(workdir / "local")))
    spark = with_kafka_source(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "includeHeaders": "true",
               "kafka.isolation.level": "read_committed"}
    batch = spark.read.format("kafka").options(**options).load()
    result: dict[str, Any] = {"spark": pyspark.__version__, "partitions": batch.rdd.getNumPartitions(),
                              "batch": rows(batch)}
    stream = spark.readStream.format("kafka").options(**options).option("startingOffsets", "earliest").load()
    writer = (stream.writeStream.format("parquet").option("path", str(workdir / "sink"))
              .option("checkpointLocation", str(workdir / "checkpoint")))
    try:
        query = writer.trigger(availableNow=True).start()
        result["trigger"] = "availableNow"
    except TypeError:
        query = writer.trigger(once=True).start()
        result["trigger"] = "once"
    if not query.awaitTermination(180):
        query.stop()
        raise SystemExit("the streaming query did not finish in 180 s")
    if query.exception() is not None:
        raise SystemExit(f"the streaming query failed: {query.exception()}")
    result["stream"] = rows(spark.read.parquet(str(workdir / "sink")))
    spark.stop()
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
