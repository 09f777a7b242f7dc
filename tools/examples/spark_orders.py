"""Example pipeline: transactional orders in Kafka, read exactly-once by Spark into Parquet.

    python tools/examples/spark_orders.py produce --bootstrap localhost:9092 --topic orders --orders 1000
    python tools/examples/spark_orders.py batch   --bootstrap localhost:9092 --topic orders --out orders.parquet
    python tools/examples/spark_orders.py stream  --bootstrap localhost:9092 --topic orders \\
        --out orders-stream.parquet --checkpoint orders-ckpt [--available-now]

``produce`` writes JSON orders (``{"order_id", "customer", "amount_cents"}``, keyed by customer)
in transactions of ``--per-txn`` orders with confluent-kafka, aborting every ``--abort-every``-th
transaction (as a failing application would), and prints the committed order ids' count.
``batch`` reads the topic with ``spark.read.format("kafka")`` under ``read_committed`` and writes
the parsed orders to Parquet. ``stream`` does the same continuously with ``readStream`` (until
interrupted, or once through everything with ``--available-now``), resuming from its checkpoint.
Aborted orders never reach the Parquet files; each committed order is there exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

ORDER_SCHEMA = "order_id BIGINT, customer STRING, amount_cents BIGINT"


def produce(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    if args.topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(args.topic, args.partitions, 1)])[args.topic].result(30)
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": f"orders-{args.topic}",
                         "linger.ms": 5})
    producer.init_transactions(30)
    committed = 0
    for txn, start in enumerate(range(0, args.orders, args.per_txn)):
        producer.begin_transaction()
        ids = range(start, min(start + args.per_txn, args.orders))
        for order_id in ids:
            customer = f"customer-{order_id % 17}"
            order = {"order_id": order_id, "customer": customer, "amount_cents": 100 + order_id % 5000}
            producer.produce(args.topic, key=customer.encode(), value=json.dumps(order).encode())
        producer.flush(30)  # the records reach the log either way; the marker decides who sees them
        if args.abort_every and (txn + 1) % args.abort_every == 0:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += len(ids)
    print(json.dumps({"orders": args.orders, "committed": committed}))
    return 0


def session(app: str) -> Any:
    from pyspark.sql import SparkSession

    from rivven_kproto.spark import with_kafka_source

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]")).appName(app)
    spark = with_kafka_source(builder.config("spark.ui.enabled", "false")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def orders(df: Any) -> Any:
    """Kafka rows -> order columns, plus where each came from."""
    from pyspark.sql import functions as F  # noqa: N812

    parsed = F.from_json(F.col("value").cast("string"), ORDER_SCHEMA)
    return df.select(parsed.alias("o"), "partition", "offset").select("o.*", "partition", "offset")


def kafka_options(args: argparse.Namespace) -> dict[str, str]:
    return {"kafka.bootstrap.servers": args.bootstrap, "subscribe": args.topic,
            "kafka.isolation.level": "read_committed", "startingOffsets": "earliest"}


def batch(args: argparse.Namespace) -> int:
    spark = session("orders-batch")
    df = orders(spark.read.format("kafka").options(**kafka_options(args)).load())
    df.write.mode("overwrite").parquet(args.out)
    print(json.dumps({"written": spark.read.parquet(args.out).count()}))
    spark.stop()
    return 0


def stream(args: argparse.Namespace) -> int:
    spark = session("orders-stream")
    df = orders(spark.readStream.format("kafka").options(**kafka_options(args)).load())
    writer = df.writeStream.format("parquet").option("path", args.out).option("checkpointLocation", args.checkpoint)
    if args.available_now:
        try:
            query = writer.trigger(availableNow=True).start()
        except TypeError:  # PySpark without Trigger.AvailableNow for Python sources
            query = writer.trigger(once=True).start()
    else:
        query = writer.trigger(processingTime="2 seconds").start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    if query.exception() is not None:
        raise SystemExit(f"the streaming query failed: {query.exception()}")
    print(json.dumps({"written": spark.read.parquet(args.out).count()}))
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    for name in ("produce", "batch", "stream"):
        verb = verbs.add_parser(name)
        verb.add_argument("--bootstrap", default="localhost:9092")
        verb.add_argument("--topic", default="orders")
    verbs.choices["produce"].add_argument("--orders", type=int, default=1000)
    verbs.choices["produce"].add_argument("--per-txn", type=int, default=10)
    verbs.choices["produce"].add_argument("--abort-every", type=int, default=4)
    verbs.choices["produce"].add_argument("--partitions", type=int, default=3)
    verbs.choices["batch"].add_argument("--out", required=True)
    verbs.choices["stream"].add_argument("--out", required=True)
    verbs.choices["stream"].add_argument("--checkpoint", required=True)
    verbs.choices["stream"].add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    return {"produce": produce, "batch": batch, "stream": stream}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
