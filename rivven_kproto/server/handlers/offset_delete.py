"""OffsetDelete (47), v0: remove a group's committed offsets for some partitions.

Top-level errors as Kafka: GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for an active
group that does not use the consumer protocol. For an active consumer group each topic its
members subscribe to (read from the consumer-protocol subscriptions of the current generation)
answers GROUP_SUBSCRIBED_TO_TOPIC; the others are deleted. Deleting an offset that does not exist
succeeds. As Kafka, the caller needs Delete on the group and Read on each topic: the partitions of
a topic it may not Read answer TOPIC_AUTHORIZATION_FAILED and keep their offsets.
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = OffsetDeleteRequest.API_KEY
ROUTE = LOCAL
GROUP = rule(API_KEY).check("group")
TOPIC = rule(API_KEY).check("topic")


def handle(ctx: RequestContext, request: OffsetDeleteRequest, version: int) -> OffsetDeleteResponse:
    if (denied := ctx.refusal(GROUP, request.group_id)) is not None:
        return OffsetDeleteResponse(error_code=denied, throttle_time_ms=0, topics=[])
    if not ctx.broker.coordinates(request.group_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return OffsetDeleteResponse(error_code=Errors.NOT_COORDINATOR, throttle_time_ms=0, topics=[])
    wanted, refused = [], []
    for t in request.topics:
        partitions = [p.partition_index for p in t.partitions]
        if (error := ctx.refusal(TOPIC, t.name)) is None:
            wanted.append((t.name, partitions))
        else:
            refused.append((t.name, [(p, error) for p in partitions]))
    try:
        results = ctx.groups_for(request.group_id).delete_offsets(request.group_id, wanted)
    except KafkaError as exc:
        return OffsetDeleteResponse(error_code=exc.error, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(
        error_code=Errors.NONE,
        throttle_time_ms=0,
        topics=[
            OffsetDeleteResponseTopic(
                name=topic,
                partitions=[OffsetDeleteResponsePartition(partition_index=p, error_code=e) for p, e in partitions],
            )
            for topic, partitions in [*refused, *results]
        ],
    )
