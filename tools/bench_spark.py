"""Spark read throughput of the ``kafka_py`` source: rows/s for ``count()`` over committed records.

Starts a broker (or uses ``--bootstrap``), writes N records of ``--value-size`` bytes with a
transactional confluent-kafka producer (committed transactions of ``--txn-size`` records each),
then times ``spark.read.format("kafka_py")...load().count()`` under read_committed (and
read_uncommitted) with a local[2] session. The goal is at least 0.5M rows/s.

    python tools/bench_spark.py --records 1000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--txn-size", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--format", default="kafka_py", help="kafka_py, or kafka (through the Java shim)")
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
        took = produce(bootstrap, topic, args.partitions, args.records, args.value_size, args.txn_size)
        print(f"produced {args.records:,} x {args.value_size} B in {took:.1f}s ({args.records / took:,.0f} rows/s)")

        from pyspark.sql import SparkSession

        from rivven_kproto.spark import register, with_kafka_source

        builder = SparkSession.builder.master("local[2]").appName("bench_spark")
        builder = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        spark = with_kafka_source(builder).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
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
