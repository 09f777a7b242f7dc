"""PySpark (real local[2] session) reading a real broker through ``kafka_py`` and ``format("kafka")``.

One topic is filled by confluent-kafka with committed and aborted transactions, plain writes
interleaved with both, and a transaction still open at the end. Batch reads must return exactly
what Kafka's read_committed consumer sees (committed + plain records below the last stable offset)
or, under read_uncommitted, everything, with Spark's Kafka schema and one Spark partition per
topic-partition (more with minPartitions). Streaming runs to a Parquet sink with a checkpoint,
is stopped, sees more committed/aborted transactions, restarts and must end with every committed
record exactly once. Option errors carry the messages of Spark's own Kafka connector.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# No skips: the tox env installs the ``spark`` extra and .ci/run a JDK; a missing one is a failure.
import pyarrow  # noqa: E402, F401
import pyspark  # noqa: E402, F401
import pytest

assert shutil.which("java") is not None, "PySpark needs a Java runtime (.ci/run installs openjdk-17)"

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .broker_process import BrokerProcess, server_certificate  # noqa: E402

TIMEOUT_S = 60
PARTITIONS = 4
# Recent timestamps: time-based retention (7 days by default) must not delete the test's segments.
BASE_TS = int(time.time()) * 1000 - 3_600_000
# The checkout, not where rivven_kproto was imported from: under tox the package comes from the
# wheel in site-packages (the pytest11 plugin imports it before pytest adds the rootdir).
REPO_ROOT = str(Path(__file__).resolve().parents[1])

Row = tuple[int, int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def spark_session(master: str, app: str, config: dict[str, str]) -> Any:
    """A session with the shim jar whose Python workers run this interpreter and find
    ``pyspark_kafka_py`` (auto-registration); executors inherit the environment."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, *paths])
    from pyspark.sql import SparkSession

    from rivven_kproto.spark import with_kafka_source

    builder = (SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in config.items():
        builder = builder.config(key, value)
    session = with_kafka_source(builder).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    session = spark_session("local[2]", "rivven-kproto-compat", {
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
    })
    yield session
    session.stop()


# --- writing ---------------------------------------------------------------------------------------


@dataclass
class Written:
    """What was written, by kind, with the (partition, offset) the broker assigned."""

    committed: list[Row] = field(default_factory=list)
    aborted: list[Row] = field(default_factory=list)
    plain: list[Row] = field(default_factory=list)
    open: list[Row] = field(default_factory=list)


class Writer:
    def __init__(self, broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> None:
        self.broker = broker
        self.topic = topic
        self.partitions = partitions
        self.counter = 0
        self.plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})

    def transactional(self, name: str) -> Producer:
        # The broker's maximum transaction timeout: a deliberately open transaction must stay open
        # for the whole module, however slow the machine (the default 60 s did not).
        producer = Producer({"bootstrap.servers": self.broker.bootstrap, "transactional.id": f"{self.topic}-{name}",
                             "linger.ms": 1, "transaction.timeout.ms": 900_000})
        producer.init_transactions(TIMEOUT_S)
        return producer

    def send(self, producer: Producer, out: list[Row], count: int, *, headers: bool = True) -> None:
        """Produce ``count`` records round-robin over partitions and wait until each has its offset."""
        delivered: list[Row] = []
        errors: list[str] = []
        for _ in range(count):
            i = self.counter
            self.counter += 1
            key = None if i % 5 == 0 else f"k{i}".encode()
            value = None if i % 11 == 0 else f"value-{i}".encode() * (1 + i % 3)
            hdrs = (("i", str(i).encode()), ("none", None)) if headers and i % 2 else ()
            timestamp = BASE_TS + i

            def on_delivery(err, msg, key=key, value=value, hdrs=hdrs, timestamp=timestamp) -> None:  # noqa: ANN001
                if err is not None:
                    errors.append(str(err))
                else:
                    delivered.append((msg.partition(), msg.offset(), key, value, timestamp, hdrs))

            producer.produce(self.topic, key=key, value=value, partition=i % self.partitions, timestamp=timestamp,
                             headers=list(hdrs) or None, on_delivery=on_delivery)
        assert producer.flush(TIMEOUT_S) == 0
        assert errors == [] and len(delivered) == count
        out.extend(delivered)


