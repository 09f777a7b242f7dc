"""ShareGroupHeartbeat (76), v1: share-group membership (KIP-932; see ``broker/share``).

Partitions travel as topic ids; the coordinator works with names. Authorization: Read on the
group, and Describe on the subscribed topics (TOPIC_AUTHORIZATION_FAILED), from the table
(``broker/security/authorization_rules.py``).
"""

from __future__ import annotations

import uuid

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareHeartbeat
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareHeartbeatAssignment,
    ShareTopicPartitions,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import share_coordinator

API_KEY = ShareGroupHeartbeatRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")


def _error(error: Errors, message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                       member_epoch=0, heartbeat_interval_ms=0)


def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequest, version: int) -> ShareGroupHeartbeatResponse:
    if not ctx.broker.share_enabled:
        return _error(Errors.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker.")
    refused = ctx.refusal(GROUP, request.group_id)
    if refused is not None:
        return _error(refused)
    for topic in request.subscribed_topic_names or ():
        refused = ctx.refusal(TOPIC, topic)
        if refused is not None:
            return _error(refused, f"Not authorized to describe topic {topic}.")
    coordinator = share_coordinator(ctx.broker, request.group_id)
    if coordinator is None:
        return _error(Errors.NOT_COORDINATOR)
    params = ShareHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
    )
    result = coordinator.heartbeat(params, ctx.now_ms)
    if result.error is not Errors.NONE:
        return _error(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        ids = {name: t.meta.topic_id for name, t in ctx.broker.topics.items()}
        assignment = ShareHeartbeatAssignment(topic_partitions=[
            ShareTopicPartitions(topic_id=ids.get(topic, uuid.UUID(int=0)), partitions=list(parts))
            for topic, parts in sorted(result.assignment.items()) if topic in ids
        ])
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=Errors.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment,
    )
