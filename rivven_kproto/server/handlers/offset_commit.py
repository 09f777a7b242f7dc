"""OffsetCommit (8), v2-9: durable committed offsets for a group.

Each partition of an unknown topic (or beyond the topic's partition count) answers
UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request handler does; the rest go to the coordinator,
whose group-level verdict (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND from v9, ...) applies to all of them. Generation -1
with an empty member id is a standalone commit, accepted while the group has no members (and
creating a "simple" group if none exists). Metadata longer than ``offset.metadata.max.bytes``
(Kafka counts Java chars) answers OFFSET_METADATA_TOO_LARGE for that partition. The commit is
written to the coordinator log (and fsynced under ``fsync=always``) before the answer.
v2-4's ``retention_time_ms`` sets an explicit expiry.

Read on the group, then on each topic (the authorization table). Transactional offsets arrive with
TxnOffsetCommit.
"""

from __future__ import annotations

from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

from ..context import RequestContext

API_KEY = OffsetCommitRequest.API_KEY
GROUP = rule(API_KEY).check("group")
TOPIC = rule(API_KEY).check("topic")


def handle(ctx: RequestContext, request: OffsetCommitRequest, version: int) -> OffsetCommitResponse:
    errors: dict[tuple[str, int], Errors] = {}
    to_commit: list[CommitPartition] = []
    group_refused = ctx.refusal(GROUP, request.group_id)
    here = ctx.broker.coordinates(request.group_id)  # not: another broker's shard, NOT_COORDINATOR
    for topic in request.topics:
        known = ctx.broker.topics.get(topic.name)
        topic_refused = ctx.refusal(TOPIC, topic.name)
        for p in topic.partitions:
            if group_refused is not None:
                errors[(topic.name, p.partition_index)] = group_refused
            elif not here:
                errors[(topic.name, p.partition_index)] = Errors.NOT_COORDINATOR
            elif topic_refused is not None:
                errors[(topic.name, p.partition_index)] = topic_refused
            elif known is None or not 0 <= p.partition_index < len(known.partitions):
                errors[(topic.name, p.partition_index)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                to_commit.append(CommitPartition(topic.name, p.partition_index, p.committed_offset,
                                                 p.committed_leader_epoch, p.committed_metadata))
    if to_commit:
        try:
            results = ctx.groups_for(request.group_id).commit_offsets(
                request.group_id, request.generation_id_or_member_epoch, request.member_id,
                request.group_instance_id, to_commit, ctx.now_ms, version=version,
                retention_ms=request.retention_time_ms if version <= 4 else -1,
            )
        except KafkaError as exc:
            results = [exc.error] * len(to_commit)
        for commit, error in zip(to_commit, results, strict=True):
            errors[(commit.topic, commit.partition)] = error
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                  error_code=errors[(topic.name, p.partition_index)])
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )
