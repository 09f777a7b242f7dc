"""LeaveGroup (13), v0-5: v0-2 remove one member id; v3+ a batch of members (by id and/or instance id).

A static member may be removed by its instance id alone (member id ""), as the admin client does.
Below v3 the single member's error is the top-level error, as Kafka's response conversion does.
"""

from __future__ import annotations

import logging

from rivven_kproto.broker.groups import LeavingMember
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = LeaveGroupRequest.API_KEY
ROUTE = LOCAL
MOVES_GROUP_TIMERS = True  # may arm a group timer earlier than the one the group loop sleeps for
GROUP = rule(API_KEY).check("group")
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: LeaveGroupRequest, version: int) -> LeaveGroupResponse:
    if version >= 3:
        leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
        reasons = {m.member_id: m.reason for m in request.members if m.reason}
        if reasons:
            log.info("group %s: members leaving with reasons %s", request.group_id, reasons)
    else:
        leaving = [LeavingMember(request.member_id, None)]
    if (refused := ctx.refusal(GROUP, request.group_id)) is not None:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=refused, members=[])
    if not ctx.broker.coordinates(request.group_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return LeaveGroupResponse(throttle_time_ms=0, error_code=Errors.NOT_COORDINATOR, members=[])
    error, results = ctx.groups_for(request.group_id).leave(request.group_id, leaving, ctx.now_ms)
    if version >= 3:
        return LeaveGroupResponse(
            throttle_time_ms=0,
            error_code=error,
            members=[
                MemberResponse(member_id=m.member_id, group_instance_id=m.instance_id, error_code=member_error)
                for m, member_error in results
            ],
        )
    if error is Errors.NONE and results:
        error = results[0][1]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
