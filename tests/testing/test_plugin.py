"""The pytest plugin, as another project uses it (pytester runs a separate pytest with it loaded
from the package's ``pytest11`` entry point), and the ``broker()`` context manager."""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from rivven_kproto.testing import EmbeddedBroker, broker

pytest_plugins = ["pytester"]

# What a user writes: a transactional consume-transform-produce step, tested against the fixtures.
USER_TEST = '''
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

def uppercase_step(bootstrap, source, sink, group):
    """Read what is committed in ``source``, write it upper-cased to ``sink`` exactly once."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(source, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-tx"})
    producer.init_transactions(30)
    records, at_end = [], False
    while not at_end:  # everything committed so far, up to the end of the partition
        for message in consumer.consume(100, 1):
            if message.error():
                at_end = True
            else:
                records.append(message)
    producer.begin_transaction()
    for record in records:
        producer.produce(sink, record.value().upper())
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    consumer.close()
    return len(records)

@pytest.fixture
def sink(kafka_bootstrap, kafka_admin):
    from confluent_kafka.admin import NewTopic
    name = "sink-" + str(id(kafka_admin))
    kafka_admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name

def test_uppercase_step(kafka_bootstrap, kafka_topic, sink):
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for word in (b"alpha", b"beta"):
        producer.produce(kafka_topic, word)
    assert producer.flush(30) == 0
    assert uppercase_step(kafka_bootstrap, kafka_topic, sink, "g1") == 2
    reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "check", "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition(sink, 0)])
    values = [m.value() for m in reader.consume(2, 30)]
    reader.close()
    assert values == [b"ALPHA", b"BETA"]
    assert uppercase_step(kafka_bootstrap, kafka_topic, sink, "g1") == 0  # the offsets were committed

@pytest.mark.kafka_topic(partitions=3, config={"retention.ms": "-1"})
def test_marker_shapes_the_topic(kafka_bootstrap, kafka_topic, kafka_admin):
    meta = kafka_admin.list_topics(kafka_topic, timeout=10).topics[kafka_topic]
    assert len(meta.partitions) == 3

def test_the_broker_is_shared_by_the_session(kafka_broker, kafka_bootstrap):
    assert kafka_broker.bootstrap == kafka_bootstrap
    with open("bootstrap.txt", "a") as out:
        out.write(kafka_bootstrap + "\\n")
'''


def test_a_users_tests_run_against_the_embedded_broker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)
    assert (pytester.path / "bootstrap.txt").read_text().startswith("127.0.0.1:")


def test_with_pytest_xdist_each_worker_has_its_own_broker(pytester: pytest.Pytester) -> None:
    """Eight tests on two workers (xdist hands each worker tests from the start): every worker's
    tests share one broker, and the two workers' brokers differ."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_workers="""
import os
import pytest

@pytest.mark.parametrize("n", range(8))
def test_records_its_broker(n, kafka_bootstrap, kafka_topic):
    with open("seen.txt", "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + " " + kafka_bootstrap + "\\n")
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-n", "2")
    result.assert_outcomes(passed=8)
    seen: dict[str, set[str]] = {}
    for line in (pytester.path / "seen.txt").read_text().splitlines():
        worker, bootstrap = line.split()
        seen.setdefault(worker, set()).add(bootstrap)
    assert sorted(seen) == ["gw0", "gw1"]
    assert all(len(bootstraps) == 1 for bootstraps in seen.values())
    assert seen["gw0"] != seen["gw1"]


def test_kafka_bootstrap_option_points_the_fixtures_elsewhere(pytester: pytest.Pytester) -> None:
    with broker() as external:
        pytester.makepyfile(
            test_external=f'''
def test_uses_the_external_cluster(kafka_bootstrap, kafka_topic):
    assert kafka_bootstrap == "{external.bootstrap}"
    assert kafka_topic
'''
        )
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--kafka-bootstrap", external.bootstrap)
    result.assert_outcomes(passed=1)


def test_the_context_manager_starts_fast_and_cleans_up() -> None:
    with broker() as warm:  # the first start also imports the server
        assert warm.bootstrap
    started = time.monotonic()
    embedded = EmbeddedBroker().start()
    start_s = time.monotonic() - started
    directory = embedded.data_dir
    assert directory.exists() and embedded.bootstrap.startswith("127.0.0.1:")
    embedded.stop()
    assert not directory.exists()
    # Reported, not asserted: start-up time depends on the machine (the goal is < 0.5 s).
    logging.getLogger(__name__).info("embedded broker start: %.0f ms", start_s * 1000)


def test_serve_with_a_throwaway_data_directory(tmp_path: Path) -> None:
    """``kproto serve --data-dir :memory:`` keeps its data in a fresh directory removed at exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:0", "--data-dir", ":memory:"],
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        assert process.stderr is not None
        directory = port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if match := re.search(r"throwaway data directory (\S+)", line):
                directory = Path(match.group(1))
            if match := re.search(r"listening on [\d.]+:(\d+)", line):
                port = int(match.group(1))
        assert directory is not None and port is not None
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("in-ram", b"v")
        assert producer.flush(30) == 0
        assert (directory / "in-ram-0").is_dir()
        assert not Path(":memory:").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    assert not directory.exists()
