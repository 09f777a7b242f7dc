"""Heartbeat (12), v0-4: keeps a member's session alive and tells it when to rejoin.

REBALANCE_IN_PROGRESS while the group prepares a rebalance, ILLEGAL_GENERATION for a stale
generation, UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID for a member the group does not know (or a
static instance now owned by another member id), as Kafka.
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = HeartbeatRequest.API_KEY
ROUTE = LOCAL
MOVES_GROUP_TIMERS = True  # may arm a group timer earlier than the one the group loop sleeps for
GROUP = rule(API_KEY).check("group")


# Every answer is one of a few (version, error) pairs: each is pinned (encoded once) and shared,
# as a group of many members heartbeats hundreds of times a second.
_ANSWERS: dict[tuple[int, int], HeartbeatResponse] = {}


def _answer(error: int, version: int) -> HeartbeatResponse:
    answer = _ANSWERS.get((version, error))
    if answer is None:
        answer = _ANSWERS[version, error] = HeartbeatResponse(throttle_time_ms=0, error_code=error).pin(version)
    return answer


def handle(ctx: RequestContext, request: HeartbeatRequest, version: int) -> HeartbeatResponse:
    if (refused := ctx.refusal(GROUP, request.group_id)) is not None:
        return _answer(refused, version)
    if not ctx.broker.coordinates(request.group_id):  # its shard is another broker's (or nobody's now): the client looks it up again
        return _answer(Errors.NOT_COORDINATOR, version)
    error = ctx.groups_for(request.group_id).heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id, ctx.now_ms
    )
    return _answer(error, version)
