"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs handlers against a real Broker.

Requests and responses go through encode/decode at the tested version, so every assertion is about
what a client would read off the wire.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.dynamic_keys import config_type as dynamic_config_type
from rivven_kproto.broker.topics import TOPIC_CONFIGS
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages import alter_configs as ac
from rivven_kproto.codec.messages import incremental_alter_configs as iac
from rivven_kproto.codec.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from rivven_kproto.codec.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from rivven_kproto.codec.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from rivven_kproto.codec.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import (
    alter_configs,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    incremental_alter_configs,
)

from .round_trip import answer

NOW = 1_700_000_000_000
NODE = 7
ZERO = uuid.UUID(int=0)
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(data_dir=tmp_path / "data", node_id=NODE, num_partitions=3)


@pytest.fixture
def broker(config: BrokerConfig) -> Iterator[Broker]:
    broker = Broker(config, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker, config: BrokerConfig) -> RequestContext:
    return RequestContext(broker, config, NOW, "test-client")


def outcome(result: Any) -> tuple[int, str | None]:
    return result.error_code, result.error_message


# -- CreateTopics ---------------------------------------------------------------------------------


def creatable(name: str, partitions: int = 1, rf: int = 1, **kwargs: Any) -> CreatableTopic:
    configs = [CreatableTopicConfig(name=k, value=v) for k, v in kwargs.pop("configs", {}).items()]
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf, configs=configs, **kwargs
    )


def create(
    ctx: RequestContext, *topics: CreatableTopic, version: int = 7, validate_only: bool = False
) -> list:
    request = CreateTopicsRequest(topics=list(topics), timeout_ms=1000, validate_only=validate_only)
    return answer(create_topics, ctx, request, version).topics


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(ctx: RequestContext, broker: Broker, version: int) -> None:
    (result,) = create(ctx, creatable("t", 2, configs={"retention.ms": "1000"}), version=version)
    assert (result.name, *outcome(result)) == ("t", 0, None)
    assert len(broker.topic("t").partitions) == 2
    assert broker.topic("t").meta.configs == {"retention.ms": "1000"}
    assert result.topic_id == (broker.topic("t").meta.topic_id if version >= 7 else ZERO)  # a v7 field
    if version >= 5:
        assert (result.num_partitions, result.replication_factor, result.topic_config_error_code) == (2, 1, 0)
        configs = {c.name: c for c in result.configs}
        assert set(configs) == set(TOPIC_CONFIGS)
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
            "1000",
            DYNAMIC_TOPIC_CONFIG,
        )
        assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == (
            "delete",
            DEFAULT_CONFIG,
        )
        assert not any(c.read_only or c.is_sensitive for c in result.configs)
    else:
        assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])


def test_create_topics_defaults(ctx: RequestContext, broker: Broker) -> None:
    (result,) = create(ctx, creatable("t", -1, -1))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 3, 1)
    assert len(broker.topic("t").partitions) == 3


def test_create_topics_validate_only(ctx: RequestContext, broker: Broker) -> None:
    (result,) = create(ctx, creatable("t", -1, 1), validate_only=True)
    assert (result.error_code, result.error_message, result.num_partitions) == (0, None, 3)
    assert len(result.configs) == len(TOPIC_CONFIGS)
    assert "t" not in broker.topics
    (result,) = create(ctx, creatable("t", 0, 1), validate_only=True)
    assert result.error_code == Errors.INVALID_PARTITIONS


@pytest.mark.parametrize(
    ("topic", "error", "message"),
    [
        (
            creatable("bad/name"),
            Errors.INVALID_TOPIC_EXCEPTION,
            "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        ),
        (
            creatable(""),
            Errors.INVALID_TOPIC_EXCEPTION,
            "Topic name is invalid: the empty string is not allowed",
        ),
        (
            creatable("__cluster_metadata"),
            Errors.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
        (
            creatable("t", 0),
            Errors.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        ),
        (
            creatable("t", 1, 0),
            Errors.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ),
        (
            creatable("t", 1, 3),
            Errors.INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
            "because only 1 broker(s) are registered.",
        ),
        (creatable("t", configs={"nope": "1"}), Errors.INVALID_CONFIG, "Unknown topic config name: nope"),
        (
            creatable("t", configs={"retention.ms": "soon"}),
            Errors.INVALID_CONFIG,
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            creatable("t", configs={"a": None, "b": None}),
            Errors.INVALID_CONFIG,
            "Null value not supported for topic configs: a,b",
        ),
        # Configs are checked before counts, as Kafka's controller does.
        (
            creatable("t", 0, 0, configs={"nope": "1"}),
            Errors.INVALID_CONFIG,
            "Unknown topic config name: nope",
        ),
    ],
)
def test_create_topics_errors(
    ctx: RequestContext, broker: Broker, topic: CreatableTopic, error: Errors, message: str
) -> None:
    (result,) = create(ctx, topic, version=5)
    assert (result.name, *outcome(result)) == (topic.name, error, message)
    assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])
    assert broker.topics == {}


