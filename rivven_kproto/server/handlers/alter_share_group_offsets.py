"""AlterShareGroupOffsets (91), v0: set share-partitions' start offsets (kafka-share-groups.sh
--reset-offsets). Their in-flight records are dropped: delivery resumes at the new start.

As Kafka: only an empty group's (NON_EMPTY_GROUP), an unknown id becomes an empty share group
with those offsets, a group error is answered at the top and on every partition. Per partition:
TOPIC_AUTHORIZATION_FAILED without Read on the topic, UNKNOWN_TOPIC_OR_PARTITION for one that
does not exist, INVALID_REQUEST for a negative offset. Checks come from the authorization table.
"""

from __future__ import annotations

import uuid

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareOffsetsPartition,
    AlterShareOffsetsTopic,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import offsets_unserved, share_coordinator

API_KEY = AlterShareGroupOffsetsRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")
ZERO_ID = uuid.UUID(int=0)


def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequest, version: int) -> AlterShareGroupOffsetsResponse:
    group_id = request.group_id
    error = Errors.NONE
    message: str | None = None
    if (unserved := offsets_unserved(ctx.broker)) is not None:
        error, message = Errors.UNSUPPORTED_VERSION, unserved
    elif (refused := ctx.refusal(GROUP, group_id)) is not None:
        error = refused
    elif (coordinator := share_coordinator(ctx.broker, group_id)) is None:
        error = Errors.NOT_COORDINATOR
    if error is not Errors.NONE:
        return _answer(ctx, request, {}, error, message)
    assert coordinator is not None
    errors: dict[tuple[str, int], Errors] = {}
    starts: dict[tuple[str, int], int] = {}
    for topic in request.topics:
        refused = ctx.refusal(TOPIC, topic.topic_name)
        for p in topic.partitions:
            key = (topic.topic_name, p.partition_index)
            if refused is not None:
                errors[key] = refused
                continue
            try:
                ctx.broker.check_partition_exists(*key)
            except KafkaError as exc:
                errors[key] = exc.error
                continue
            if p.start_offset < 0:
                errors[key] = Errors.INVALID_REQUEST
                continue
            starts[key] = p.start_offset
            errors[key] = Errors.NONE
    if starts:
        try:
            error = coordinator.alter_offsets(group_id, starts)
        except KafkaError as exc:
            error = exc.error
        if error is Errors.NONE:
            ctx.appended = True  # parked share fetches look again from the new start
        else:
            errors.update({key: error for key in starts})
    return _answer(ctx, request, errors, error, None)


def _answer(ctx: RequestContext, request: AlterShareGroupOffsetsRequest, errors: dict[tuple[str, int], Errors],
            error: Errors, message: str | None) -> AlterShareGroupOffsetsResponse:
    """Every requested partition with its error (the group's when the whole request failed)."""
    responses = []
    for topic in request.topics:
        meta = ctx.broker.topics.get(topic.topic_name)
        responses.append(AlterShareOffsetsTopic(
            topic_name=topic.topic_name, topic_id=meta.meta.topic_id if meta is not None else ZERO_ID,
            partitions=[AlterShareOffsetsPartition(partition_index=p.partition_index,
                                                   error_code=errors.get((topic.topic_name, p.partition_index), error))
                        for p in topic.partitions]))
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                          responses=responses)