def create_topic(broker: BrokerProcess, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


def fill(broker: BrokerProcess, topic: str) -> Written:
    """Committed, aborted, interleaved plain writes, and a transaction left open at the end."""
    create_topic(broker, topic, PARTITIONS)
    writer = Writer(broker, topic)
    written = Written()
    a, b, c = writer.transactional("a"), writer.transactional("b"), writer.transactional("c")
    writer.send(writer.plain, written.plain, 8)
    a.begin_transaction()
    b.begin_transaction()
    writer.send(a, written.committed, 12)
    writer.send(writer.plain, written.plain, 6)  # inside both open transactions
    writer.send(b, written.aborted, 10)
    writer.send(a, written.committed, 8)
    a.commit_transaction(TIMEOUT_S)
    writer.send(writer.plain, written.plain, 4)  # b still open
    b.abort_transaction(TIMEOUT_S)
    a.begin_transaction()
    writer.send(a, written.committed, 16)
    a.commit_transaction(TIMEOUT_S)
    b.begin_transaction()
    writer.send(b, written.aborted, 4)
    b.abort_transaction(TIMEOUT_S)
    writer.send(writer.plain, written.plain, 4)
    c.begin_transaction()
    writer.send(c, written.open, 8)  # never committed: the last stable offset stays at its start
    writer.send(writer.plain, written.plain, 4)  # after the open transaction: beyond the LSO
    return written


def last_stable_offsets(written: Written) -> dict[int, int]:
    """Per partition: the first offset of the open transaction (everything is stable below it)."""
    return {p: min(r[1] for r in written.open if r[0] == p) for p in range(PARTITIONS)}


# --- reading ---------------------------------------------------------------------------------------


def rows_of(df: object) -> list[Row]:
    from pyspark.sql import functions as F  # noqa: N812

    picked = df.select(  # type: ignore[attr-defined]
        "partition", "offset", "key", "value", F.expr("unix_millis(timestamp)").alias("ms"), "headers"
    )
    out = []
    for r in picked.collect():
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
        key = None if r["key"] is None else bytes(r["key"])
        value = None if r["value"] is None else bytes(r["value"])
        out.append((r["partition"], r["offset"], key, value, r["ms"], headers))
    return sorted(out)


def reader(spark: object, broker: BrokerProcess, fmt: str = "kafka_py", **options: str) -> object:
    df = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)  # type: ignore[attr-defined]
    for key, value in options.items():
        df = df.option(key, value)
    return df


@pytest.fixture(scope="module")
def filled(broker: BrokerProcess) -> tuple[str, Written]:
    topic = f"spark-batch-{int(time.time() * 1000) % 10**8}"
    return topic, fill(broker, topic)