def test_create_topics_existing_collision_and_duplicates(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("a.b", 1, 1, {}, NOW)
    results = create(
        ctx, creatable("dup"), creatable("a.b"), creatable("a_b"), creatable("dup"), creatable("ok")
    )
    assert [(r.name, *outcome(r)) for r in results] == [
        ("a.b", Errors.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists."),
        ("a_b", Errors.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topic: a.b"),
        ("ok", 0, None),
        ("dup", Errors.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert sorted(broker.topics) == ["a.b", "ok"]


def assigned(
    *replicas: list[int], indexes: list[int] | None = None, partitions: int = -1, rf: int = -1
) -> Any:
    indexes = list(range(len(replicas))) if indexes is None else indexes
    assignments = [
        CreatableReplicaAssignment(partition_index=i, broker_ids=r)
        for i, r in zip(indexes, replicas, strict=True)
    ]
    return creatable("t", partitions, rf, assignments=assignments)


def test_create_topics_manual_assignment(ctx: RequestContext, broker: Broker) -> None:
    (result,) = create(ctx, assigned([NODE], [NODE], indexes=[1, 0]))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 2, 1)
    assert len(broker.topic("t").partitions) == 2


@pytest.mark.parametrize(
    ("topic", "error", "message"),
    [
        (
            assigned([NODE], partitions=1),
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            assigned([NODE], rf=1),
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        (
            assigned([]),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            assigned([NODE + 1]),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes broker {NODE + 1}, but no such broker is registered.",
        ),
        (
            assigned([NODE, NODE]),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes the broker {NODE} more than once.",
        ),
        (
            assigned([NODE], [NODE], indexes=[0, 0]),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            assigned([NODE], [NODE], indexes=[0, 2]),
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
    ],
)
def test_create_topics_bad_assignments(
    ctx: RequestContext, broker: Broker, topic: CreatableTopic, error: Errors, message: str
) -> None:
    (result,) = create(ctx, topic)
    assert outcome(result) == (error, message)
    assert broker.topics == {}


# -- DeleteTopics ---------------------------------------------------------------------------------


def delete(ctx: RequestContext, version: int, *entries: Any) -> list:
    if version >= 6:
        states = [e if isinstance(e, DeleteTopicState) else DeleteTopicState(name=e) for e in entries]
        request = DeleteTopicsRequest(topics=states, timeout_ms=1000)
    else:
        request = DeleteTopicsRequest(topic_names=list(entries), timeout_ms=1000)
    return answer(delete_topics, ctx, request, version).responses


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_by_name(ctx: RequestContext, broker: Broker, version: int) -> None:
    broker.create_topic("t", 2, 1, {}, NOW)
    results = delete(ctx, version, "t", "missing")
    by_name = {r.name: r for r in results}
    assert by_name["t"].error_code == 0 and by_name["t"].error_message is None
    assert by_name["missing"].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    expected = Errors.UNKNOWN_TOPIC_OR_PARTITION.message if version >= 5 else None
    assert by_name["missing"].error_message == expected
    assert broker.topics == {}


def test_delete_topics_by_id_and_malformed_entries(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.create_topic("u", 1, 1, {}, NOW)
    real_id = broker.topic("u").meta.topic_id
    unknown = uuid.uuid4()
    results = delete(
        ctx,
        6,
        DeleteTopicState(name=None, topic_id=ZERO),
        DeleteTopicState(name="t", topic_id=unknown),
        DeleteTopicState(name=None, topic_id=unknown),
        DeleteTopicState(name=None, topic_id=real_id),
        "dup",
        "dup",
    )
    assert [(r.name, r.topic_id, *outcome(r)) for r in results] == [
        (None, ZERO, Errors.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("t", unknown, Errors.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (None, unknown, Errors.UNKNOWN_TOPIC_ID, Errors.UNKNOWN_TOPIC_ID.message),
        ("dup", ZERO, Errors.INVALID_REQUEST, "Duplicate topic name."),
        ("u", real_id, 0, None),
    ]
    assert list(broker.topics) == ["t"]


def test_delete_topics_id_and_name_of_same_topic(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    topic_id = broker.topic("t").meta.topic_id
    results = delete(ctx, 6, DeleteTopicState(name=None, topic_id=topic_id), "t")
    assert {outcome(r) for r in results} == {
        (Errors.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")
    }
    assert "t" in broker.topics


@pytest.mark.parametrize(
    ("version", "error"),
    [(1, Errors.INVALID_REQUEST), (3, Errors.TOPIC_DELETION_DISABLED), (6, Errors.TOPIC_DELETION_DISABLED)],
)
def test_delete_topics_disabled(ctx: RequestContext, broker: Broker, version: int, error: Errors) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    ctx.config = dataclasses.replace(ctx.config, delete_topic_enable=False)
    (result,) = delete(ctx, version, "t")
    assert (result.name, result.error_code) == ("t", error)
    assert "t" in broker.topics


# -- CreatePartitions -----------------------------------------------------------------------------


def grow(
    ctx: RequestContext, *topics: CreatePartitionsTopic, version: int = 3, validate_only: bool = False
) -> list:
    request = CreatePartitionsRequest(topics=list(topics), timeout_ms=1000, validate_only=validate_only)
    return answer(create_partitions, ctx, request, version).results


def to(name: str, count: int, *assignments: list[int]) -> CreatePartitionsTopic:
    listed = [CreatePartitionsAssignment(broker_ids=a) for a in assignments] if assignments else None
    return CreatePartitionsTopic(name=name, count=count, assignments=listed)


@pytest.mark.parametrize("version", range(4))
def test_create_partitions(ctx: RequestContext, broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    (result,) = grow(ctx, to("t", 3), version=version)
    assert (result.name, *outcome(result)) == ("t", 0, None)
    assert len(broker.topic("t").partitions) == 3


def test_create_partitions_validate_only_and_assignments(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    (result,) = grow(ctx, to("t", 2), validate_only=True)
    assert outcome(result) == (0, None)
    assert len(broker.topic("t").partitions) == 1
    (result,) = grow(ctx, to("t", 3, [NODE], [NODE]))
    assert outcome(result) == (0, None)
    assert len(broker.topic("t").partitions) == 3


def test_create_partitions_errors(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 2, 1, {}, NOW)
    broker.create_topic("u", 2, 1, {}, NOW)
    broker.create_topic("dup", 1, 1, {}, NOW)
    results = grow(ctx, to("t", 2), to("dup", 2), to("missing", 2), to("dup", 3), to("u", 1))
    assert [(r.name, *outcome(r)) for r in results] == [
        ("dup", Errors.INVALID_REQUEST, "Duplicate topic name."),
        ("t", Errors.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        ("missing", Errors.UNKNOWN_TOPIC_OR_PARTITION, None),
        (
            "u",
            Errors.INVALID_PARTITIONS,
            "The topic u currently has 2 partition(s); 1 would not be an increase.",
        ),
    ]
    cases = [
        (
            to("t", 4, [NODE]),
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            to("t", 3, [NODE + 1]),
            f"The manual partition assignment includes broker {NODE + 1}, but no such broker is registered.",
        ),
        (to("t", 3, []), "The manual partition assignment includes an empty replica list."),
    ]
    for topic, message in cases:
        (result,) = grow(ctx, topic)
        assert outcome(result) == (Errors.INVALID_REPLICA_ASSIGNMENT, message)
    assert len(broker.topic("t").partitions) == 2 and len(broker.topic("dup").partitions) == 1


# -- DescribeConfigs ------------------------------------------------------------------------------


def describe(
    ctx: RequestContext,
    *resources: tuple[int, str, list[str] | None],
    version: int = 4,
    synonyms: bool = False,
) -> list:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
            for t, n, k in resources
        ],
        include_synonyms=synonyms,
        include_documentation=version >= 3,
    )
    return answer(describe_configs, ctx, request, version).results


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_topic_configs(ctx: RequestContext, broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, 1, {"cleanup.policy": "compact"}, NOW)
    (result,) = describe(ctx, (TOPIC, "t", None), version=version, synonyms=True)
    assert (result.error_code, result.error_message, result.resource_type, result.resource_name) == (
        0,
        None,
        2,
        "t",
    )
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.read_only, policy.is_sensitive) == (
        "compact",
        DYNAMIC_TOPIC_CONFIG,
        False,
        False,
    )
    assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
        ("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", DEFAULT_CONFIG),
    ]
    assert configs["retention.bytes"].config_source == DEFAULT_CONFIG
    if version >= 3:
        assert (
            policy.config_type,
            configs["retention.bytes"].config_type,
            configs["preallocate"].config_type,
        ) == (7, 5, 1)
        assert policy.documentation is None
    else:
        assert policy.config_type == 0


def test_describe_topic_selected_keys_without_synonyms(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    (result,) = describe(ctx, (TOPIC, "t", ["segment.bytes", "no.such.key"]))
    (entry,) = result.configs
    assert (entry.name, entry.value, entry.config_source, entry.synonyms, entry.config_type) == (
        "segment.bytes",
        str(1 << 30),
        DEFAULT_CONFIG,
        [],
        3,
    )
    (result,) = describe(ctx, (TOPIC, "t", []))
    assert len(result.configs) == len(TOPIC_CONFIGS)


def test_describe_configs_errors(ctx: RequestContext, broker: Broker) -> None:
    results = describe(
        ctx,
        (TOPIC, "missing", None),
        (TOPIC, "bad name", None),
        (BROKER, "8", None),
        (BROKER, "x", None),
        (8, str(NODE), None),
    )
    assert [(r.resource_type, r.resource_name, r.error_code, r.configs) for r in results] == [
        (2, "missing", Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
        (2, "bad name", Errors.INVALID_TOPIC_EXCEPTION, []),
        (4, "8", Errors.INVALID_REQUEST, []),
        (4, "x", Errors.INVALID_REQUEST, []),
        (8, str(NODE), Errors.INVALID_REQUEST, []),
    ]
    assert (
        results[2].error_message == f"Unexpected broker id, expected {NODE} or empty string, but received 8"
    )
    assert results[3].error_message == "Broker id must be an integer, but it is: x"
    # A resource type Kafka does not know fails the whole request.
    results = describe(ctx, (BROKER, str(NODE), None), (99, "x", None))
    assert [(r.resource_type, r.error_code) for r in results] == [
        (4, Errors.INVALID_REQUEST),
        (99, Errors.INVALID_REQUEST),
    ]


def test_describe_broker_configs(ctx: RequestContext) -> None:
    (own, default) = describe(ctx, (BROKER, str(NODE), None), (BROKER, "", None), synonyms=True)
    # Kafka 4.1's cluster default holds min.insync.replicas (KIP-966) before anything is set.
    assert (own.error_code, default.error_code, [(c.name, c.value) for c in default.configs]) == (
        0, 0, [("min.insync.replicas", "1")])
    configs = {c.name: c for c in own.configs}
    assert all(c.read_only == (dynamic_config_type(c.name) is None) for c in own.configs)
    assert not configs["log.retention.ms"].read_only and configs["num.partitions"].read_only
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.config_source, partitions.config_type) == (
        "3",
        STATIC_BROKER_CONFIG,
        3,
    )
    assert [(s.name, s.value, s.source) for s in partitions.synonyms] == [
        ("num.partitions", "3", STATIC_BROKER_CONFIG),
        ("num.partitions", "1", DEFAULT_CONFIG),
    ]
    assert (configs["node.id"].value, configs["message.max.bytes"].config_source) == (
        str(NODE),
        DEFAULT_CONFIG,
    )
    (own,) = describe(ctx, (BROKER, str(NODE), ["fsync"]), version=1)
    assert [(c.name, c.value) for c in own.configs] == [("fsync", "interval")]


# -- AlterConfigs ---------------------------------------------------------------------------------


def alter(
    ctx: RequestContext,
    *resources: tuple[int, str, dict[str, str | None]],
    version: int = 2,
    validate_only: bool = False,
) -> list:
    request = ac.AlterConfigsRequest(
        resources=[
            ac.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=[ac.AlterableConfig(name=k, value=v) for k, v in c.items()],
            )
            for t, n, c in resources
        ],
        validate_only=validate_only,
    )
    return answer(alter_configs, ctx, request, version).responses


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_replaces_overrides(ctx: RequestContext, broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, 1, {"retention.ms": "1000", "cleanup.policy": "compact"}, NOW)
    (result,) = alter(ctx, (TOPIC, "t", {"segment.bytes": "1048576"}), version=version)
    assert (result.resource_type, result.resource_name, *outcome(result)) == (2, "t", 0, None)
    assert broker.topic("t").meta.configs == {"segment.bytes": "1048576"}
    assert broker.topic("t").log_config.segment_bytes == 1 << 20


def test_alter_configs_validate_only(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {"retention.ms": "1000"}, NOW)
    (result,) = alter(ctx, (TOPIC, "t", {}), validate_only=True)
    assert outcome(result) == (0, None)
    assert broker.topic("t").meta.configs == {"retention.ms": "1000"}


def test_alter_configs_errors(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {"retention.ms": "1000"}, NOW)
    results = alter(
        ctx,
        (TOPIC, "t", {"retention.ms": "-5"}),
        (TOPIC, "missing", {"nope": "1"}),
        (TOPIC, "missing", {}),
        (TOPIC, "", {}),
        (TOPIC, "bad name", {}),
        (TOPIC, "x", {"a": None, "b": None}),
        (BROKER, str(NODE), {"num.partitions": "5", "log.retention.ms": "1"}),
        (BROKER, "", {"min.insync.replicas": "1"}),
        (BROKER, "3", {}),
        (BROKER, "one", {}),
        (8, str(NODE), {}),
    )
    assert [outcome(r) for r in results] == [
        (Errors.INVALID_CONFIG, "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
        (Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        (Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        (Errors.INVALID_REQUEST, "Default topic resources are not allowed."),
        (
            Errors.INVALID_TOPIC_EXCEPTION,
            "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        ),
        (Errors.INVALID_REQUEST, "Null value not supported for : a, b"),
        (
            Errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(num.partitions)",
        ),
        (0, None),
        (Errors.INVALID_REQUEST, f"Unexpected broker id, expected {NODE}, but received 3"),
        (Errors.INVALID_REQUEST, "Node id must be an integer, but it is: one"),
        (Errors.INVALID_REQUEST, "Unknown resource type 8"),
    ]
    assert broker.topic("t").meta.configs == {"retention.ms": "1000"}
    # Configs are validated before the topic is looked up (Kafka's controller order).
    results = alter(ctx, (TOPIC, "missing", {"nope": "1"}), (TOPIC, "gone", {"retention.ms": "5"}))
    assert [outcome(r) for r in results] == [
        (Errors.INVALID_CONFIG, "Unknown topic config name: nope"),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'gone' does not exist."),
    ]
    request = ac.AlterConfigsRequest(
        resources=[
            ac.AlterConfigsResource(
                resource_type=TOPIC,
                resource_name="t",
                configs=[
                    ac.AlterableConfig(name="retention.ms", value="1"),
                    ac.AlterableConfig(name="retention.ms", value="2"),
                ],
            )
        ]
    )
    (result,) = answer(alter_configs, ctx, request, 2).responses
    assert outcome(result) == (Errors.INVALID_REQUEST, "Error due to duplicate config keys")


# -- IncrementalAlterConfigs ----------------------------------------------------------------------


def incremental(
    ctx: RequestContext,
    *resources: tuple[int, str, list[tuple[str, int, str | None]]],
    version: int = 1,
    validate_only: bool = False,
) -> list:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=[iac.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
            for t, n, ops in resources
        ],
        validate_only=validate_only,
    )
    return answer(incremental_alter_configs, ctx, request, version).responses


@pytest.mark.parametrize("version", range(2))
def test_incremental_set_and_delete(ctx: RequestContext, broker: Broker, version: int) -> None:
    broker.create_topic("t", 1, 1, {"retention.ms": "1000", "segment.ms": "5000"}, NOW)
    (result,) = incremental(
        ctx,
        (
            TOPIC,
            "t",
            [("retention.ms", DELETE, None), ("segment.bytes", SET, "1048576"), ("nope", DELETE, "x")],
        ),
        version=version,
    )
    assert (result.resource_type, result.resource_name, *outcome(result)) == (2, "t", 0, None)
    assert broker.topic("t").meta.configs == {"segment.ms": "5000", "segment.bytes": "1048576"}
    assert broker.topic("t").log_config.segment_bytes == 1 << 20


def test_incremental_append_and_subtract(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {}, NOW)
    (result,) = incremental(ctx, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))
    assert outcome(result) == (0, None)
    assert broker.topic("t").meta.configs == {"cleanup.policy": "delete,compact"}
    incremental(ctx, (TOPIC, "t", [("cleanup.policy", APPEND, "compact,delete")]))
    assert broker.topic("t").meta.configs == {"cleanup.policy": "delete,compact"}
    incremental(ctx, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    assert broker.topic("t").meta.configs == {"cleanup.policy": "compact"}
    incremental(ctx, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")]))
    assert broker.topic("t").meta.configs == {"cleanup.policy": ""}
    (result,) = incremental(ctx, (TOPIC, "t", [("cleanup.policy", APPEND, "nope")]))
    assert outcome(result) == (
        Errors.INVALID_CONFIG,
        "Invalid value nope for configuration cleanup.policy: String must be one of: compact, delete",
    )
    assert broker.topic("t").meta.configs == {"cleanup.policy": ""}


def test_incremental_validate_only(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {"retention.ms": "1000"}, NOW)
    (result,) = incremental(ctx, (TOPIC, "t", [("retention.ms", SET, "2000")]), validate_only=True)
    assert outcome(result) == (0, None)
    assert broker.topic("t").meta.configs == {"retention.ms": "1000"}


def test_incremental_errors(ctx: RequestContext, broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {"retention.ms": "1000"}, NOW)
    results = incremental(
        ctx,
        (TOPIC, "t", [("retention.ms", APPEND, "5")]),
        (TOPIC, "u", [("nope", SET, "1")]),
        (TOPIC, "v", [("retention.ms", SET, None)]),
        (TOPIC, "w", [("retention.ms", 9, "1")]),
        (TOPIC, "missing", [("retention.ms", SET, "1")]),
        (TOPIC, "", [("retention.ms", SET, "1")]),
        (BROKER, str(NODE), [("log.retention.ms", SET, "1"), ("num.partitions", SET, "3")]),
        (BROKER, "", [("num.partitions", DELETE, None)]),
        (BROKER, "9", []),
        (8, str(NODE), [("root", SET, "DEBUG")]),
    )
    assert [outcome(r) for r in results] == [
        (Errors.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
        (Errors.INVALID_CONFIG, "Unknown topic config name: nope"),
        (Errors.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (Errors.INVALID_REQUEST, "Unknown operations type 9"),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
        (Errors.INVALID_REQUEST, "Default topic resources are not allowed."),
        (Errors.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)"),
        (0, None),
        (Errors.INVALID_REQUEST, f"Unexpected broker id, expected {NODE}, but received 9"),
        (Errors.INVALID_REQUEST, "Unknown resource type 8"),
    ]
    assert broker.topic("t").meta.configs == {"retention.ms": "1000"}
    (first, second) = incremental(ctx, (TOPIC, "t", []), (TOPIC, "t", []))
    assert (
        outcome(first)
        == outcome(second)
        == (Errors.INVALID_REQUEST, "Each resource must appear at most once.")
    )
    (result,) = incremental(ctx, (TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]))
    assert outcome(result) == (Errors.INVALID_REQUEST, "Error due to duplicate config keys")


def test_create_topics_manual_assignment_ignores_default_replication_factor(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path, node_id=NODE, default_replication_factor=3)
    broker = Broker(config, NOW)
    try:
        ctx = RequestContext(broker, config, NOW, "test-client")
        (result,) = create(ctx, assigned([NODE]))
        assert outcome(result) == (0, None)
        (result,) = create(ctx, creatable("u", 1, -1))
        assert result.error_code == Errors.INVALID_REPLICATION_FACTOR
    finally:
        broker.close()
