"""Group configs (Kafka's GROUP config resource) through the real handlers on a real Broker:
Kafka's checks, what DescribeConfigs answers, and that a KIP-848 group's members get the group's
session timeout and heartbeat interval instead of the broker's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.group_configs import GROUP_KEYS, GroupConfigs
from rivven_kproto.broker.share.config import ShareConfig
from rivven_kproto.codec.enums import AlterConfigOp, ConfigResourceType, ConfigSource
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages import alter_configs as legacy
from rivven_kproto.codec.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from rivven_kproto.codec.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from rivven_kproto.codec.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from rivven_kproto.codec.messages.list_config_resources import ListConfigResourcesRequest
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import (
    alter_configs,
    consumer_group_heartbeat,
    describe_configs,
    incremental_alter_configs,
    list_config_resources,
)

from .round_trip import answer

NOW = 1_700_000_000_000
GROUP = int(ConfigResourceType.GROUP)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data"), NOW)
    broker.create_topic("t", 1, 1, {}, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker) -> RequestContext:
    return RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")


def alter(ctx: RequestContext, name: str, validate_only: bool = False, **values: str | None) -> tuple[int, str | None]:
    configs = [AlterableConfig(name=k.replace("_", "."), value=v,
                               config_operation=AlterConfigOp.DELETE if v is None else AlterConfigOp.SET)
               for k, v in values.items()]
    request = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=GROUP, resource_name=name, configs=configs)],
        validate_only=validate_only)
    (result,) = answer(incremental_alter_configs, ctx, request, 1).responses
    return result.error_code, result.error_message


def describe(ctx: RequestContext, name: str) -> Any:
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=GROUP, resource_name=name,
                                                                        configuration_keys=None)],
                                     include_synonyms=True)
    (result,) = answer(describe_configs, ctx, request, 4).results
    return result


def test_a_consumer_group_member_gets_its_groups_session_and_heartbeat(ctx: RequestContext, broker: Broker) -> None:
    assert alter(ctx, "g", consumer_session_timeout_ms="50000", consumer_heartbeat_interval_ms="6000") == (0, None)
    join = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["t"], topic_partitions=[])
    response = answer(consumer_group_heartbeat, ctx, join, 1)
    assert (response.error_code, response.heartbeat_interval_ms) == (0, 6000)
    (shard,) = broker.shards.values()
    assert shard.groups.consumer_groups["g"].deadlines["m1"] == NOW + 50_000
    other = ConsumerGroupHeartbeatRequest(group_id="other", member_id="m2", member_epoch=0, rebalance_timeout_ms=30_000,
                                          subscribed_topic_names=["t"], topic_partitions=[])
    assert answer(consumer_group_heartbeat, ctx, other, 1).heartbeat_interval_ms == 5000  # the broker's


def test_describe_lists_every_key_with_its_source(ctx: RequestContext) -> None:
    assert alter(ctx, "g", share_auto_offset_reset="earliest") == (0, None)
    result = describe(ctx, "g")
    assert result.error_code == 0
    entries = {c.name: c for c in result.configs}
    assert sorted(entries) == sorted(GROUP_KEYS)
    earliest = entries["share.auto.offset.reset"]
    assert (earliest.value, earliest.config_source, earliest.read_only) == ("earliest", ConfigSource.GROUP_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in earliest.synonyms] == [
        ("share.auto.offset.reset", "earliest", ConfigSource.GROUP_CONFIG)]
    lock = entries["share.record.lock.duration.ms"]
    assert (lock.value, lock.config_source) == ("30000", ConfigSource.DEFAULT_CONFIG)
    listed = answer(list_config_resources, ctx, ListConfigResourcesRequest(resource_types=[GROUP]), 1)
    assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("g", GROUP)]


def test_kafkas_checks(ctx: RequestContext) -> None:
    assert alter(ctx, "g", nope="1") == (Errors.INVALID_CONFIG, "Unknown group config name: nope")
    assert alter(ctx, "g", share_record_lock_duration_ms="abc") == (
        Errors.INVALID_CONFIG, "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type INT")
    assert alter(ctx, "g", share_record_lock_duration_ms="999") == (
        Errors.INVALID_CONFIG, "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000")
    assert alter(ctx, "g", consumer_heartbeat_interval_ms="16000") == (
        Errors.INVALID_CONFIG,
        "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms")
    assert alter(ctx, "", share_isolation_level="read_committed")[0] == Errors.INVALID_REQUEST
    assert describe(ctx, "").error_code == Errors.INVALID_REQUEST
    assert alter(ctx, "g", validate_only=True, share_isolation_level="read_committed") == (0, None)
    assert describe(ctx, "g").configs and all(
        c.config_source == ConfigSource.DEFAULT_CONFIG for c in describe(ctx, "g").configs)  # validate_only saved nothing


def test_a_groups_share_settings_are_its_overrides_over_the_brokers(tmp_path: Path) -> None:
    base = ShareConfig(record_lock_duration_ms=30_000)
    configs = GroupConfigs(tmp_path / "groups.json", None, base, 45_000, 5_000)
    configs.replace("g", {"share.isolation.level": "read_committed", "share.record.lock.duration.ms": "20000"})
    assert configs.share("other") is base
    settings = configs.share("g")
    assert (settings.read_committed, settings.record_lock_duration_ms, settings.auto_offset_reset) == (
        True, 20_000, "latest")
    reopened = GroupConfigs(tmp_path / "groups.json", None, base, 45_000, 5_000)  # what a restart reads
    assert reopened.share("g") == settings
    reopened.replace("g", {})
    assert reopened.share("g") is base and reopened.groups == {}
    with pytest.raises(KafkaError) as refused:
        reopened.check({"share.auto.offset.reset": "by_duration:-PT1H"})
    assert refused.value.error == Errors.INVALID_CONFIG


def test_legacy_alter_configs_replaces_a_groups_whole_set(ctx: RequestContext, broker: Broker) -> None:
    assert alter(ctx, "g", share_auto_offset_reset="earliest", share_isolation_level="read_committed") == (0, None)
    request = legacy.AlterConfigsRequest(resources=[legacy.AlterConfigsResource(
        resource_type=GROUP, resource_name="g",
        configs=[legacy.AlterableConfig(name="share.record.lock.duration.ms", value="20000")])], validate_only=False)
    (result,) = answer(alter_configs, ctx, request, 2).responses
    assert result.error_code == 0
    assert broker.group_configs.level("g") == {"share.record.lock.duration.ms": "20000"}  # the rest removed


def test_a_consumer_group_loaded_at_start_gets_its_groups_session(ctx: RequestContext, broker: Broker,
                                                                  tmp_path: Path) -> None:
    assert alter(ctx, "g", consumer_session_timeout_ms="50000") == (0, None)
    join = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=["t"], topic_partitions=[])
    assert answer(consumer_group_heartbeat, ctx, join, 1).error_code == 0
    broker.close()
    later = NOW + 1_000
    reopened = Broker(BrokerConfig(data_dir=tmp_path / "data"), later)
    try:
        (shard,) = reopened.shards.values()
        assert shard.groups.consumer_groups["g"].deadlines["m1"] == later + 50_000  # not the broker's 45 s
    finally:
        reopened.close()
