"""``share.auto.offset.reset=by_duration:PT1H`` (Kafka 4.2) with confluent-kafka's ``ShareConsumer``
against a real broker: a new share-partition starts at the first record stamped within the last
hour (ListOffsets by timestamp), and at the log end when every record is older.

The records carry producer timestamps hours and days apart from the boundary (two days and two
hours old on one side, ten minutes old and now on the other), so neither the machine's speed nor
the time the test takes can move a record across it; the topics keep their records forever
(``retention.ms=-1``), so no retention can remove what the lookup reads. Where delivery starts is
read from DescribeShareGroupOffsets (the start offset), and what is delivered is checked against
a sentinel produced afterwards, without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from .broker_process import BrokerProcess, module_broker
from .test_share_group_admin import describe_offsets
from .test_share_groups import SENTINEL, TIMEOUT_S, consumer, fresh, has_sentinel, poll_until, values
from .txn_helpers import create_topics, wait_for

HOUR_MS = 3_600_000
BROKER_ENV = {
    "KPROTO_SHARE_AUTO_OFFSET_RESET": "by_duration:PT1H",
    "KPROTO_GROUP_SHARE_HEARTBEAT_INTERVAL_MS": "200",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "share-by-duration", BROKER_ENV)


def produce_stamped(bootstrap: str, topic: str, stamped: list[tuple[bytes, int]]) -> None:
    """Each record with its own CreateTime, one at a time (each is its own batch)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value, timestamp in stamped:
        producer.produce(topic, value=value, partition=0, timestamp=timestamp)
        assert producer.flush(TIMEOUT_S) == 0


def start_offset(broker: BrokerProcess, group: str, topic: str) -> int | None:
    for described in describe_offsets(broker, group).topics:
        if described.topic_name == topic:
            return described.partitions[0].start_offset
    return None


def new_topic(broker: BrokerProcess, prefix: str) -> str:
    topic = fresh(prefix)
    create_topics(broker.bootstrap, {topic: 1}, {"retention.ms": "-1"})
    return topic


def test_delivery_starts_at_the_first_record_within_the_duration(broker: BrokerProcess) -> None:
    topic, group = new_topic(broker, "by-duration"), fresh("g")
    now = int(time.time() * 1000)
    produce_stamped(broker.bootstrap, topic, [
        (b"two-days-old", now - 48 * HOUR_MS), (b"two-hours-old", now - 2 * HOUR_MS),
        (b"ten-minutes-old", now - HOUR_MS // 6), (b"now", now),
    ])
    share = consumer(broker.bootstrap, group, topic)
    try:
        got = poll_until(share, lambda got: len(got) >= 2)
        produce_stamped(broker.bootstrap, topic, [(SENTINEL, int(time.time() * 1000))])
        got += poll_until(share, has_sentinel)
        assert values(got) == [b"ten-minutes-old", b"now", SENTINEL]
        assert share.commit_sync(TIMEOUT_S) is not None
    finally:
        share.close()
    assert wait_for(lambda: start_offset(broker, group, topic) is not None)
    assert start_offset(broker, group, topic) == 5  # past everything, from offset 2 on


def test_delivery_starts_at_the_log_end_when_every_record_is_older(broker: BrokerProcess) -> None:
    topic, group = new_topic(broker, "by-duration-old"), fresh("g")
    now = int(time.time() * 1000)
    produce_stamped(broker.bootstrap, topic, [(b"day-old", now - 24 * HOUR_MS), (b"three-hours-old", now - 3 * HOUR_MS)])
    share = consumer(broker.bootstrap, group, topic)
    try:
        # The first ShareFetch initializes the share-partition; its start offset is then shown.
        deadline = time.monotonic() + TIMEOUT_S
        while start_offset(broker, group, topic) is None:
            assert time.monotonic() < deadline, "the share-partition was never initialized"
            assert len(share.poll(0.2)) == 0
        assert start_offset(broker, group, topic) == 2
        produce_stamped(broker.bootstrap, topic, [(SENTINEL, int(time.time() * 1000))])
        assert values(poll_until(share, has_sentinel)) == [SENTINEL]
    finally:
        share.close()
