"""The batch read_committed test on ``local-cluster[2,1,1024]``: a standalone master and two
workers inside the driver's JVM, each worker launching its own executor JVM, whose Python workers
run our data source. Nothing is shared with the driver but the options: every task connects to
the broker itself, so planning (ListOffsets, last stable offsets) and reading (Fetch with aborted
transactions) happen in different processes, as on a real cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from .broker_process import BrokerProcess
from .test_spark import PARTITIONS, Written, fill, last_stable_offsets, reader, rows_of, spark_session

MASTER = "local-cluster[2,1,1024]"
EXECUTORS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    session = spark_session(MASTER, "rivven-kproto-cluster", {
        "spark.driver.memory": "1g",
        "spark.executor.memory": "1g",
        "spark.local.dir": str(tmp_path_factory.mktemp("spark-cluster-local")),
    })
    assert session.sparkContext.master == MASTER, "another Spark session is still active in this process"
    deadline = time.monotonic() + 120
    while len(session.sparkContext.statusTracker().getExecutorInfos()) < EXECUTORS + 1:  # + the driver
        assert time.monotonic() < deadline, "the local cluster's executors did not register"
        time.sleep(0.5)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster_filled(broker: BrokerProcess) -> tuple[str, Written]:
    topic = f"spark-cluster-{int(time.time() * 1000) % 10**8}"
    return topic, fill(broker, topic)


def executor_jvm(_: object) -> list[int]:
    """The executor JVM running this Python worker: the parent of pyspark's worker daemon."""
    with open(f"/proc/{os.getppid()}/stat") as stat:
        return [int(stat.read().rsplit(")", 1)[1].split()[1])]


def test_tasks_run_in_separate_executor_jvms(cluster) -> None:  # noqa: ANN001
    context = cluster.sparkContext
    driver_jvm = context._jvm.java.lang.ProcessHandle.current().pid()
    jvms = set(context.parallelize(range(16), 16).flatMap(executor_jvm).collect())
    assert len(jvms) == EXECUTORS and driver_jvm not in jvms


@pytest.mark.parametrize("fmt", ["kafka", "kafka_py"])
def test_read_committed_on_a_local_cluster(cluster, broker, cluster_filled, fmt) -> None:  # noqa: ANN001
    topic, written = cluster_filled
    lso = last_stable_offsets(written)
    df = reader(cluster, broker, fmt, subscribe=topic, includeHeaders="true",
                **{"kafka.isolation.level": "read_committed"}).load()
    assert df.rdd.getNumPartitions() == PARTITIONS
    assert rows_of(df) == sorted(r for r in written.committed + written.plain if r[1] < lso[r[0]])
    everything = written.committed + written.aborted + written.plain + written.open
    assert reader(cluster, broker, fmt, subscribe=topic).load().count() == len(everything)


def test_exactly_once_write_with_a_failed_task_attempt_on_a_local_cluster(cluster, broker, topic_name) -> None:  # noqa: ANN001
    """The sink on executors in other JVMs: a task whose first attempt fails after producing part
    of its rows (its transaction is aborted or fenced) is retried, and a read_committed read sees
    every row exactly once."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F  # noqa: N812

    from .test_spark import create_topic

    rows = 20_000
    create_topic(broker, topic_name, PARTITIONS)

    @F.udf("string")
    def fail_once(value: str) -> str:
        context = TaskContext.get()
        if value == "v-15000" and context is not None and context.attemptNumber() == 0:
            raise RuntimeError("the first attempt of this task fails after writing part of its rows")
        return value

    df = spark_range(cluster, rows).select(fail_once(F.col("value")).alias("value"))
    (df.write.format("kafka").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic_name).option("exactlyOnce", "true").save())
    got = reader(cluster, broker, "kafka", subscribe=topic_name,
                 **{"kafka.isolation.level": "read_committed"}).load().selectExpr("CAST(value AS STRING) v")
    assert got.count() == rows
    assert got.distinct().count() == rows


def spark_range(session: object, rows: int) -> object:
    """``v-<i>`` for i < rows, in 2 Spark partitions (i.e. 2 tasks, one on each executor)."""
    return session.range(0, rows, numPartitions=2).selectExpr("concat('v-', id) AS value")  # type: ignore[attr-defined]
