"""PySpark (real local[2]) writing to a real broker through the Kafka sink, ``format("kafka")``.

A batch write of 1M rows is read back row-exact (every row's key, value and partition checked by
aggregations in Spark: a missing, duplicated, altered or misplaced row fails it); headers, nulls,
binary and string columns, explicit partitions and every codec survive the trip; the topic
column and the overriding ``topic`` option go where Spark's connector sends them; schema and
option errors carry the connector's messages.

Streaming: a driver process (``spark_sink_app.py``) runs Kafka source -> UDF -> Kafka sink with a
checkpoint. Its first run writes what is there and exits; the test then leaves the checkpoint as
a driver leaves it when it dies after a batch's tasks committed but before Spark's commit log
recorded the batch (the last commit-log entry removed: a SIGKILL cannot be aimed at that
moment deterministically), adds the rest of the input and restarts the driver, which replays that
batch; it is SIGKILLed mid-stream twice and restarted each time, then finishes. The UDF fails the
first attempt of one task. With ``exactlyOnce=true`` a read_committed reader sees every input row
exactly once; without it (same scenario, no SIGKILLs) the replayed batch's rows are there twice:
the duplicates at-least-once allows.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from rivven_kproto.client.producer import partition_for_key
from rivven_kproto.codec.enums import LATEST, READ_COMMITTED, READ_UNCOMMITTED
from rivven_kproto.spark.wire import Cluster

from .broker_process import BrokerProcess
from .matrix.fixtures import stored_batches
from .spark_sink_app import MASTER, start
from .test_spark import REPO_ROOT, TIMEOUT_S, _literal, create_topic, rows_of, spark_session

BATCH_ROWS = 1_000_000  # at least once; exactly once writes BATCH_ROWS // 5
BATCH_PARTITIONS = 4
# Row ``id``'s key and value. Keys repeat (every key is on many rows, which must share the key's
# partition) and every 7th row has none; the value names the row.
BATCH_KEY = "CASE WHEN id % 7 = 0 THEN NULL ELSE concat('k', id % 10007) END"
BATCH_VALUE = "concat('value-', id, repeat('x', CAST(id % 13 AS INT)))"
STREAM_ROWS = 400  # 10 micro-batches of maxOffsetsPerTrigger=40 (spark_sink_app.py)
FIRST_RUN_ROWS = 120  # the first run's 3 batches
KILLS = 2
APP = Path(__file__).with_name("spark_sink_app.py")
APP_TIMEOUT_S = 300
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Up to 4 attempts per task, as on a cluster: the streaming runs in this session retry a task.
    session = spark_session(MASTER, "rivven-kproto-sink", {
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.local.dir": str(tmp_path_factory.mktemp("spark-sink-local")),
    })
    yield session
    session.stop()


def write(df: Any, broker: BrokerProcess, fmt: str = "kafka", **options: str) -> None:
    writer = df.write.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def read(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("includeHeaders", "true")
              .option("kafka.isolation.level", "read_committed"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


# --- batch -----------------------------------------------------------------------------------------


def batch_frame(spark: Any, rows: int) -> Any:
    """Rows 0..rows-1 as (key, value), in BATCH_PARTITIONS Spark partitions (no shuffle)."""
    return spark.range(0, rows, numPartitions=BATCH_PARTITIONS).selectExpr(
        f"{BATCH_KEY} AS key", f"{BATCH_VALUE} AS value")


def row_exact_report(stored: Any, variant: str = "0 AS variant") -> dict[Any, tuple[int, ...]]:
    """Per ``variant`` (a column expression; one group by default) of ``stored`` (Kafka rows: binary
    key and value, partition): (rows, distinct row ids, smallest id, largest id, rows whose key or
    value is not their id's, (key, partition) pairs that murmur2 does not place so).

    For rows 0..n-1 of :func:`batch_frame`, each once and in its key's partition, this is exactly
    ``expected_report(n)``: a missing row lowers the count, a duplicate raises it, a duplicate with
    another row missing lowers the distinct ids, an altered row is counted as not its id's, a row in
    another partition than its key's adds a misplaced pair. Two Spark jobs, however many rows."""
    from pyspark.sql import functions as F  # noqa: N812

    strings = stored.selectExpr(variant, "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                                "partition")
    numbered = strings.selectExpr("*", "CAST(regexp_extract(value, '^value-([0-9]+)', 1) AS BIGINT) AS id")
    summaries = numbered.groupBy("variant").agg(
        F.count(F.lit(1)), F.countDistinct("id"), F.min("id"), F.max("id"),
        F.expr(f"count_if(NOT (key <=> {BATCH_KEY}) OR NOT (value <=> {BATCH_VALUE}))")).collect()
    # Keys are hashed as the Java client hashes them (murmur2): one key, one partition.
    pairs = strings.where("key IS NOT NULL").select("variant", "key", "partition").distinct().collect()
    misplaced = collections.Counter(
        r.variant for r in pairs if partition_for_key(r.key.encode(), BATCH_PARTITIONS) != r.partition)
    return {r[0]: (*r[1:], misplaced[r[0]]) for r in summaries}


def expected_report(rows: int) -> tuple[int, ...]:
    return (rows, rows, 0, rows - 1, 0, 0)


def test_row_exact_check_fails_on_a_missing_or_duplicated_row(spark) -> None:  # noqa: ANN001
    """The check of the 1M-row test holds for exactly the rows written, and only for them."""
    placed = spark.createDataFrame(  # 50 rows as the producer places them (murmur2 of the key)
        [(r.key, r.value, 0 if r.key is None else partition_for_key(r.key.encode(), BATCH_PARTITIONS))
         for r in batch_frame(spark, 50).collect()], "key string, value string, partition int",
    ).selectExpr("CAST(key AS BINARY) AS key", "CAST(value AS BINARY) AS value", "partition")
    missing = placed.where("CAST(value AS STRING) != 'value-3xxx'")
    again = placed.where("CAST(value AS STRING) = 'value-5xxxxx'")
    variants = {
        "exact": placed,
        "missing": missing,
        "duplicated": placed.union(again),
        "missing and duplicated": missing.union(again),
        "misplaced": placed.selectExpr("key", "value", f"(partition + 1) % {BATCH_PARTITIONS} AS partition"),
        "altered": placed.selectExpr("key", "CAST(concat(CAST(value AS STRING), '!') AS BINARY) AS value",
                                     "partition"),
    }
    frames = [frame.selectExpr(f"'{name}' AS variant", "*") for name, frame in variants.items()]
    all_variants = frames[0]
    for frame in frames[1:]:
        all_variants = all_variants.union(frame)
    report = row_exact_report(all_variants.coalesce(1), "variant")  # few small tasks
    assert sorted(report) == sorted(variants)
    assert [name for name, got in report.items() if got == expected_report(50)] == ["exact"], report


@pytest.mark.slow
@pytest.mark.parametrize("exactly_once", ["false", "true"])
def test_batch_write_reads_back_row_exact(spark, broker, topic_name, exactly_once) -> None:  # noqa: ANN001
    create_topic(broker, topic_name, BATCH_PARTITIONS)
    rows = BATCH_ROWS if exactly_once == "false" else BATCH_ROWS // 5
    write(batch_frame(spark, rows), broker, topic=topic_name, exactlyOnce=exactly_once)
    assert row_exact_report(read(spark, broker, topic_name)) == {0: expected_report(rows)}


def tricky_rows() -> list[tuple[Any, ...]]:
    """(key, value, partition, headers): nulls, empty bytes, binary, repeated and null headers."""
    return [
        (None, b"v0", 0, [("a", b"1"), ("b", None), ("a", b"2")]),
        (b"k1", None, 1, []),
        (b"", b"", 2, None),
        (b"\x00\xffk", b"\x00bin\xff", 0, [("empty", b"")]),
        (None, None, 1, [("only", None)]),
        (b"k5", b"v5", 2, [("h", b"x" * 300)]),
    ]


def tricky_frame(spark: Any) -> Any:
    schema = ("key binary, value binary, partition int, "
              "headers array<struct<key: string, value: binary>>")
    return spark.createDataFrame(tricky_rows(), schema).coalesce(1)


def read_back(spark: Any, broker: BrokerProcess, topic: str) -> list[tuple[Any, ...]]:
    """(key, value, partition, headers) in offset order within each partition."""
    got = rows_of(read(spark, broker, topic))
    return [(key, value, partition, list(headers)) for partition, _o, key, value, _ms, headers in got]


def expected_order() -> list[tuple[Any, ...]]:
    rows = [(k, v, p, list(h or [])) for k, v, p, h in tricky_rows()]
    return sorted(rows, key=lambda r: r[2])  # stable: per partition in written order


@pytest.mark.parametrize("codec", CODECS)
def test_headers_nulls_partitions_and_codecs(spark, broker, topic_name, codec) -> None:  # noqa: ANN001
    create_topic(broker, topic_name, 3)
    write(tricky_frame(spark), broker, "kafka_py", topic=topic_name, **{"kafka.compression.type": codec})
    assert read_back(spark, broker, topic_name) == expected_order()
    batches = [b for p in range(3) for b in stored_batches(broker.bootstrap, topic_name, p).data_batches]
    # librdkafka sends a batch uncompressed when compressing does not make it smaller.
    found = {b.compression.name.lower() for b in batches}
    assert codec in found and found <= {codec, "none"}, found
    assert len({b.producer_id for b in batches}) == 1 and -1 not in {b.producer_id for b in batches}, \
        "at least once uses the idempotent producer"


def test_exactly_once_batch_is_transactional(spark, broker, topic_name) -> None:  # noqa: ANN001
    create_topic(broker, topic_name, 3)
    write(tricky_frame(spark), broker, topic=topic_name, exactlyOnce="true")
    assert read_back(spark, broker, topic_name) == expected_order()
    stored = [stored_batches(broker.bootstrap, topic_name, p) for p in range(3)]
    assert all(b.is_transactional for s in stored for b in s.data_batches)
    assert [kind for s in stored for _o, kind in s.markers()] == ["COMMIT"] * 3


def test_string_columns_topic_column_and_topic_option(spark, broker, topic_name) -> None:  # noqa: ANN001
    first, second, override = (f"{topic_name}-{n}" for n in ("a", "b", "o"))
    for topic in (first, second, override):
        create_topic(broker, topic, 1)
    df = spark.createDataFrame([(first, "k1", "v1"), (second, "k2", "v2"), (first, None, "v3")],
                               "topic string, key string, value string").coalesce(1)
    write(df, broker)
    assert [(r[2], r[3]) for r in rows_of(read(spark, broker, first))] == [(b"k1", b"v1"), (None, b"v3")]
    assert [(r[2], r[3]) for r in rows_of(read(spark, broker, second))] == [(b"k2", b"v2")]
    write(df, broker, topic=override)  # the option overrides the column, as in Spark's connector
    assert [r[3] for r in rows_of(read(spark, broker, override))] == [b"v1", b"v2", b"v3"]
    assert len(rows_of(read(spark, broker, first))) == 2


def test_default_save_mode_appends_as_spark_connector_does(spark, broker, topic_name) -> None:  # noqa: ANN001
    """``df.write.format("kafka").save()`` as Spark's documentation writes it, without ``mode``:
    Spark's connector takes the default ErrorIfExists as append (#41 item 5: it failed with
    UNSUPPORTED_DATA_SOURCE_SAVE_MODE). ``kafka_py``, Spark's own Python data source path, still
    needs ``mode("append")``."""
    create_topic(broker, topic_name, 1)
    df = spark.createDataFrame([("v1",), ("v2",)], "value string").coalesce(1)
    writer = df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic_name)
    writer.save()
    writer.mode("errorifexists").save()
    assert [r[3] for r in rows_of(read(spark, broker, topic_name))] == [b"v1", b"v2", b"v1", b"v2"]


@pytest.mark.parametrize(
    ("select", "options", "message"),
    [
        (["value"], {}, "topic option required when no 'topic' attribute is present. Use the topic option "
                        "for setting a topic."),
        (["'t' AS topic", "value AS key"], {}, "Required attribute 'value' not found"),
        (["1 AS topic", "value"], {}, "topic attribute unsupported type int. topic must be a(n) string"),
        (["CAST(1 AS INT) AS value"], {"topic": "t"}, "value attribute unsupported type int. value must be a(n) "
                                                      "string or binary"),
        (["1.5 AS key", "value"], {"topic": "t"}, "key must be a(n) string or binary"),
        (["value", "'1' AS partition"], {"topic": "t"}, "partition attribute unsupported type string. "
                                                        "partition must be a(n) int"),
        (["value", "array('x') AS headers"], {"topic": "t"}, "headers must be a(n) "
                                                             "array<struct<key:string,value:binary>>"),
        (["value"], {"topic": "t", "kafka.key.serializer": "x"},
         "Kafka option 'key.serializer' is not supported as keys are serialized with ByteArraySerializer."),
        (["CAST(NULL AS STRING) AS topic", "value"], {}, "null topic present in the data. Use the topic option "
                                                         "for setting a topic."),
    ],
)
def test_spark_error_messages(spark, broker, select, options, message) -> None:  # noqa: ANN001
    df = spark.range(1).selectExpr("CAST(id AS STRING) AS value").selectExpr(*select)
    for fmt in ("kafka", "kafka_py"):
        with pytest.raises(Exception, match=_literal(message)):
            write(df, broker, fmt, **options)


def test_missing_bootstrap(spark) -> None:  # noqa: ANN001
    df = spark.range(1).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="Missing required configuration \"bootstrap.servers\""):
        df.write.format("kafka").option("topic", "t").mode("append").save()


