"""DescribeTopicPartitions (KIP-966) against a real Broker: pagination, errors, authorization."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    TopicRequest,
)
from rivven_kproto.codec.schema import ZERO_UUID
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import describe_topic_partitions

from .test_data_handlers import answer

NOW = 1_700_000_000_000


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[RequestContext]:
    config = BrokerConfig(data_dir=tmp_path / "data", node_id=7)
    broker = Broker(config, NOW)
    for name, count in (("b", 3), ("a", 2), ("c", 4)):
        broker.create_topic(name, count, 1, {}, NOW)
    yield RequestContext(broker, config, NOW, "test")
    broker.close()


def describe(ctx: RequestContext, *names: str, limit: int = 2000, cursor: tuple[str, int] | None = None
             ) -> DescribeTopicPartitionsResponse:
    request = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in names], response_partition_limit=limit,
        cursor=Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)
    return answer(describe_topic_partitions, ctx, request, 0)  # type: ignore[no-any-return]


def pages(response: DescribeTopicPartitionsResponse) -> list[tuple[str | None, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def test_every_topic_in_name_order_with_this_node_as_leader(ctx: RequestContext) -> None:
    response = describe(ctx)
    assert pages(response) == [("a", [0, 1]), ("b", [0, 1, 2]), ("c", [0, 1, 2, 3])]
    assert response.next_cursor is None
    topic = response.topics[0]
    assert topic.topic_id == ctx.broker.topic("a").meta.topic_id and not topic.is_internal
    assert topic.topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    partition = topic.partitions[1]
    assert (partition.leader_id, partition.leader_epoch, partition.replica_nodes, partition.isr_nodes) == (7, 0, [7], [7])
    assert (partition.eligible_leader_replicas, partition.last_known_elr, partition.offline_replicas) == ([], [], [])


def test_pages_follow_the_cursor_until_every_partition_was_listed(ctx: RequestContext) -> None:
    seen: list[tuple[str | None, int]] = []
    cursor = None
    for _ in range(10):
        response = describe(ctx, limit=2, cursor=cursor)
        seen += [(t.name, p.partition_index) for t in response.topics for p in t.partitions]
        if response.next_cursor is None:
            break
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    assert seen == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("c", 0), ("c", 1), ("c", 2), ("c", 3)]
    # A limit that ends exactly at a topic's end points at the next topic's first partition.
    assert describe(ctx, limit=2).next_cursor == Cursor(topic_name="b", partition_index=0)
    first = describe(ctx, "b", "c", limit=4)
    assert pages(first) == [("b", [0, 1, 2]), ("c", [0])]
    assert first.next_cursor == Cursor(topic_name="c", partition_index=1)
    assert pages(describe(ctx, limit=0)) == [] and describe(ctx, limit=0).next_cursor == Cursor(topic_name="a", partition_index=0)


def test_named_topics_unknown_and_illegal_names_and_a_stray_cursor(ctx: RequestContext) -> None:
    response = describe(ctx, "c", "nope", "bad name", "a", "a")
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", Errors.NONE), ("bad name", Errors.INVALID_TOPIC_EXCEPTION), ("c", Errors.NONE),
        ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert response.topics[3].topic_id == ZERO_UUID and response.topics[3].partitions == []
    stray = describe(ctx, "a", "b", cursor=("c", 0))
    assert [(t.name, t.error_code) for t in stray.topics] == [("a", Errors.INVALID_REQUEST), ("b", Errors.INVALID_REQUEST)]
    # Topics before the cursor's are skipped; the cursor's partition index applies to its topic only.
    assert pages(describe(ctx, "a", "b", "c", cursor=("b", 2))) == [("b", [2]), ("c", [0, 1, 2, 3])]


def test_topics_the_client_may_not_describe(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path / "secured", authorizer_enabled=True, super_users=("User:admin",))
    broker = Broker(config, NOW)
    try:
        for name in ("open", "secret"):
            broker.create_topic(name, 1, 1, {}, NOW)
        assert broker.authorizer is not None
        broker.authorizer.create([AclBinding(ResourceType.TOPIC, "open", PatternType.LITERAL, "User:ANONYMOUS", "*",
                                             Operation.DESCRIBE, Permission.ALLOW)])
        ctx = RequestContext(broker, config, NOW, "test")
        assert pages(describe(ctx)) == [("open", [0])]  # every topic: the others are left out
        named = describe(ctx, "secret", "open")
        assert [(t.name, t.error_code, t.topic_id) for t in named.topics] == [
            ("open", Errors.NONE, broker.topic("open").meta.topic_id),
            ("secret", Errors.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID),
        ]
        assert named.topics[0].topic_authorized_operations == 1 << Operation.DESCRIBE
    finally:
        broker.close()
