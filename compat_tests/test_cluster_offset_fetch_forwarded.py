"""OffsetFetch v8+ sent to a broker that does not coordinate the group is answered by the one that
does (#36, verify-eos seed 77).

Kafka answers it NOT_COORDINATOR at group level with no partitions. librdkafka (#5586) never asks
again for the partitions of a new assignment after that answer: the consumer never fetches them
(seed 77's transform stage, stuck from its first assignment after the group's shard moved). The
broker forwards the request to the group's coordinator (an Envelope with the client's principal)
and returns its answer.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)

from .test_cluster import bootstrap, create, three_brokers
from .test_cluster_killed_coordinator import _pick
from .test_cluster_shards import GROUP
from .txn_helpers import Raw

TOPIC = "forwarded-offsets"


def _commit(servers: str, group: str, first: int, second: int) -> None:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, first), TopicPartition(TOPIC, 1, second)],
                        asynchronous=False)
    finally:
        consumer.close()


def _fetch_request(group: str) -> OffsetFetchRequest:
    return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
        group_id=group, member_id=None, member_epoch=-1,
        topics=[OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])])], require_stable=True)


def _offsets(response: OffsetFetchResponse, why: str) -> dict[int, tuple[int, int]]:
    """The one group's answer as partition -> (committed offset, error); its group error must be NONE."""
    (answer,) = response.groups
    assert answer.error_code == Errors.NONE, f"node 1 answered {Errors(answer.error_code).name} {why}"
    return {p.partition_index: (p.committed_offset, p.error_code) for t in answer.topics for p in t.partitions}


def test_offset_fetch_at_another_broker_answers_the_committed_offsets(tmp_path: Path, postgres_url: str) -> None:
    with three_brokers(tmp_path, postgres_url) as brokers:
        servers = bootstrap(brokers)
        create(servers, TOPIC, 2, 1)
        group, coordinator = _pick(brokers, GROUP, "fwd-group", {2, 3})
        _commit(servers, group, 7, 3)
        raw = Raw(brokers[1].bootstrap)  # node 1 does not coordinate the group
        try:
            response: OffsetFetchResponse = raw.call(_fetch_request(group), 9)
        finally:
            raw.close()
        offsets = _offsets(response, f"for a group node {coordinator} coordinates")
        assert offsets == {0: (7, Errors.NONE), 1: (3, Errors.NONE)}, offsets


def test_offset_fetch_while_the_groups_coordinator_is_dead_waits_for_the_next_one(
    tmp_path: Path, postgres_url: str
) -> None:
    """The coordinator killed: for a few heartbeats nobody holds the group's shard (verify-eos seed
    94's transform stage asked then, was answered NOT_COORDINATOR and never fetched again). The
    request waits for the next holder and gets the committed offsets."""
    with three_brokers(tmp_path, postgres_url) as brokers:
        servers = bootstrap(brokers)
        create(servers, TOPIC, 2, 1)
        group, coordinator = _pick(brokers, GROUP, "dead-coord-group", {2, 3})
        _commit(servers, group, 5, 9)
        raw = Raw(brokers[1].bootstrap)
        try:
            brokers[coordinator].kill()
            response: OffsetFetchResponse = raw.call(_fetch_request(group), 9)
        finally:
            raw.close()
        offsets = _offsets(response, f"while the group's coordinator (node {coordinator}) was dead")
        assert offsets == {0: (5, Errors.NONE), 1: (9, Errors.NONE)}, offsets