# --- streaming -------------------------------------------------------------------------------------


def produce_input(broker: BrokerProcess, topic: str, rows: range, placed: dict[tuple[int, int], bytes]) -> None:
    """Rows ``row-<i>`` alternating over 2 partitions; records (partition, offset) -> value."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        placed[(msg.partition(), msg.offset())] = msg.value()

    for i in rows:
        producer.produce(topic, key=f"k{i}".encode(), value=f"row-{i}".encode(), partition=i % 2,
                         on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S) == 0 and len(placed) == rows.stop


class Driver:
    """The streaming app as its own process group (the driver, its JVM and Python workers)."""

    def __init__(self, broker: BrokerProcess, source: str, sink: str, workdir: Path, exactly_once: str) -> None:
        self.args = [sys.executable, str(APP), broker.bootstrap, source, sink, str(workdir / "checkpoint"),
                     exactly_once, "row-7"]
        self.workdir = workdir
        self.env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                    "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))}
        self.runs = 0

    def start(self) -> subprocess.Popen[bytes]:
        self.runs += 1
        log = (self.workdir / f"driver-{self.runs}.log").open("wb")
        return subprocess.Popen(self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def run_here(self, spark: Any) -> None:
        """A run in the test's own session (one that is not killed): no JVM to start."""
        query = start(spark, *self.args[2:])
        try:
            assert query.awaitTermination(APP_TIMEOUT_S), "the streaming query did not finish"
        finally:
            query.stop()
        assert query.exception() is None, query.exception()

    def committed_batches(self) -> list[int]:
        commits = self.workdir / "checkpoint" / "commits"
        return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else []

    def kill_after(self, process: subprocess.Popen[bytes], more_batches: int) -> None:
        """SIGKILL the whole group once ``more_batches`` further batches are committed."""
        target = len(self.committed_batches()) + more_batches
        deadline = time.monotonic() + APP_TIMEOUT_S
        while len(self.committed_batches()) < target and process.poll() is None:
            assert time.monotonic() < deadline, "the streaming query made no progress"
            time.sleep(0.05)
        assert process.poll() is None, "the driver finished before it could be killed mid-stream"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(TIMEOUT_S)

    def forget_last_commit(self) -> int:
        """The checkpoint a driver leaves when it dies after the batch's tasks committed and before
        Spark's commit log recorded it: that batch's commit-log entry is missing."""
        last = self.committed_batches()[-1]
        commits = self.workdir / "checkpoint" / "commits"
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)
        return last


