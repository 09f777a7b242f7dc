"""SyncGroup (14), v0-5: the leader hands out the assignment; followers wait for it.

In CompletingRebalance a follower's request is parked until the leader's SyncGroup has been
stored (or a rebalance, removal or fencing answers it with an error); the leader's assignment is
written to the coordinator log before anyone is answered. v5's protocol type and name are
checked against the group's (INCONSISTENT_GROUP_PROTOCOL) and returned.

Read on the group, else GROUP_AUTHORIZATION_FAILED (the authorization table).
"""

from __future__ import annotations

from rivven_kproto.broker.groups import Awaiting, SyncParams, SyncResult
from rivven_kproto.broker.groups.api import Result
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sync_group import SyncGroupRequest, SyncGroupResponse

from ..context import RequestContext
from ..delayed import Pending
from ..routes import LOCAL
from ._group_wait import park

API_KEY = SyncGroupRequest.API_KEY
ROUTE = LOCAL
MOVES_GROUP_TIMERS = True  # may arm a group timer earlier than the one the group loop sleeps for
GROUP = rule(API_KEY).check("group")


def handle(ctx: RequestContext, request: SyncGroupRequest, version: int) -> SyncGroupResponse | Pending:
    params = SyncParams(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
    )
    if (refused := ctx.refusal(GROUP, request.group_id)) is not None:
        return _response(SyncResult(refused))
    if not ctx.broker.coordinates(request.group_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return _response(SyncResult(Errors.NOT_COORDINATOR))
    outcome = ctx.groups_for(params.group_id).sync(params, ctx.now_ms)
    if isinstance(outcome, Awaiting):
        return park(ctx, outcome, _response, lambda: _response(SyncResult(Errors.COORDINATOR_NOT_AVAILABLE)))
    return _response(outcome)


def _response(result: Result) -> SyncGroupResponse:
    assert isinstance(result, SyncResult)
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
