"""DeleteShareGroupOffsets (92), v0: forget an empty share group's state for whole topics
(kafka-share-groups.sh --delete-offsets); the next ShareFetch starts them again from
share.auto.offset.reset.

As Kafka: NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND for an unknown one (at
the top); per topic: TOPIC_AUTHORIZATION_FAILED without Read on it, UNKNOWN_TOPIC_OR_PARTITION
when the group has no state for it. Checks come from the authorization table. On PostgreSQL
the partitions' leaders forget the state (``server/share_offsets.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareCoordinator
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareOffsetsTopic,
)

from ..context import RequestContext
from ..routes import LOCAL
from ..share_loading import read_ahead
from ..share_offsets import forget_here, forget_on_leaders, from_coordinator, is_led, kept_by_leaders
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


async def prepare(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest, limiter: Any) -> None:
    """On PostgreSQL the partitions' leaders forget the state (``server/share_offsets.py``): this
    broker as the group's coordinator checks the group and asks the leaders of the topics'
    partitions; as a leader asked by the coordinator, it forgets those it leads."""
    if not kept_by_leaders(ctx) or not ctx.broker.share_enabled:
        return
    if from_coordinator(ctx):
        ctx.forwarded_answer = await _as_leader(ctx, request, limiter)
        return
    group_id = request.group_id
    checked = _checked(ctx, group_id)
    if isinstance(checked, DeleteShareGroupOffsetsResponse):
        ctx.forwarded_answer = checked
        return
    errors = _topic_checks(ctx, request)
    try:  # the group's checks only (exists, empty): it keeps no share-partitions here
        error, _ = checked.delete_offsets(group_id, [])
    except KafkaError as exc:
        error = exc.error
    if error is not Errors.NONE:
        ctx.forwarded_answer = _answer(ctx, {}, error)
        return
    forgotten = await forget_on_leaders(ctx, group_id, [topic for topic, error in errors.items() if error is Errors.NONE],
                                        limiter)
    ctx.forwarded_answer = _answer(ctx, {**errors, **forgotten})


async def _as_leader(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest,
                     limiter: Any) -> DeleteShareGroupOffsetsResponse:
    """The coordinator's forward: the topics' share-partitions led here, without the group checks."""
    if (refused := ctx.refusal(GROUP, request.group_id)) is not None:
        return _answer(ctx, {}, refused)
    errors = _topic_checks(ctx, request)
    broker = ctx.broker
    for topic, error in errors.items():
        if error is Errors.NONE:
            count = len(broker.topics[topic].partitions) if topic in broker.topics else 0
            led = [index for index in range(count) if is_led(ctx, topic, index)]
            await read_ahead(ctx, [(topic, index) for index in led], limiter)
            errors[topic] = forget_here(ctx, request.group_id, topic, led)
    return _answer(ctx, errors)


def _checked(ctx: RequestContext, group_id: str) -> ShareCoordinator | DeleteShareGroupOffsetsResponse:
    """The group's coordinator here, or the answer."""
    if (unserved := offsets_unserved(ctx.broker)) is not None:
        return _answer(ctx, {}, Errors.UNSUPPORTED_VERSION, unserved)
    if (refused := ctx.refusal(GROUP, group_id)) is not None:
        return _answer(ctx, {}, refused)
    coordinator = share_coordinator(ctx.broker, group_id)
    return coordinator if coordinator is not None else _answer(ctx, {}, Errors.NOT_COORDINATOR)


def _topic_checks(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> dict[str, Errors]:
    return {topic: ctx.refusal(TOPIC, topic) or Errors.NONE for topic in dict.fromkeys(t.topic_name for t in request.topics)}


def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest,
           version: int) -> DeleteShareGroupOffsetsResponse:
    if isinstance(ctx.forwarded_answer, DeleteShareGroupOffsetsResponse):
        return ctx.forwarded_answer
    group_id = request.group_id
    checked = _checked(ctx, group_id)
    if isinstance(checked, DeleteShareGroupOffsetsResponse):
        return checked
    errors = _topic_checks(ctx, request)
    allowed = [topic for topic, error in errors.items() if error is Errors.NONE]
    try:
        error, deleted = checked.delete_offsets(group_id, allowed)
    except KafkaError as exc:
        error, deleted = exc.error, {}
    if error is not Errors.NONE:
        return _answer(ctx, {}, error)
    errors.update(deleted)
    return _answer(ctx, errors)
