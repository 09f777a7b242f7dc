"""JoinGroup (11), v0-7: the classic rebalance's join phase (see ``broker/groups/membership.py``).

A member without an id joining with v4+ gets MEMBER_ID_REQUIRED and its new id, and must join
again with it. A join that has to wait for the other members is parked (a delayed response) until
the coordinator completes the join phase: all known members rejoined, the rebalance timeout
passed, or (for a group leaving Empty) ``group.initial.rebalance.delay.ms`` passed without new
arrivals. v0 has no rebalance timeout: the session timeout stands in for it, as in Kafka. Below
v7 a missing protocol name is sent as "" (the field is not nullable there).

Not implemented: the v8+ reason field and v9's skip_assignment (the codec declares v0-7),
group.max.size, authorization.
"""

from __future__ import annotations

from rivven_kproto.broker.groups import Awaiting, JoinParams, JoinResult
from rivven_kproto.broker.groups.api import Result
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.join_group import (
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
)

from ..context import RequestContext
from ..delayed import Pending
from ..routes import LOCAL
from ._group_wait import park

API_KEY = JoinGroupRequest.API_KEY
ROUTE = LOCAL
MOVES_GROUP_TIMERS = True  # may arm a group timer earlier than the one the group loop sleeps for
GROUP = rule(API_KEY).check("group")


def handle(ctx: RequestContext, request: JoinGroupRequest, version: int) -> JoinGroupResponse | Pending:
    params = JoinParams(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=request.group_instance_id,
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((protocol.name, protocol.metadata) for protocol in request.protocols),
        require_known_member_id=version >= 4,
    )
    if (refused := ctx.refusal(GROUP, request.group_id)) is not None:
        return _response(JoinResult(refused, request.member_id), version)
    if not ctx.broker.coordinates(request.group_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return _response(JoinResult(Errors.NOT_COORDINATOR, request.member_id), version)
    outcome = ctx.groups_for(params.group_id).join(params, ctx.now_ms)
    if isinstance(outcome, Awaiting):
        return park(
            ctx, outcome, lambda result: _response(result, version),
            lambda: _response(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, request.member_id), version),
        )
    return _response(outcome, version)


def _response(result: Result, version: int) -> JoinGroupResponse:
    assert isinstance(result, JoinResult)
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.instance_id, metadata=m.metadata)
            for m in result.members
        ],
    )
