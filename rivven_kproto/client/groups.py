"""Consumer-group admin: list, describe (members, assignments, committed offsets, lag), delete,
and commit offsets on behalf of an inactive group, as Kafka's ``kafka-consumer-groups.sh`` does.

ListGroups goes to every broker (each lists the groups it coordinates); the other requests go to
the group's coordinator (FindCoordinator key type 0), looked up again on NOT_COORDINATOR and
retried while the coordinator is loading. Member assignments of the ``consumer`` protocol type are
decoded (ConsumerProtocolAssignment: ``version:int16 [topic:string [partition:int32]]
user_data:bytes``); other protocol types keep them opaque. A KIP-848 consumer group, which
DescribeGroups reports as Dead, is described with ConsumerGroupDescribe: its group and assignment
epochs, and per member its epoch and its current and target assignments.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from rivven_kproto.codec.enums import LATEST
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedAssignment,
)
from rivven_kproto.codec.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from rivven_kproto.codec.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from rivven_kproto.codec.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from rivven_kproto.codec.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from rivven_kproto.codec.schema import Request, Response
from rivven_kproto.net.errors import KafkaResponseError, check

from .admin import list_offsets
from .client import RETRY_BACKOFF_S, KafkaClient
from .coordinator import KeyType, find_coordinator

R = TypeVar("R", bound=Response)
TP = tuple[str, int]

CONSUMER_PROTOCOL = "consumer"
INACTIVE_STATES = ("Empty", "Dead")
REFIND = {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE}
WAIT = {Errors.COORDINATOR_LOAD_IN_PROGRESS}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str | None
    coordinator: int
    group_type: str | None = None  # "classic" or "consumer" (ListGroups v5+)


@dataclass
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TP] | None  # None: not the consumer protocol, or undecodable
    member_epoch: int | None = None  # KIP-848 consumer groups only
    target_assignment: list[TP] | None = None  # KIP-848 consumer groups only


@dataclass
class GroupDescription:
    group_id: str
    coordinator: int
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember] = field(default_factory=list)
    group_type: str = "classic"
    group_epoch: int | None = None  # KIP-848 consumer groups only
    assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


@dataclass
class CommittedOffset:
    offset: int
    metadata: str | None
    leader_epoch: int


def decode_assignment(data: bytes) -> list[TP] | None:
    """The partitions of a ConsumerProtocolAssignment (any version); None if the bytes are not one."""
    try:
        pos = _I16.size
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            return None
        (topics,) = _I32.unpack_from(data, pos)
        pos += _I32.size
        if topics < 0 or topics > len(data):
            return None
        result: list[TP] = []
        for _ in range(topics):
            (length,) = _I16.unpack_from(data, pos)
            pos += _I16.size
            if length < 0 or pos + length > len(data):
                return None
            topic = data[pos : pos + length].decode()
            pos += length
            (count,) = _I32.unpack_from(data, pos)
            pos += _I32.size
            if count < 0 or pos + count * _I32.size > len(data):
                return None
            result += [(topic, _I32.unpack_from(data, pos + i * _I32.size)[0]) for i in range(count)]
            pos += count * _I32.size
        return sorted(result)
    except (struct.error, UnicodeDecodeError):
        return None


async def coordinator_call(
    client: KafkaClient,
    group_id: str,
    request_cls: type[Request],
    build: Callable[[int], Request],
    response_cls: type[R],
    error_of: Callable[[R], int],
    *,
    min_version: int = 0,
    timeout: float | None = None,
) -> tuple[int, R]:
    """(coordinator node, response), retrying coordinator moves and loads within the deadline."""
    with client.deadline(f"{request_cls.kafka_name().removesuffix('Request')} for group {group_id}", timeout):
        while True:
            node = await find_coordinator(client, KeyType.GROUP, group_id)
            response = await client.call(
                request_cls, build, response_cls, node_id=node, min_version=min_version, timeout=timeout
            )
            error = Errors.for_code(error_of(response))
            if error not in REFIND and error not in WAIT:
                return node, response
            await trio.sleep(RETRY_BACKOFF_S)


async def list_groups(client: KafkaClient, states: list[str] | None = None) -> list[ListedGroup]:
    """Every broker's groups; with ``states`` only those (needs ListGroups v4)."""

    def build(version: int) -> ListGroupsRequest:
        return ListGroupsRequest(states_filter=list(states or []) if version >= 4 else [])

    metadata = await client.metadata([])
    listed = []
    for node in sorted(metadata.brokers):
        response = await client.call(ListGroupsRequest, build, ListGroupsResponse, node_id=node, min_version=4 if states else 0)
        check(response.error_code, context=f"ListGroups on broker {node}")
        version = (await client.versions(node)).version_for(ListGroupsRequest)
        listed += [
            ListedGroup(g.group_id, g.protocol_type, g.group_state if version >= 4 else None, node,
                        g.group_type if version >= 5 else None)
            for g in response.groups
        ]
    return sorted(listed, key=lambda g: g.group_id)


