"""Admin operations on a :class:`~.client.KafkaClient`: cluster, topics, offsets and configs.

Each function builds its request for the version negotiated with the node that must serve it
(controller for topic changes, the leader for offsets, the named broker for its configs), checks
every error code in the answer and returns plain dataclasses, so the CLI only renders.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from rivven_kproto.codec.enums import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AlterConfigOp,
    ConfigSource,
)
from rivven_kproto.codec.enums import ConfigResourceType as ResourceType  # the CLI's admin.ResourceType
from rivven_kproto.codec.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from rivven_kproto.codec.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from rivven_kproto.codec.messages.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from rivven_kproto.codec.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from rivven_kproto.codec.messages.describe_log_dirs import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from rivven_kproto.codec.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from rivven_kproto.net.errors import KafkaResponseError, check
from rivven_kproto.net.versions import ApiSupport

from .client import BrokerInfo, KafkaClient, PartitionInfo, TopicInfo

# The request timeout we ask the controller to honour; our own deadline still bounds the wait.
ADMIN_TIMEOUT_MS = 30_000


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]
    apis: list[ApiSupport]
    led: dict[int, int] = field(default_factory=dict)  # node id -> partitions it leads
    features: dict[str, int] = field(default_factory=dict)  # finalized KIP-584 feature levels


@dataclass
class PartitionOffsets:
    log_start_offset: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    size_bytes: int | None = None


@dataclass
class TopicDescription:
    topic: TopicInfo
    offsets: dict[int, PartitionOffsets] = field(default_factory=dict)


@dataclass
class CreatedTopic:
    name: str
    topic_id: str | None
    partitions: int
    replication_factor: int


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


async def cluster_info(client: KafkaClient) -> ClusterInfo:
    metadata = await client.metadata(None)
    versions = await client.versions()
    led = dict.fromkeys(metadata.brokers, 0)
    for topic in metadata.topics.values():
        for partition in topic.partitions:
            if partition.leader >= 0:
                led[partition.leader] = led.get(partition.leader, 0) + 1
    return ClusterInfo(
        metadata.cluster_id,
        metadata.controller_id,
        sorted(metadata.brokers.values(), key=lambda b: b.node_id),
        sorted(versions.apis.values(), key=lambda a: a.api_key),
        led,
        dict(sorted(versions.finalized_features.items())),
    )


async def list_topics(client: KafkaClient) -> list[TopicInfo]:
    metadata = await client.metadata(None)
    for topic in metadata.topics.values():
        check(topic.error, context=f"topic {topic.name}")
    return sorted(metadata.topics.values(), key=lambda t: t.name)


async def describe_topics(client: KafkaClient, names: list[str]) -> list[TopicDescription]:
    """Layout from Metadata, then log start / high watermark / last stable offset per partition."""
    metadata = await client.metadata(names)
    descriptions = []
    for name in names:
        topic = metadata.topics.get(name)
        if topic is None:
            raise KafkaResponseError(3, context=f"topic {name}")
        check(topic.error, context=f"topic {name}")
        descriptions.append(TopicDescription(topic, await partition_offsets(client, topic)))
    return descriptions


async def partition_offsets(client: KafkaClient, topic: TopicInfo) -> dict[int, PartitionOffsets]:
    by_leader: dict[int, list[PartitionInfo]] = defaultdict(list)
    for partition in topic.partitions:
        if partition.leader >= 0:
            by_leader[partition.leader].append(partition)
    result = {p.partition: PartitionOffsets() for p in topic.partitions}
    for leader, partitions in sorted(by_leader.items()):
        indexes = [p.partition for p in partitions]
        versions = await client.versions(leader)
        if not versions.supports(ListOffsetsRequest):
            continue  # the table shows n/a
        earliest = await list_offsets(client, leader, topic.name, indexes, EARLIEST)
        latest = await list_offsets(client, leader, topic.name, indexes, LATEST)
        stable: dict[int, int] = {}
        if versions.supports(ListOffsetsRequest, min_version=2):
            stable = await list_offsets(client, leader, topic.name, indexes, LATEST, READ_COMMITTED)
        sizes: dict[int, int] = {}
        if versions.supports(DescribeLogDirsRequest):
            sizes = await partition_sizes(client, leader, topic.name, indexes)
        for index in indexes:
            result[index] = PartitionOffsets(earliest.get(index), latest.get(index), stable.get(index), sizes.get(index))
    return result


async def partition_sizes(client: KafkaClient, node_id: int, topic: str, partitions: list[int]) -> dict[int, int]:
    """Bytes on disk per partition, summed over the node's log directories (DescribeLogDirs).

    Empty when the caller may not Describe the cluster (Kafka answers no directories then).
    """
    response = await client.call(
        DescribeLogDirsRequest,
        lambda version: DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic=topic, partitions=partitions)]),
        DescribeLogDirsResponse,
        node_id=node_id,
    )
    sizes: dict[int, int] = defaultdict(int)
    for directory in response.results:
        if directory.error_code:
            continue
        for entry in directory.topics:
            if entry.name == topic:
                for partition in entry.partitions:
                    sizes[partition.partition_index] += partition.partition_size
    return dict(sizes)


async def list_offsets(
    client: KafkaClient,
    leader: int,
    topic: str,
    partitions: list[int],
    timestamp: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> dict[int, int]:
    """ListOffsets for one timestamp (-2 earliest, -1 latest) on the partitions ``leader`` leads."""

    def build(version: int) -> ListOffsetsRequest:
        return ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level if version >= 2 else 0,
            topics=[
                ListOffsetsTopic(
                    name=topic, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions]
                )
            ],
        )

    min_version = 2 if isolation_level else 0
    response = await client.call(ListOffsetsRequest, build, ListOffsetsResponse, node_id=leader, min_version=min_version)
    offsets = {}
    for topic_response in response.topics:
        for partition in topic_response.partitions:
            check(partition.error_code, context=f"ListOffsets {topic_response.name}-{partition.partition_index}")
            offsets[partition.partition_index] = partition.offset
    return offsets


async def create_topic(
    client: KafkaClient, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> CreatedTopic:
    """CreateTopics on the controller; -1 partitions or replication factor take the broker default."""

    def build(version: int) -> CreateTopicsRequest:
        topic = CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            assignments=[],
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
        )
        return CreateTopicsRequest(topics=[topic], timeout_ms=ADMIN_TIMEOUT_MS)

    min_version = 4 if partitions < 0 or replication_factor < 0 else 0  # KIP-464 broker defaults
    await client.metadata([])  # learn the controller
    response = await client.call(
        CreateTopicsRequest, build, CreateTopicsResponse, node_id=client.controller_id, min_version=min_version
    )
    for result in response.topics:
        check(result.error_code, result.error_message, context=f"topic {result.name}")
        if result.name == name:
            return CreatedTopic(
                name,
                None if result.topic_id.int == 0 else str(result.topic_id),
                result.num_partitions if result.num_partitions >= 0 else partitions,
                result.replication_factor if result.replication_factor >= 0 else replication_factor,
            )
    raise KafkaResponseError(-1, f"CreateTopics answered without topic {name}")


async def delete_topics(client: KafkaClient, names: list[str]) -> list[str]:
    def build(version: int) -> DeleteTopicsRequest:
        if version >= 6:
            return DeleteTopicsRequest(topics=[DeleteTopicState(name=n) for n in names], timeout_ms=ADMIN_TIMEOUT_MS)
        return DeleteTopicsRequest(topic_names=list(names), timeout_ms=ADMIN_TIMEOUT_MS)

    await client.metadata([])
    response = await client.call(DeleteTopicsRequest, build, DeleteTopicsResponse, node_id=client.controller_id)
    for result in response.responses:
        check(result.error_code, result.error_message, context=f"topic {result.name}")
    return list(names)


async def create_partitions(client: KafkaClient, name: str, total: int) -> int:
    """Grow ``name`` to ``total`` partitions; returns the new count."""

    def build(version: int) -> CreatePartitionsRequest:
        return CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=name, count=total, assignments=None)],
            timeout_ms=ADMIN_TIMEOUT_MS,
            validate_only=False,
        )

    await client.metadata([])
    response = await client.call(CreatePartitionsRequest, build, CreatePartitionsResponse, node_id=client.controller_id)
    for result in response.results:
        check(result.error_code, result.error_message, context=f"topic {result.name}")
    return total


async def describe_configs(
    client: KafkaClient, resource_type: ResourceType, name: str, keys: list[str] | None = None
) -> list[ConfigEntry]:
    """A topic's or broker's configs; broker configs are asked of that broker."""

    def build(version: int) -> DescribeConfigsRequest:
        return DescribeConfigsRequest(
            resources=[DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=keys)]
        )

    node = int(name) if resource_type is ResourceType.BROKER and name.isdigit() else None
    response = await client.call(DescribeConfigsRequest, build, DescribeConfigsResponse, node_id=node)
    entries = []
    for result in response.results:
        check(result.error_code, result.error_message, context=f"{resource_type.name.lower()} {name}")
        for config in result.configs:
            entries.append(
                ConfigEntry(
                    config.name,
                    None if config.is_sensitive else config.value,
                    _source_name(config.config_source),
                    config.read_only,
                    config.is_sensitive,
                )
            )
    return sorted(entries, key=lambda e: e.name)


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return ConfigSource.UNKNOWN.name


async def alter_configs(
    client: KafkaClient, resource_type: ResourceType, name: str, changes: list[tuple[str, AlterConfigOp, str | None]]
) -> None:
    """IncrementalAlterConfigs (KIP-339): only the named keys change, the rest stays as it is."""

    def build(version: int) -> IncrementalAlterConfigsRequest:
        configs = [AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes]
        resource = AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=configs)
        return IncrementalAlterConfigsRequest(resources=[resource], validate_only=False)

    if resource_type is ResourceType.BROKER:
        node: int | None = int(name) if name.isdigit() else None
    else:
        await client.metadata([])
        node = client.controller_id
    response = await client.call(IncrementalAlterConfigsRequest, build, IncrementalAlterConfigsResponse, node_id=node)
    for result in response.responses:
        check(result.error_code, result.error_message, context=f"{resource_type.name.lower()} {name}")