def batch_inputs(checkpoint: Path, batch: int, placed: dict[tuple[int, int], bytes]) -> list[bytes]:
    """The input values of one micro-batch, from Spark's offset log (Spark's Kafka offsets JSON)."""

    def offsets(n: int) -> dict[int, int]:
        if n < 0:
            return {0: 0, 1: 0}
        (topic_offsets,) = json.loads((checkpoint / "offsets" / str(n)).read_text().splitlines()[-1]).values()
        return {int(p): o for p, o in topic_offsets.items()}

    start, end = offsets(batch - 1), offsets(batch)
    return sorted(v for (p, o), v in placed.items() if start.get(p, 0) <= o < end[p])


def stable_output(broker: BrokerProcess, topic: str) -> None:
    """Wait until no transaction is open on the output (a killed driver's open transaction is
    aborted by the next attempt's fencing, or after the app's 20 s transaction timeout)."""
    deadline = time.monotonic() + 120
    with Cluster(broker.bootstrap) as cluster:
        while True:
            wanted = {(topic, p): LATEST for p in range(2)}
            stable = cluster.list_offsets(wanted, READ_COMMITTED)
            end = cluster.list_offsets(wanted, READ_UNCOMMITTED)
            if all(stable[tp].offset == end[tp].offset for tp in wanted):
                return
            assert time.monotonic() < deadline, "a transaction stayed open on the output topic"
            time.sleep(0.2)


