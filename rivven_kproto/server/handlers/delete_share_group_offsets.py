"""DeleteShareGroupOffsets (92), v0: forget an empty share group's state for whole topics
(kafka-share-groups.sh --delete-offsets); the next ShareFetch starts them again from
share.auto.offset.reset.

As Kafka: NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND for an unknown one (at
the top); per topic: TOPIC_AUTHORIZATION_FAILED without Read on it, UNKNOWN_TOPIC_OR_PARTITION
when the group has no state for it. Checks come from the authorization table.
"""

from __future__ import annotations

import uuid

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareOffsetsTopic,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import offsets_unserved, share_coordinator

API_KEY = DeleteShareGroupOffsetsRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")
ZERO_ID = uuid.UUID(int=0)


def _answer(ctx: RequestContext, errors: dict[str, Errors], error: Errors = Errors.NONE,
            message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    responses = []
    for topic, topic_error in errors.items():
        meta = ctx.broker.topics.get(topic)
        responses.append(DeleteShareOffsetsTopic(
            topic_name=topic, topic_id=meta.meta.topic_id if meta is not None else ZERO_ID, error_code=topic_error))
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                           responses=responses)


def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest,
           version: int) -> DeleteShareGroupOffsetsResponse:
    group_id = request.group_id
    if (unserved := offsets_unserved(ctx.broker)) is not None:
        return _answer(ctx, {}, Errors.UNSUPPORTED_VERSION, unserved)
    if (refused := ctx.refusal(GROUP, group_id)) is not None:
        return _answer(ctx, {}, refused)
    coordinator = share_coordinator(ctx.broker, group_id)
    if coordinator is None:
        return _answer(ctx, {}, Errors.NOT_COORDINATOR)
    errors: dict[str, Errors] = {}
    for topic in dict.fromkeys(t.topic_name for t in request.topics):
        errors[topic] = ctx.refusal(TOPIC, topic) or Errors.NONE
    allowed = [topic for topic, error in errors.items() if error is Errors.NONE]
    try:
        error, deleted = coordinator.delete_offsets(group_id, allowed)
    except KafkaError as exc:
        error, deleted = exc.error, {}
    if error is not Errors.NONE:
        return _answer(ctx, {}, error)
    errors.update(deleted)
    return _answer(ctx, errors)