async def describe_group(client: KafkaClient, group_id: str) -> GroupDescription:
    """State, protocol and members; an unknown group comes back in state Dead."""

    def build(version: int) -> DescribeGroupsRequest:
        return DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False)

    def error_of(response: DescribeGroupsResponse) -> int:
        return next((g.error_code for g in response.groups if g.group_id == group_id), 0)

    node, response = await coordinator_call(client, group_id, DescribeGroupsRequest, build, DescribeGroupsResponse, error_of)
    described = next((g for g in response.groups if g.group_id == group_id), None)
    if described is None:
        raise KafkaResponseError(-1, f"DescribeGroups answered without group {group_id}")
    check(described.error_code, context=f"group {group_id}")
    if described.group_state == "Dead" and (await client.versions(node)).supports(ConsumerGroupDescribeRequest):
        found = await describe_consumer_group(client, group_id)
        if found is not None:
            return found
    consumer = described.protocol_type == CONSUMER_PROTOCOL
    members = [
        GroupMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            decode_assignment(m.member_assignment) if consumer else None,
        )
        for m in described.members
    ]
    return GroupDescription(
        group_id, node, described.group_state, described.protocol_type, described.protocol_data,
        sorted(members, key=lambda m: m.member_id),
    )


async def describe_consumer_group(client: KafkaClient, group_id: str) -> GroupDescription | None:
    """ConsumerGroupDescribe; None when the group is not a KIP-848 consumer group."""

    def build(version: int) -> ConsumerGroupDescribeRequest:
        return ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)

    def error_of(response: ConsumerGroupDescribeResponse) -> int:
        return next((g.error_code for g in response.groups if g.group_id == group_id), 0)

    node, response = await coordinator_call(
        client, group_id, ConsumerGroupDescribeRequest, build, ConsumerGroupDescribeResponse, error_of)
    described = next((g for g in response.groups if g.group_id == group_id), None)
    if described is None or described.error_code == Errors.GROUP_ID_NOT_FOUND:
        return None
    check(described.error_code, context=f"group {group_id}")
    members = [
        GroupMember(m.member_id, m.instance_id, m.client_id, m.client_host, _partitions(m.assignment),
                    m.member_epoch, _partitions(m.target_assignment))
        for m in described.members
    ]
    return GroupDescription(
        group_id, node, described.group_state, CONSUMER_PROTOCOL, described.assignor_name,
        sorted(members, key=lambda m: m.member_id), "consumer", described.group_epoch, described.assignment_epoch,
    )


def _partitions(assignment: DescribedAssignment) -> list[TP]:
    return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


