"""AlterShareGroupOffsets (91), v0: set share-partitions' start offsets (kafka-share-groups.sh
--reset-offsets). Their in-flight records are dropped: delivery resumes at the new start.

As Kafka: only an empty group's (NON_EMPTY_GROUP), an unknown id becomes an empty share group
with those offsets, a group error is answered at the top and on every partition. Per partition:
TOPIC_AUTHORIZATION_FAILED without Read on the topic, UNKNOWN_TOPIC_OR_PARTITION for one that
does not exist, INVALID_REQUEST for a negative offset. Checks come from the authorization table.
On PostgreSQL the partitions' leaders make the change (``server/share_offsets.py``; a leader that
cannot be reached: COORDINATOR_NOT_AVAILABLE on its partitions).
"""

from __future__ import annotations

import uuid
from typing import Any

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareCoordinator
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareOffsetsPartition,
    AlterShareOffsetsRequestPartition,
    AlterShareOffsetsRequestTopic,
    AlterShareOffsetsTopic,
)
from rivven_kproto.codec.schema import Request

from ..context import RequestContext
from ..routes import LOCAL
from ..share_loading import read_ahead
from ..share_offsets import ask_leaders, by_leader, from_coordinator, kept_by_leaders, touch
from ._share_groups import offsets_unserved, share_coordinator

API_KEY = AlterShareGroupOffsetsRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")
ZERO_ID = uuid.UUID(int=0)


Starts = dict[tuple[str, int], int]
PartitionErrors = dict[tuple[str, int], Errors]


async def prepare(ctx: RequestContext, request: AlterShareGroupOffsetsRequest, limiter: Any) -> None:
    """On PostgreSQL the partitions' leaders make the change (``server/share_offsets.py``): this
    broker as the group's coordinator checks the group and asks them; as a leader asked by the
    coordinator, it changes the share-partitions it leads."""
    if kept_by_leaders(ctx) and ctx.broker.share_enabled:
        leader = from_coordinator(ctx)
        ctx.forwarded_answer = await (_as_leader if leader else _as_coordinator)(ctx, request, limiter)


def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequest, version: int) -> AlterShareGroupOffsetsResponse:
    if isinstance(ctx.forwarded_answer, AlterShareGroupOffsetsResponse):
        return ctx.forwarded_answer
    error, message, coordinator = _group_checks(ctx, request.group_id)
    if error is not Errors.NONE:
        return _answer(ctx, request, {}, error, message)
    assert coordinator is not None
    errors, starts = _partition_checks(ctx, request)
    if starts:
        try:
            error = coordinator.alter_offsets(request.group_id, starts)
        except KafkaError as exc:
            error = exc.error
        if error is Errors.NONE:
            ctx.appended = True  # parked share fetches look again from the new start
        else:
            errors.update({key: error for key in starts})
    return _answer(ctx, request, errors, error, None)


def _group_checks(ctx: RequestContext, group_id: str, *, coordinator: bool = True,
                  ) -> tuple[Errors, str | None, ShareCoordinator | None]:
    if (unserved := offsets_unserved(ctx.broker)) is not None:
        return Errors.UNSUPPORTED_VERSION, unserved, None
    if (refused := ctx.refusal(GROUP, group_id)) is not None:
        return refused, None, None
    if not coordinator:
        return Errors.NONE, None, None
    found = share_coordinator(ctx.broker, group_id)
    return (Errors.NONE, None, found) if found is not None else (Errors.NOT_COORDINATOR, None, None)


def _partition_checks(ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> tuple[PartitionErrors, Starts]:
    """Each partition's error so far (NONE: to alter), and the new starts."""
    errors: PartitionErrors = {}
    starts: Starts = {}
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
    return errors, starts


async def _as_leader(ctx: RequestContext, request: AlterShareGroupOffsetsRequest,
                     limiter: Any) -> AlterShareGroupOffsetsResponse:
    """The coordinator's forward: the share-partitions led here, without the group checks."""
    error, message, _ = _group_checks(ctx, request.group_id, coordinator=False)
    if error is not Errors.NONE:
        return _answer(ctx, request, {}, error, message)
    errors, starts = _partition_checks(ctx, request)
    await read_ahead(ctx, starts, limiter)
    errors.update(_alter_here(ctx, request.group_id, starts))
    return _answer(ctx, request, errors, Errors.NONE, None)


def _alter_here(ctx: RequestContext, group_id: str, starts: Starts) -> PartitionErrors:
    assert ctx.broker.leader_shares is not None
    errors = ctx.broker.leader_shares.alter(group_id, starts)
    touch(ctx, [key for key, error in errors.items() if error is Errors.NONE])
    ctx.appended = True  # parked share fetches look again from the new start
    return errors


async def _as_coordinator(ctx: RequestContext, request: AlterShareGroupOffsetsRequest,
                          limiter: Any) -> AlterShareGroupOffsetsResponse:
    group_id = request.group_id
    error, message, coordinator = _group_checks(ctx, group_id)
    if error is not Errors.NONE:
        return _answer(ctx, request, {}, error, message)
    assert coordinator is not None
    errors, starts = _partition_checks(ctx, request)
    if not starts:
        return _answer(ctx, request, errors, Errors.NONE, None)
    try:  # the group's checks (a share group, empty); an unknown id becomes an empty share group
        error = coordinator.alter_offsets(group_id, {})
    except KafkaError as exc:
        error = exc.error
    if error is not Errors.NONE:
        errors.update({key: error for key in starts})
        return _answer(ctx, request, errors, error, None)
    local, remote, lost = by_leader(ctx, starts)
    await read_ahead(ctx, local, limiter)
    errors.update(_alter_here(ctx, group_id, {key: starts[key] for key in local}))
    errors.update({key: Errors.COORDINATOR_NOT_AVAILABLE for key in lost})
    requests: dict[int, Request] = {}
    for leader, keys in remote.items():
        by_topic: dict[str, list[AlterShareOffsetsRequestPartition]] = {}
        for topic, index in keys:
            by_topic.setdefault(topic, []).append(AlterShareOffsetsRequestPartition(
                partition_index=index, start_offset=starts[(topic, index)]))
        requests[leader] = AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
            AlterShareOffsetsRequestTopic(topic_name=topic, partitions=partitions) for topic, partitions in by_topic.items()])
    answers = await ask_leaders(ctx, requests, AlterShareGroupOffsetsResponse)
    for leader, keys in remote.items():
        answer = answers.get(leader)
        found = {(t.topic_name, p.partition_index): Errors(p.error_code)
                 for t in (answer.responses if answer is not None else []) for p in t.partitions}
        errors.update({key: found.get(key, Errors.COORDINATOR_NOT_AVAILABLE) for key in keys})
    return _answer(ctx, request, errors, Errors.NONE, None)


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
