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

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import KafkaError
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._offset_commits import partitions_to_commit, record_results, response_topics

API_KEY = OffsetCommitRequest.API_KEY
ROUTE = LOCAL
GROUP = rule(API_KEY).check("group")
TOPIC = rule(API_KEY).check("topic")


def handle(ctx: RequestContext, request: OffsetCommitRequest, version: int) -> OffsetCommitResponse:
    refused = ctx.refusal(GROUP, request.group_id)
    errors, to_commit = partitions_to_commit(ctx, request.group_id, request.topics, refused, TOPIC)
    if to_commit:
        try:
            results = ctx.groups_for(request.group_id).commit_offsets(
                request.group_id, request.generation_id_or_member_epoch, request.member_id,
                request.group_instance_id, to_commit, ctx.now_ms, version=version,
                retention_ms=request.retention_time_ms if version <= 4 else -1,
            )
        except KafkaError as exc:
            results = [exc.error] * len(to_commit)
        record_results(errors, to_commit, results)
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=response_topics(request.topics, errors, OffsetCommitResponseTopic, OffsetCommitResponsePartition),
    )