def test_read_committed_is_exactly_committed_and_plain_below_lso(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    lso = last_stable_offsets(written)
    df = reader(spark, broker, subscribe=topic, includeHeaders="true", **{"kafka.isolation.level": "read_committed"}).load()
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert df.rdd.getNumPartitions() == PARTITIONS
    expected = sorted(r for r in written.committed + written.plain if r[1] < lso[r[0]])
    hidden_plain = [r for r in written.plain if r[1] >= lso[r[0]]]
    assert hidden_plain, "the scenario writes plain records after the open transaction"
    assert rows_of(df) == expected
    assert {r.topic for r in df.select("topic").distinct().collect()} == {topic}
    assert {r.timestampType for r in df.select("timestampType").distinct().collect()} == {0}


def test_read_uncommitted_is_everything(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    df = reader(spark, broker, subscribe=topic, includeHeaders="true").load()
    everything = written.committed + written.aborted + written.plain + written.open
    assert rows_of(df) == sorted(everything)
    assert df.rdd.getNumPartitions() == PARTITIONS


def test_min_partitions_splits_ranges_and_still_reads_exactly(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    lso = last_stable_offsets(written)
    df = reader(spark, broker, subscribe=topic, includeHeaders="true", minPartitions="8",
                **{"kafka.isolation.level": "read_committed"}).load()
    assert df.rdd.getNumPartitions() == 8  # splits start inside aborted and open transactions
    assert rows_of(df) == sorted(r for r in written.committed + written.plain if r[1] < lso[r[0]])


def test_max_records_per_partition(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    everything = written.committed + written.aborted + written.plain + written.open
    df = reader(spark, broker, subscribe=topic, includeHeaders="true", maxRecordsPerPartition="10").load()
    # Offsets also count transaction markers: the log end of each partition is its size.
    sizes = [max(r[1] for r in everything if r[0] == p) + 1 for p in range(PARTITIONS)]
    assert df.rdd.getNumPartitions() == sum(-(-size // 10) for size in sizes)
    assert rows_of(df) == sorted(everything)


def test_assign_with_offset_json_and_pattern(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    lso = last_stable_offsets(written)
    committed = {"kafka.isolation.level": "read_committed"}
    df = reader(spark, broker, assign=json.dumps({topic: [1, 3]}), includeHeaders="true",
                startingOffsets=json.dumps({topic: {"1": 5, "3": -2}}),
                endingOffsets=json.dumps({topic: {"1": -1, "3": 20}}), **committed).load()
    assert df.rdd.getNumPartitions() == 2
    expected = sorted(
        r for r in written.committed + written.plain
        if (r[0] == 1 and 5 <= r[1] < lso[1]) or (r[0] == 3 and r[1] < 20)
    )
    assert rows_of(df) == expected
    pattern = reader(spark, broker, subscribePattern=topic.replace("batch", "b.tch"), includeHeaders="true",
                     **committed).load()
    assert rows_of(pattern) == sorted(r for r in written.committed + written.plain if r[1] < lso[r[0]])


def test_starting_timestamp(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    everything = written.committed + written.aborted + written.plain + written.open
    cut = BASE_TS + 30
    df = reader(spark, broker, subscribe=topic, includeHeaders="true", startingTimestamp=str(cut)).load()
    # Timestamps grow with offsets in every partition, so the first record at or after ``cut``
    # starts each partition's range.
    assert rows_of(df) == sorted(r for r in everything if r[4] >= cut)


def test_literal_kafka_format_through_the_shim(spark, broker, filled) -> None:  # noqa: ANN001
    topic, written = filled
    lso = last_stable_offsets(written)
    df = reader(spark, broker, "kafka", subscribe=topic, includeHeaders="true",
                **{"kafka.isolation.level": "read_committed"}).load()
    assert df.rdd.getNumPartitions() == PARTITIONS
    assert rows_of(df) == sorted(r for r in written.committed + written.plain if r[1] < lso[r[0]])
    # Any case resolves, as for Spark's connector.
    count = reader(spark, broker, "KaFkA", subscribe=topic).load().count()
    assert count == len(written.committed + written.aborted + written.plain + written.open)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, "
             "assign. See the docs for more details."),
        ({"subscribe": "a", "assign": '{"a":[0]}'},
         "Only one of the following options can be specified for Kafka source: subscribe, subscribepattern, assign."),
        ({"subscribe": "a", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
        ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
        ({"assign": "a"}, "No topicpartitions to assign as specified value for option 'assign' is 'a'"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
    ],
)
def test_batch_option_errors(spark, broker, options, message) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match=_literal(message)):
        reader(spark, broker, **options).load().collect()


def test_missing_bootstrap_and_custom_schema_errors(spark, broker) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match=_literal("Option 'kafka.bootstrap.servers' must be specified for "
                                                 "configuring Kafka consumer")):
        spark.read.format("kafka_py").option("subscribe", "a").load().collect()
    with pytest.raises(Exception, match="Kafka source has a fixed schema and cannot be set with a custom one"):
        reader(spark, broker, subscribe="a").schema("value string").load().collect()
    stream = (spark.readStream.format("kafka_py").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", "a").option("endingOffsets", "latest").load())
    query = stream.writeStream.format("noop").start()  # streams are planned when they start running
    try:
        with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
            query.awaitTermination(TIMEOUT_S)
    finally:
        query.stop()


def test_shim_jar_builds_without_maven(tmp_path) -> None:  # noqa: ANN001
    import zipfile

    from rivven_kproto.spark.shim import SHIM_CLASS, build_jar, jar_digest, source_digest

    assert shutil.which("javac") is not None, "building the shim needs a JDK (.ci/run installs openjdk-17)"
    jar = build_jar(tmp_path / "shim.jar")
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        service = archive.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").decode()
    assert SHIM_CLASS.replace(".", "/") + ".class" in names
    assert service.strip() == SHIM_CLASS and not SHIM_CLASS.startswith("org.apache.spark")
    assert jar_digest(jar) == source_digest()


def test_missing_topic_reads_nothing(spark, broker) -> None:  # noqa: ANN001
    assert reader(spark, broker, subscribe="no-such-topic-anywhere").load().count() == 0


def test_fail_on_data_loss(spark, broker, topic_name) -> None:  # noqa: ANN001
    from confluent_kafka import TopicPartition

    create_topic(broker, topic_name, 1)
    writer = Writer(broker, topic_name, 1)
    plain: list[Row] = []
    writer.send(writer.plain, plain, 20)
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in client.delete_records([TopicPartition(topic_name, 0, 10)]).values():
        future.result(TIMEOUT_S)
    below_log_start = {"startingOffsets": json.dumps({topic_name: {"0": 0}}), "includeHeaders": "true"}
    with pytest.raises(Exception, match="Some data may have been lost because they are not available in Kafka"):
        reader(spark, broker, subscribe=topic_name, **below_log_start).load().collect()
    lenient = reader(spark, broker, subscribe=topic_name, failOnDataLoss="false", **below_log_start).load()
    assert rows_of(lenient) == sorted(r for r in plain if r[1] >= 10)
    assert rows_of(reader(spark, broker, subscribe=topic_name, includeHeaders="true").load()) == rows_of(lenient)


def _literal(text: str) -> str:
    import re

    return re.escape(text)


# --- streaming -------------------------------------------------------------------------------------


def run_available_now(spark: object, broker: BrokerProcess, topic: str, sink: Path, checkpoint: Path) -> None:
    stream = (
        spark.readStream.format("kafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "40")
        .load()
    )
    writer = stream.writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", str(checkpoint))
    try:
        query = writer.trigger(availableNow=True).start()
    except TypeError:  # PySpark without Trigger.AvailableNow for this API
        query = writer.trigger(once=True).start()
    assert query.awaitTermination(TIMEOUT_S * 3), "streaming query did not finish"
    assert query.exception() is None, query.exception()


def test_streaming_to_parquet_resumes_exactly_from_checkpoint(spark, broker, tmp_path) -> None:  # noqa: ANN001
    topic = f"spark-stream-{int(time.time() * 1000) % 10**8}"
    create_topic(broker, topic, 2)
    writer = Writer(broker, topic, 2)
    written = Written()
    a, b, d = writer.transactional("a"), writer.transactional("b"), writer.transactional("d")
    a.begin_transaction()
    writer.send(a, written.committed, 30)
    a.commit_transaction(TIMEOUT_S)
    b.begin_transaction()
    writer.send(b, written.aborted, 10)
    writer.send(writer.plain, written.plain, 10)
    b.abort_transaction(TIMEOUT_S)
    d.begin_transaction()
    later_committed: list[Row] = []
    writer.send(d, later_committed, 6)  # open during the first run: it bounds that run (LSO)
    later_plain: list[Row] = []
    writer.send(writer.plain, later_plain, 6)

    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    run_available_now(spark, broker, topic, sink, checkpoint)
    first = rows_of(spark.read.parquet(str(sink)))
    assert first == sorted(written.committed + written.plain)

    offsets_dir = checkpoint / "offsets"
    last_batch = max(int(p.name) for p in offsets_dir.iterdir() if p.name.isdigit())
    assert last_batch >= 1, "maxOffsetsPerTrigger=40 splits the first run into several micro-batches"
    source_offsets = json.loads((offsets_dir / str(last_batch)).read_text().splitlines()[-1])
    first_open = {p: min(r[1] for r in later_committed if r[0] == p) for p in range(2)}
    assert source_offsets == {topic: {str(p): first_open[p] for p in range(2)}}  # Spark's Kafka JSON

    d.commit_transaction(TIMEOUT_S)
    b.begin_transaction()
    writer.send(b, written.aborted, 8)
    b.abort_transaction(TIMEOUT_S)
    a.begin_transaction()
    writer.send(a, written.committed, 20)
    a.commit_transaction(TIMEOUT_S)
    written.committed += later_committed
    written.plain += later_plain

    run_available_now(spark, broker, topic, sink, checkpoint)
    second = rows_of(spark.read.parquet(str(sink)))
    assert len({(r[0], r[1]) for r in second}) == len(second), "a record was written twice"
    assert second == sorted(written.committed + written.plain)

    run_available_now(spark, broker, topic, sink, checkpoint)  # nothing new: nothing more
    assert rows_of(spark.read.parquet(str(sink))) == second


# --- security ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    """A broker whose only listener is SASL_SSL with SCRAM-SHA-512 (user spark), under trustme's CA."""
    import subprocess

    base = tmp_path_factory.mktemp("spark-secured")
    _, keystore, ca_file = server_certificate(base)
    data_dir = base / "data"
    subprocess.run([sys.executable, "-m", "rivven_kproto", "users", "add", "spark", "--mechanism", "SCRAM-SHA-512",
                    "--data-dir", str(data_dir)], input="spark-pw\n", text=True, check=True, capture_output=True, timeout=60)
    config = base / "server.properties"
    config.write_text(
        "listeners=SASL_SSL://127.0.0.1:0\nsasl.enabled.mechanisms=SCRAM-SHA-512\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
    )
    broker = BrokerProcess(data_dir, base / "broker.log", ["--config", str(config)]).start()
    try:
        yield broker, ca_file
    finally:
        broker.stop()


def scram_options(ca_file: Path, password: str) -> dict[str, str]:
    """Spark's Kafka connector options for SASL_SSL with SCRAM, as a Spark user writes them."""
    return {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                  f'username="spark" password="{password}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca_file),
    }


def test_reads_over_sasl_ssl_with_scram(spark, secured_broker) -> None:  # noqa: ANN001
    broker, ca_file = secured_broker
    client = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.username": "spark", "sasl.password": "spark-pw", "ssl.ca.location": str(ca_file)}
    admin = AdminClient(client)  # kept alive until its futures are done
    for future in admin.create_topics([NewTopic("secured", 2)]).values():
        future.result(TIMEOUT_S)
    producer = Producer({**client, "acks": "all"})
    for index in range(20):
        producer.produce("secured", value=f"v{index}".encode(), partition=index % 2)
    assert producer.flush(TIMEOUT_S) == 0
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "secured", **scram_options(ca_file, "spark-pw")}
    for fmt in ("kafka", "kafka_py"):
        df = spark.read.format(fmt).options(**options).load()
        assert sorted(bytes(r.value).decode() for r in df.collect()) == sorted(f"v{i}" for i in range(20))
    wrong = {**options, **scram_options(ca_file, "not-the-password")}
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED"):
        spark.read.format("kafka_py").options(**wrong).load().collect()
    with pytest.raises(Exception, match="sasl.mechanism must be one of"):
        spark.read.format("kafka_py").options(**{**options, "kafka.sasl.mechanism": "GSSAPI"}).load().collect()
