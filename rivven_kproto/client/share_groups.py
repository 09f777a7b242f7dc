"""Share-group admin (KIP-932), as Kafka's ``kafka-share-groups.sh`` does it: list (ListGroups
with the ``share`` type filter, v5), describe (ShareGroupDescribe for members and assignments,
DescribeShareGroupOffsets for each share-partition's start offset and lag), delete (DeleteGroups)
set start offsets (AlterShareGroupOffsets) and forget whole topics (DeleteShareGroupOffsets) of an
empty group. The group requests go to the
group's coordinator, as for consumer groups (``groups.coordinator_call``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rivven_kproto.codec.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from rivven_kproto.codec.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
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
    DescribeShareOffsetsRequestGroup,
)
from rivven_kproto.net.errors import KafkaResponseError, check

from .client import KafkaClient
from .groups import TP, coordinator_call

SHARE_TYPE = "share"
UNINITIALIZED = -1  # a share-partition the group has not started yet


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: list[TP]


@dataclass
class ShareOffset:
    start_offset: int  # -1: not initialized
    lag: int  # -1: unknown


@dataclass
class ShareGroupDescription:
    group_id: str
    coordinator: int
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMember] = field(default_factory=list)
    offsets: dict[TP, ShareOffset] = field(default_factory=dict)


@dataclass
class ListedShareGroup:
    group_id: str
    state: str
    coordinator: int


async def list_share_groups(client: KafkaClient) -> list[ListedShareGroup]:
    """Every broker's share groups (ListGroups v5's type filter)."""

    def build(version: int) -> ListGroupsRequest:
        return ListGroupsRequest(types_filter=[SHARE_TYPE])

    metadata = await client.metadata([])
    listed = []
    for node in sorted(metadata.brokers):
        response = await client.call(ListGroupsRequest, build, ListGroupsResponse, node_id=node, min_version=5)
        check(response.error_code, context=f"ListGroups on broker {node}")
        listed += [ListedShareGroup(g.group_id, g.group_state, node) for g in response.groups]
    return sorted(listed, key=lambda g: g.group_id)


async def describe_share_group(client: KafkaClient, group_id: str) -> ShareGroupDescription:
    """Members, assignments and every share-partition's start offset and lag."""

    def build(version: int) -> ShareGroupDescribeRequest:
        return ShareGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)

    def error_of(response: ShareGroupDescribeResponse) -> int:
        return next((g.error_code for g in response.groups if g.group_id == group_id), 0)

    node, response = await coordinator_call(client, group_id, ShareGroupDescribeRequest, build,
                                            ShareGroupDescribeResponse, error_of, min_version=1)
    described = next((g for g in response.groups if g.group_id == group_id), None)
    if described is None:
        raise KafkaResponseError(-1, f"ShareGroupDescribe answered without group {group_id}")
    check(described.error_code, context=f"share group {group_id}")
    description = ShareGroupDescription(
        group_id, node, described.group_state, described.group_epoch, described.assignment_epoch,
        described.assignor_name,
        [ShareMember(m.member_id, m.client_id, m.client_host, m.member_epoch,
                     sorted((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions))
         for m in described.members])
    description.offsets = await share_offsets(client, group_id)
    return description


async def share_offsets(client: KafkaClient, group_id: str) -> dict[TP, ShareOffset]:
    """DescribeShareGroupOffsets of every share-partition the group has."""

    def build(version: int) -> DescribeShareGroupOffsetsRequest:
        return DescribeShareGroupOffsetsRequest(groups=[DescribeShareOffsetsRequestGroup(group_id=group_id, topics=None)])

    def error_of(response: DescribeShareGroupOffsetsResponse) -> int:
        return next((g.error_code for g in response.groups if g.group_id == group_id), 0)

    _, response = await coordinator_call(client, group_id, DescribeShareGroupOffsetsRequest, build,
                                         DescribeShareGroupOffsetsResponse, error_of)
    offsets: dict[TP, ShareOffset] = {}
    for group in response.groups:
        check(group.error_code, context=f"share group {group_id}")
        for topic in group.topics:
            for p in topic.partitions:
                check(p.error_code, context=f"share group {group_id} on {topic.topic_name}-{p.partition_index}")
                offsets[(topic.topic_name, p.partition_index)] = ShareOffset(p.start_offset, p.lag)
    return offsets


async def alter_share_offsets(client: KafkaClient, group_id: str, starts: dict[TP, int]) -> None:
    """Set an empty share group's start offsets (NON_EMPTY_GROUP while it has members)."""
    by_topic: dict[str, list[AlterShareOffsetsRequestPartition]] = {}
    for (topic, partition), offset in sorted(starts.items()):
        by_topic.setdefault(topic, []).append(AlterShareOffsetsRequestPartition(partition_index=partition,
                                                                                start_offset=offset))

    def build(version: int) -> AlterShareGroupOffsetsRequest:
        return AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
            AlterShareOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()])

    def error_of(response: AlterShareGroupOffsetsResponse) -> int:
        return response.error_code

    _, response = await coordinator_call(client, group_id, AlterShareGroupOffsetsRequest, build,
                                         AlterShareGroupOffsetsResponse, error_of)
    check(response.error_code, context=f"share group {group_id}", message=response.error_message)
    for answered in response.responses:
        for p in answered.partitions:
            check(p.error_code, context=f"share group {group_id} on {answered.topic_name}-{p.partition_index}")


async def delete_share_offsets(client: KafkaClient, group_id: str, topics: list[str]) -> dict[str, int]:
    """Forget an empty share group's state for whole topics (their next delivery starts again from
    share.auto.offset.reset); an error code per topic. A group-level error (NON_EMPTY_GROUP,
    GROUP_ID_NOT_FOUND, ...) raises."""

    def build(version: int) -> DeleteShareGroupOffsetsRequest:
        return DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
            DeleteShareOffsetsRequestTopic(topic_name=t) for t in dict.fromkeys(topics)])

    def error_of(response: DeleteShareGroupOffsetsResponse) -> int:
        return response.error_code

    _, response = await coordinator_call(client, group_id, DeleteShareGroupOffsetsRequest, build,
                                         DeleteShareGroupOffsetsResponse, error_of)
    check(response.error_code, context=f"share group {group_id}", message=response.error_message)
    return {t.topic_name: t.error_code for t in response.responses}