async def fetch_offsets(client: KafkaClient, group_id: str, partitions: list[TP] | None = None) -> dict[TP, CommittedOffset]:
    """The group's committed offsets (None: every partition it committed); uncommitted ones are left out."""
    wanted: dict[str, list[int]] | None = None
    if partitions is not None:
        wanted = defaultdict(list)
        for topic, partition in partitions:
            wanted[topic].append(partition)

    def build(version: int) -> OffsetFetchRequest:
        if version >= 8:
            topics = None if wanted is None else [OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in wanted.items()]
            return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group_id, topics=topics)], require_stable=False)
        single = None if wanted is None else [OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in wanted.items()]
        return OffsetFetchRequest(group_id=group_id, topics=single, require_stable=False)

    def error_of(response: OffsetFetchResponse) -> int:
        return response.groups[0].error_code if response.groups else response.error_code

    _, response = await coordinator_call(
        client, group_id, OffsetFetchRequest, build, OffsetFetchResponse, error_of, min_version=2 if wanted is None else 0
    )
    check(error_of(response), context=f"OffsetFetch for group {group_id}")
    topics: list[tuple[str, list[tuple[int, int, str | None, int, int]]]] = []
    if response.groups:
        topics = [
            (t.name, [(p.partition_index, p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code) for p in t.partitions])
            for t in response.groups[0].topics
        ]
    else:
        topics = [
            (t.name, [(p.partition_index, p.committed_offset, p.metadata, p.committed_leader_epoch, p.error_code) for p in t.partitions])
            for t in response.topics
        ]
    result: dict[TP, CommittedOffset] = {}
    for topic, items in topics:
        for partition, offset, metadata, leader_epoch, error in items:
            check(error, context=f"OffsetFetch {topic}-{partition} for group {group_id}")
            if offset >= 0:
                result[(topic, partition)] = CommittedOffset(offset, metadata, leader_epoch)
    return dict(sorted(result.items()))


async def commit_offsets(
    client: KafkaClient, group_id: str, offsets: dict[TP, int], *, generation_id: int = -1, member_id: str = ""
) -> None:
    """OffsetCommit as a member of ``generation_id``, or outside any generation (the defaults: -1 and
    no member), which Kafka allows only for an inactive group."""
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = defaultdict(list)
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic[topic].append(OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset, committed_metadata=""))

    def build(version: int) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=generation_id,
            member_id=member_id,
            group_instance_id=None,
            topics=[OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )

    def error_of(response: OffsetCommitResponse) -> int:
        return next((p.error_code for t in response.topics for p in t.partitions if p.error_code), 0)

    _, response = await coordinator_call(client, group_id, OffsetCommitRequest, build, OffsetCommitResponse, error_of)
    for answered in response.topics:
        for answer in answered.partitions:
            check(answer.error_code, context=f"committing {answered.name}-{answer.partition_index} for group {group_id}")


async def delete_groups(client: KafkaClient, group_ids: list[str]) -> dict[str, int]:
    """DeleteGroups at each group's coordinator; the error code per group (0: deleted)."""
    results: dict[str, int] = {}
    for group_id in dict.fromkeys(group_ids):

        def build(version: int, group_id: str = group_id) -> DeleteGroupsRequest:
            return DeleteGroupsRequest(groups_names=[group_id])

        def error_of(response: DeleteGroupsResponse, group_id: str = group_id) -> int:
            return next((r.error_code for r in response.results if r.group_id == group_id), 0)

        _, response = await coordinator_call(client, group_id, DeleteGroupsRequest, build, DeleteGroupsResponse, error_of)
        results[group_id] = error_of(response)
    return results


async def end_offsets(client: KafkaClient, partitions: list[TP], timestamp: int = LATEST) -> dict[TP, int | None]:
    """ListOffsets at ``timestamp`` (-2 earliest, -1 latest, else ms) on each partition's leader.

    None for a partition of a topic that no longer exists; for a timestamp after the last record
    Kafka answers -1, kept as is for the caller to interpret.
    """
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    metadata = await client.metadata(sorted(by_topic)) if by_topic else None
    result: dict[TP, int | None] = dict.fromkeys(partitions)
    for topic, indexes in sorted(by_topic.items()):
        info = metadata.topics.get(topic) if metadata is not None else None
        if info is None or info.error:
            continue
        by_leader: dict[int, list[int]] = defaultdict(list)
        known = {p.partition: p.leader for p in info.partitions}
        for index in indexes:
            if known.get(index, -1) >= 0:
                by_leader[known[index]].append(index)
        for leader, leader_partitions in sorted(by_leader.items()):
            for index, offset in (await list_offsets(client, leader, topic, leader_partitions, timestamp)).items():
                result[(topic, index)] = offset
    return result


async def topic_partitions(client: KafkaClient, topic: str) -> list[TP]:
    info = await client.topic(topic)
    return [(topic, p.partition) for p in info.partitions]

