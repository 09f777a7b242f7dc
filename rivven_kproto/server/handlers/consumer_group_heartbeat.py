"""ConsumerGroupHeartbeat (68), v0-1: the KIP-848 consumer group protocol (see
``broker/groups/consumer_membership.py`` for the rules).

Partitions travel as topic ids on the wire and as names in the coordinator: owned partitions of a
topic id the broker does not know are left out, as Kafka does. v0 lets the coordinator generate
the member id of a joining member that sent none; v1 members bring their own.

Authorization as Kafka 4.0 (KAFKA-18813): Read on the group; subscribed topic names the member's
principal may not Describe answer TOPIC_AUTHORIZATION_FAILED (the heartbeat changes nothing); a
regex resolves only to the topics that principal may Describe (the coordinator filters it).
"""

from __future__ import annotations

import uuid

from rivven_kproto.broker.groups.api import ConsumerHeartbeat
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    HeartbeatTopicPartitions,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = ConsumerGroupHeartbeatRequest.API_KEY
ROUTE = LOCAL
MOVES_GROUP_TIMERS = True  # may arm a group timer earlier than the one the group loop sleeps for
GROUP = rule(API_KEY).check("group")
TOPIC = rule(API_KEY).check("topic")  # the regex check ("regex") is the coordinator's (broker.py)


def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest, version: int) -> ConsumerGroupHeartbeatResponse:
    if (refused := ctx.refusal(GROUP, request.group_id)) is not None:
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=refused,
                                              member_epoch=-1, heartbeat_interval_ms=0)
    names = request.subscribed_topic_names
    if (refused := next(filter(None, (ctx.refusal(TOPIC, name) for name in sorted(set(names or ())))), None)) is not None:
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=refused,
                                              member_epoch=0, heartbeat_interval_ms=0)
    if not ctx.broker.coordinates(request.group_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=Errors.NOT_COORDINATOR,
                                              member_epoch=-1, heartbeat_interval_ms=0)
    topics = ctx.broker.topics
    by_id = {t.meta.topic_id: name for name, t in topics.items()}
    owned: dict[str, frozenset[int]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            name = by_id.get(tp.topic_id)
            if name is not None and tp.partitions:
                owned[name] = owned.get(name, frozenset()) | frozenset(tp.partitions)
    params = ConsumerHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        version=version,
        principal=ctx.principal,
    )
    result = ctx.groups_for(params.group_id).consumer_heartbeat(params, ctx.now_ms)
    if result.error is not Errors.NONE:
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=result.error, error_message=result.message, member_epoch=0,
            heartbeat_interval_ms=0,
        )
    assignment = None
    if result.assignment is not None:
        ids = {name: t.meta.topic_id for name, t in topics.items()}
        assignment = HeartbeatAssignment(topic_partitions=[
            HeartbeatTopicPartitions(topic_id=ids.get(topic, uuid.UUID(int=0)), partitions=sorted(parts))
            for topic, parts in sorted(result.assignment.items()) if topic in ids
        ])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=Errors.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment,
    )
