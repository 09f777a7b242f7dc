"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) against a real Broker, v0 and v1
through encode/decode: topic ids on the wire, names in the coordinator, errors with messages."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from rivven_kproto.codec.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    HeartbeatTopicPartitions,
)
from rivven_kproto.codec.messages.list_groups import ListGroupsRequest
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import (
    HANDLERS,
    consumer_group_describe,
    consumer_group_heartbeat,
    list_groups,
)

from .round_trip import answer

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data"), NOW)
    broker.create_topic("t", 3, 1, {}, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker) -> RequestContext:
    return RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")


def test_advertised() -> None:
    for key in (68, 69):
        assert (HANDLERS[key].versions.low, HANDLERS[key].versions.high) == (0, 1)


@pytest.mark.parametrize("version", [0, 1])
def test_join_gets_its_assignment_by_topic_id(ctx: RequestContext, broker: Broker, version: int) -> None:
    join = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["t"], topic_partitions=[])
    response = answer(consumer_group_heartbeat, ctx, join, version)
    topic_id = broker.topics["t"].meta.topic_id
    assert (response.error_code, response.member_id, response.member_epoch) == (0, "m1", 1)
    assert response.heartbeat_interval_ms == 5_000
    assert [(tp.topic_id, tp.partitions) for tp in response.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
    again = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=1, topic_partitions=[
        HeartbeatTopicPartitions(topic_id=topic_id, partitions=[0, 1, 2]),
        HeartbeatTopicPartitions(topic_id=uuid.uuid4(), partitions=[7]),  # unknown ids are left out
    ])
    response = answer(consumer_group_heartbeat, ctx, again, version)
    assert (response.error_code, response.member_epoch, response.assignment) == (0, 1, None)
    fenced = answer(consumer_group_heartbeat, ctx, ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=9), version)
    assert fenced.error_code == Errors.FENCED_MEMBER_EPOCH and fenced.error_message


def test_regex_needs_v1_and_rejects_what_re2_lacks(ctx: RequestContext) -> None:
    bad = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
                                        subscribed_topic_regex="(?<=x)t")
    response = answer(consumer_group_heartbeat, ctx, bad, 1)
    assert response.error_code == Errors.INVALID_REGULAR_EXPRESSION and "RE2" in (response.error_message or "")


def test_describe_and_list(ctx: RequestContext, broker: Broker) -> None:
    answer(consumer_group_heartbeat, ctx, ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
        instance_id="i1"), 1)
    response = answer(consumer_group_describe, ctx, ConsumerGroupDescribeRequest(group_ids=["g", "nope"]), 1)
    group, missing = response.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        0, "Stable", 1, 1, "uniform")
    [member] = group.members
    assert (member.member_id, member.instance_id, member.member_epoch, member.member_type) == ("m1", "i1", 1, 1)
    assert member.assignment.topic_partitions[0].topic_name == "t"
    assert member.assignment == member.target_assignment
    assert missing.error_code == Errors.GROUP_ID_NOT_FOUND
    listed = answer(list_groups, ctx, ListGroupsRequest(types_filter=["consumer"]), 5)
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("g", "consumer", "consumer", "Stable")]
    assert answer(list_groups, ctx, ListGroupsRequest(types_filter=["classic"]), 5).groups == []


def test_metrics_count_consumer_groups(ctx: RequestContext, broker: Broker) -> None:
    from rivven_kproto.server.metrics import BrokerMetrics  # noqa: PLC0415

    answer(consumer_group_heartbeat, ctx, ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"]), 1)
    metrics = BrokerMetrics()
    metrics.broker = broker
    body = metrics.exposition().decode()
    assert 'rivven_groups{state="Stable"} 1.0' in body
    assert 'rivven_group_members{group="g"} 1.0' in body and 'rivven_group_generation{group="g"} 1.0' in body
