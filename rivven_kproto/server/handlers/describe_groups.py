"""DescribeGroups (15), v0-5: state, protocol and members of each group.

States carry Kafka's names ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty",
"Dead"); an unknown group is described as "Dead" with no error (GROUP_ID_NOT_FOUND only exists
from v6, which the codec does not declare). As in Kafka, the protocol name and each member's
metadata are reported only for a Stable group; assignments always. Authorized operations (v3+)
are every operation Kafka supports on a group, as a broker without an authorizer grants them.
"""

from __future__ import annotations

from rivven_kproto.broker.security.acls import ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.acls import GROUP_OPERATIONS
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = DescribeGroupsRequest.API_KEY
ROUTE = LOCAL
GROUP = rule(API_KEY).check("group")
# AclOperation codes Kafka supports on a group: READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11.
NOT_REQUESTED = -(2**31)


def handle(ctx: RequestContext, request: DescribeGroupsRequest, version: int) -> DescribeGroupsResponse:
    wanted = version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        operations = ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_OPERATIONS) if wanted else NOT_REQUESTED
        if (refused := ctx.refusal(GROUP, group_id)) is not None:
            groups.append(DescribedGroup(
                error_code=refused, group_id=group_id, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=operations,
            ))
            continue
        coordinator = ctx.broker.group_coordinator(group_id)
        if coordinator is None:  # its shard is another broker's
            groups.append(DescribedGroup(
                error_code=Errors.NOT_COORDINATOR, group_id=group_id, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=operations,
            ))
            continue
        described = coordinator.describe(group_id)
        groups.append(DescribedGroup(
            error_code=Errors.NONE,
            group_id=group_id,
            group_state=described.state,
            protocol_type=described.protocol_type,
            protocol_data=described.protocol_data,
            members=[
                DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment,
                )
                for m in described.members
            ],
            authorized_operations=operations,
        ))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
