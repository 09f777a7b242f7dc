"""ShareAcknowledge (79), v1-2: acknowledgements outside a ShareFetch (KIP-932; see ``_share.py``).

The share session must exist at this epoch (or be closed with -1, which also releases what the
member still holds). Authorization (the table): Read on the group, Read on each topic.
"""

from __future__ import annotations

from typing import Any

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.share_acknowledge import (
    ShareAcknowledgePartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from rivven_kproto.codec.messages.share_common import ShareLeaderIdAndEpoch

from ..context import RequestContext
from ..routes import LOCAL
from ..share_loading import read_ahead, requested
from ._share import acknowledge, topic_names
from ._share_groups import member_coordinator

API_KEY = ShareAcknowledgeRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")
FINAL_EPOCH = -1


def _error(error: Errors, message: str | None = None) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=error, error_message=message, responses=[],
                                    node_endpoints=[])


async def prepare(ctx: RequestContext, request: ShareAcknowledgeRequest, limiter: Any) -> None:
    """On PostgreSQL: the share state of partitions this leader serves for the first time is read
    on a worker thread first (``server/share_loading.py``), for a client that may read the group."""
    if ctx.refusal(GROUP, request.group_id or "") is not None:
        return
    await read_ahead(ctx, requested(ctx, request.topics), limiter)


def handle(ctx: RequestContext, request: ShareAcknowledgeRequest, version: int) -> ShareAcknowledgeResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""  # (empty: INVALID_REQUEST)
    coordinator = member_coordinator(ctx, group_id, member_id, GROUP)
    if isinstance(coordinator, tuple):
        return _error(*coordinator)
    error = coordinator.sessions.check(group_id, member_id, request.share_session_epoch)
    if error is not Errors.NONE:
        return _error(error)
    names = topic_names(ctx)
    acks = [(names[t.topic_id], p.partition_index, p.acknowledgement_batches)
            for t in request.topics if t.topic_id in names for p in t.partitions]
    errors = acknowledge(ctx, coordinator, group_id, member_id, acks, TOPIC)
    if request.share_session_epoch == FINAL_EPOCH:
        coordinator.release_session(group_id, member_id)
        ctx.appended = True
    lock_ms = coordinator.config_of(group_id).record_lock_duration_ms
    leader = ShareLeaderIdAndEpoch(leader_id=ctx.config.node_id, leader_epoch=0)
    responses = []
    for topic in request.topics:
        name = names.get(topic.topic_id)
        responses.append(ShareAcknowledgeTopicResponse(topic_id=topic.topic_id, partitions=[
            ShareAcknowledgePartitionData(
                partition_index=p.partition_index,
                error_code=Errors.UNKNOWN_TOPIC_ID if name is None else errors.get((name, p.partition_index), Errors.NONE),
                current_leader=leader)
            for p in topic.partitions
        ]))
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=Errors.NONE, acquisition_lock_timeout_ms=lock_ms,
                                    responses=responses, node_endpoints=[])