def run_killed_and_replayed(spark: Any, broker: BrokerProcess, tmp_path: Path, topic: str, exactly_once: str,
                            kills: int) -> tuple[collections.Counter[bytes], list[bytes], list[bytes]]:
    """Output value counts (read_committed), the expected output values, and the replayed batch's.

    The first run finishes what is there (3 micro-batches) and loses its last commit-log entry;
    the next runs replay that batch, go on with the rest of the input and are SIGKILLed after two
    further batches, ``kills`` times (driver processes of their own); the last run finishes. The
    runs that are not killed run in the test's session.
    """
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic(broker, source, 2)
    create_topic(broker, sink, 2)
    placed: dict[tuple[int, int], bytes] = {}
    produce_input(broker, source, range(FIRST_RUN_ROWS), placed)
    driver = Driver(broker, source, sink, tmp_path, exactly_once)
    driver.run_here(spark)
    replayed = driver.forget_last_commit()
    produce_input(broker, source, range(FIRST_RUN_ROWS, STREAM_ROWS), placed)
    for _ in range(kills):
        driver.kill_after(driver.start(), 2)
    driver.run_here(spark)
    assert (tmp_path / "checkpoint" / "commits" / str(replayed)).exists(), "Spark ran the forgotten batch again"
    stable_output(broker, sink)
    out = read(spark, broker, sink).selectExpr("value").collect()
    counts = collections.Counter(bytes(r.value) for r in out)
    expected = [b"out-" + v for v in placed.values()]
    replay_rows = [b"out-" + v for v in batch_inputs(tmp_path / "checkpoint", replayed, placed)]
    assert replay_rows, "the replayed batch had rows"
    return counts, expected, replay_rows


@pytest.mark.slow
def test_streaming_exactly_once_across_driver_kills_and_replays(spark, broker, topic_name, tmp_path) -> None:  # noqa: ANN001
    counts, expected, _ = run_killed_and_replayed(spark, broker, tmp_path, topic_name, "true", KILLS)
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    assert not duplicated, f"{len(duplicated)} rows written more than once, e.g. {duplicated[:5]}"
    assert sorted(counts) == sorted(expected)


@pytest.mark.slow
def test_streaming_at_least_once_shows_the_replay_duplicates(spark, broker, topic_name, tmp_path) -> None:  # noqa: ANN001
    counts, expected, replay_rows = run_killed_and_replayed(spark, broker, tmp_path, topic_name, "false", 0)
    assert set(counts) == set(expected), "at least once: every row, nothing else"
    assert all(counts[v] >= 2 for v in replay_rows), "the replayed batch was written twice"
