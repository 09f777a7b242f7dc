"""ListGroups (16), v0-5: every group with its protocol type; v4+ state filter, v5+ type filter.

The state and type filters match case-insensitively. Groups are "classic" (JoinGroup) or
"consumer" (KIP-848, protocol type "consumer", states Empty/Assigning/Reconciling/Stable) or
"share" (KIP-932, protocol type "share", states Empty/Stable).
Only groups the client may Describe are listed, all of them with Describe on the Cluster (Kafka).
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import listed_share_groups

API_KEY = ListGroupsRequest.API_KEY
ROUTE = LOCAL
LISTED = rule(API_KEY).check("group")


def handle(ctx: RequestContext, request: ListGroupsRequest, version: int) -> ListGroupsResponse:
    types = {t.strip().lower() for t in request.types_filter} if version >= 5 else set()
    states = request.states_filter if version >= 4 else []
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=Errors.NONE,
        groups=[
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state if version >= 4 else "",
                group_type=g.group_type if version >= 5 else "",
            )
            for coordinator in ctx.broker.group_coordinators()  # the shards this broker coordinates
            for g in coordinator.list_groups(states)
            if (not types or g.group_type in types) and ctx.permits(LISTED, g.group_id)
        ] + listed_share_groups(ctx, states, types, version),
    )
