"""DeleteGroups (42), v0-2: delete Empty groups together with their committed offsets.

GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP while it has members, as Kafka.
"""

from __future__ import annotations

from rivven_kproto.broker.security.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)

from ..context import RequestContext

API_KEY = DeleteGroupsRequest.API_KEY


def handle(ctx: RequestContext, request: DeleteGroupsRequest, version: int) -> DeleteGroupsResponse:
    allowed = [g for g in request.groups_names if ctx.allowed(Operation.DELETE, ResourceType.GROUP, g)]
    denied = [(g, Errors.GROUP_AUTHORIZATION_FAILED) for g in request.groups_names if g not in allowed]
    results = list(ctx.broker.groups.delete_groups(allowed)) + denied
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[DeletableGroupResult(group_id=group_id, error_code=error) for group_id, error in results],
    )
