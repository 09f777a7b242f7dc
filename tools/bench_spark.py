"""Spark throughput of the ``kafka_py`` source and sink: rows/s read by ``count()``, rows/s written.

Reads (``--mode read``): starts a broker (or uses ``--bootstrap``), writes N records of
``--value-size`` bytes with a transactional confluent-kafka producer (committed transactions of
``--txn-size`` records each), then times ``spark.read.format("kafka_py")...load().count()`` under
read_committed (and read_uncommitted) with a local[2] session. The goal is at least 0.5M rows/s.

Writes (``--mode write``): times ``df.write.format(...)`` of N rows (a string key, a
``--value-size`` byte value, ``--partitions`` Spark partitions and topic partitions) into a fresh
topic, at least once (the default) and with ``exactlyOnce=true``.

    python tools/bench_spark.py --records 1000000 [--mode read|write|both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def produce(bootstrap: str, topic: str, partitions: int, records: int, value_size: int, txn_size: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"bench-{topic}",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
    })
    producer.init_transactions(30)
    value = b"v" * value_size
    started = time.perf_counter()
    sent = 0
    while sent < records:
        producer.begin_transaction()
        for i in range(sent, min(records, sent + txn_size)):
            while True:
                try:
                    producer.produce(topic, value=value, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(120)
        sent = min(records, sent + txn_size)
    return time.perf_counter() - started


def bench_writes(spark: Any, bootstrap: str, topic: str, args: argparse.Namespace) -> None:
    """Rows/s of ``df.write.format(args.format)``, at least once and exactly once, into fresh topics."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def write(name: str, rows: int, exactly_once: bool) -> float:
        admin.create_topics([NewTopic(name, args.partitions, 1)])[name].result(30)
        df = spark.range(0, rows, numPartitions=args.partitions).selectExpr(
            "CAST(id AS STRING) AS key", f"concat(CAST(id AS STRING), repeat('v', {args.value_size})) AS value")
        started = time.perf_counter()
        (df.write.format(args.format).mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", name).option("exactlyOnce", str(exactly_once).lower()).save())
        return time.perf_counter() - started

    write(f"{topic}-write-warmup", 1000, True)  # starts the Python workers
    for exactly_once in (False, True):
        mode = "exactly once" if exactly_once else "at least once"
        times = []
        for run in range(args.repeat):
            elapsed = write(f"{topic}-write-{int(exactly_once)}-{run}", args.records, exactly_once)
            times.append(elapsed)
            print(f"  {args.format} write {mode:13} {args.records:,} rows in {elapsed:.2f}s "
                  f"({args.records / elapsed:,.0f} rows/s)")
        print(f"{args.format} write {mode}: best {args.records / min(times):,.0f} rows/s, median "
              f"{args.records / statistics.median(times):,.0f} rows/s ({args.records:,} x ~{args.value_size} B, "
              f"{args.partitions} partitions, local[2])")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--txn-size", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--format", default="kafka_py", help="kafka_py, or kafka (through the Java shim)")
    parser.add_argument("--mode", choices=("read", "write", "both"), default="both")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, str(REPO))
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        from compat_tests.broker_process import BrokerProcess

        base = Path(tempfile.mkdtemp(prefix="bench-spark-"))
        broker = BrokerProcess(base / "data", base / "broker.log", ["--fsync", "never"]).start()
        bootstrap = broker.bootstrap
    try:
        topic = f"bench-{int(time.time())}"
        if args.mode != "write":
            took = produce(bootstrap, topic, args.partitions, args.records, args.value_size, args.txn_size)
            print(f"produced {args.records:,} x {args.value_size} B in {took:.1f}s ({args.records / took:,.0f} rows/s)")

        from pyspark.sql import SparkSession

        from rivven_kproto.spark import register, with_kafka_source

        builder = SparkSession.builder.master("local[2]").appName("bench_spark")
        builder = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        spark = with_kafka_source(builder).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        if args.mode != "read":
            bench_writes(spark, bootstrap, topic, args)
        if args.mode == "write":
            spark.stop()
            return

        def count(topic_name: str, level: str) -> tuple[int, float]:
            started = time.perf_counter()
            df = (spark.read.format(args.format)
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic_name)
                  .option("kafka.isolation.level", level)
                  .load())
            rows = df.count()  # a fresh DataFrame each time: planning is part of the cost
            return rows, time.perf_counter() - started

        # Warm up: the first query of a session starts Spark's Python workers and JIT-compiles.
        warm = f"{topic}-warmup"
        produce(bootstrap, warm, args.partitions, 1000, args.value_size, 1000)
        for level in ("read_committed", "read_uncommitted"):
            count(warm, level)
        for level in ("read_committed", "read_uncommitted"):
            times = []
            for _ in range(args.repeat):
                rows, elapsed = count(topic, level)
                assert rows == args.records, (rows, args.records)
                times.append(elapsed)
                print(f"  {args.format} {level:16} count()={rows:,} in {elapsed:.2f}s ({rows / elapsed:,.0f} rows/s)")
            best, median = min(times), statistics.median(times)
            print(f"{args.format} {level}: best {args.records / best:,.0f} rows/s, median "
                  f"{args.records / median:,.0f} rows/s ({args.records:,} x {args.value_size} B, "
                  f"{args.partitions} partitions, local[2])")
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
