"""Share-group administration (KIP-932) against a real broker process: DeleteGroups of a share
group, DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets, observed
through confluent-kafka's ``ShareConsumer`` (what it is delivered afterwards) and ``AdminClient``.

Kafka's Java admin client drives the offset APIs (kafka-share-groups.sh); no Python client has
them yet, so they are sent as plain protocol requests here (``raw_client``), and what they change
is checked with the real share consumer. Every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareOffsetsRequestPartition,
    AlterShareOffsetsRequestTopic,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareOffsetsRequestTopic,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeShareOffsetsGroup,
    DescribeShareOffsetsRequestGroup,
)

from . import raw_client
from .broker_process import BrokerProcess
from .test_share_groups import (
    BROKER_ENV,
    TIMEOUT_S,
    consumer,
    fresh,
    list_groups,
    poll_until,
    produce,
    values,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base: Path = tmp_path_factory.mktemp("share-admin")
    process = BrokerProcess(base / "data", base / "broker.log", env=BROKER_ENV).start()
    yield process
    if process.alive():
        assert process.stop() == 0, process.log_text()[-4000:]


def call(broker: BrokerProcess, request: Any, version: int) -> Any:
    sock = raw_client.connect(broker.bootstrap)
    try:
        return raw_client.call(sock, request, version)
    finally:
        sock.close()


def consume_all_and_leave(broker: BrokerProcess, group: str, topic: str, count: int) -> list[bytes]:
    """One share consumer reads ``count`` records, accepts them (commit) and leaves the group."""
    share = consumer(broker.bootstrap, group, topic)
    try:
        got = values(poll_until(share, lambda got: len(got) >= count))
        result = share.commit_sync(TIMEOUT_S)
        assert result and all(error is None for error in result.values()), result
    finally:
        share.close()
    return got


def wait_empty(broker: BrokerProcess, group: str) -> None:
    """The member's leave heartbeat is sent by close(); bounded wait until the group is Empty."""
    deadline = time.monotonic() + TIMEOUT_S
    while not any(g[0] == group and g[2] == "Empty" for g in list_groups(broker, ["share"])):
        assert time.monotonic() < deadline, list_groups(broker, ["share"])
        time.sleep(0.1)


def describe_offsets(broker: BrokerProcess, group: str) -> DescribeShareOffsetsGroup:
    request = DescribeShareGroupOffsetsRequest(groups=[DescribeShareOffsetsRequestGroup(group_id=group, topics=None)])
    response: DescribeShareGroupOffsetsResponse = call(broker, request, 1)
    (described,) = response.groups
    return described


def test_delete_groups_deletes_an_empty_share_group_and_its_state(broker: BrokerProcess) -> None:
    topic, group = fresh("share-del"), fresh("g")
    records = [b"d%d" % i for i in range(5)]
    produce(broker.bootstrap, topic, records)
    assert sorted(consume_all_and_leave(broker, group, topic, len(records))) == sorted(records)
    wait_empty(broker, group)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)
    futures[group].result(TIMEOUT_S)  # raises GROUP_ID_NOT_FOUND when share groups are not known
    assert group not in {g[0] for g in list_groups(broker, ["share"])}
    # Its state went with it: a new member starts again from share.auto.offset.reset (earliest).
    assert sorted(consume_all_and_leave(broker, group, topic, len(records))) == sorted(records)


def test_delete_groups_refuses_a_share_group_with_members(broker: BrokerProcess) -> None:
    topic, group = fresh("share-busy"), fresh("g")
    produce(broker.bootstrap, topic, [b"x"])
    share = consumer(broker.bootstrap, group, topic)
    try:
        poll_until(share, lambda got: len(got) >= 1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        future = admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group]
        with pytest.raises(Exception) as refused:
            future.result(TIMEOUT_S)
        assert "NON_EMPTY_GROUP" in str(refused.value) or "not empty" in str(refused.value).lower(), refused.value
    finally:
        share.close()


def test_reset_offsets_redelivers_from_the_new_start(broker: BrokerProcess) -> None:
    topic, group = fresh("share-reset"), fresh("g")
    records = [b"s%d" % i for i in range(6)]
    produce(broker.bootstrap, topic, records)
    consume_all_and_leave(broker, group, topic, len(records))
    wait_empty(broker, group)
    described = describe_offsets(broker, group)
    assert described.error_code == Errors.NONE, described
    (entry,) = described.topics
    assert entry.topic_name == topic and [(p.partition_index, p.start_offset, p.lag) for p in entry.partitions] == [
        (0, 6, 0)]
    alter = AlterShareGroupOffsetsRequest(group_id=group, topics=[AlterShareOffsetsRequestTopic(
        topic_name=topic, partitions=[AlterShareOffsetsRequestPartition(partition_index=0, start_offset=2)])])
    altered: AlterShareGroupOffsetsResponse = call(broker, alter, 0)
    assert altered.error_code == Errors.NONE and altered.responses[0].partitions[0].error_code == Errors.NONE, altered
    (entry,) = describe_offsets(broker, group).topics
    assert [(p.start_offset, p.lag) for p in entry.partitions] == [(2, 4)]
    assert sorted(consume_all_and_leave(broker, group, topic, 4)) == sorted(records[2:])


def test_reset_offsets_of_a_group_with_members_is_refused(broker: BrokerProcess) -> None:
    topic, group = fresh("share-reset-busy"), fresh("g")
    produce(broker.bootstrap, topic, [b"x"])
    share = consumer(broker.bootstrap, group, topic)
    try:
        poll_until(share, lambda got: len(got) >= 1)
        alter = AlterShareGroupOffsetsRequest(group_id=group, topics=[AlterShareOffsetsRequestTopic(
            topic_name=topic, partitions=[AlterShareOffsetsRequestPartition(partition_index=0, start_offset=0)])])
        altered: AlterShareGroupOffsetsResponse = call(broker, alter, 0)
        assert altered.error_code == Errors.NON_EMPTY_GROUP, altered
    finally:
        share.close()


def test_delete_offsets_starts_the_topic_again_from_the_reset_policy(broker: BrokerProcess) -> None:
    topic, group = fresh("share-deloff"), fresh("g")
    records = [b"o%d" % i for i in range(3)]
    produce(broker.bootstrap, topic, records)
    consume_all_and_leave(broker, group, topic, len(records))
    wait_empty(broker, group)
    request = DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        DeleteShareOffsetsRequestTopic(topic_name=topic), DeleteShareOffsetsRequestTopic(topic_name="no-such-topic")])
    deleted: DeleteShareGroupOffsetsResponse = call(broker, request, 0)
    assert deleted.error_code == Errors.NONE, deleted
    assert {(t.topic_name, t.error_code) for t in deleted.responses} == {
        (topic, Errors.NONE), ("no-such-topic", Errors.UNKNOWN_TOPIC_OR_PARTITION)}
    assert describe_offsets(broker, group).topics == []
    assert sorted(consume_all_and_leave(broker, group, topic, len(records))) == sorted(records)
