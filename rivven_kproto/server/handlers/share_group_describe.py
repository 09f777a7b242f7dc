"""ShareGroupDescribe (77), v1: a share group's epochs, assignor ("simple") and members, each
with its assignment (topic ids and names).

An unknown group, or a group of another type, answers GROUP_ID_NOT_FOUND, as Kafka does.
Authorization (the table, ``broker/security/authorization_rules.py``): Describe on the group; as
Kafka 4.2, a group with a member assigned a topic the caller may not Describe answers
TOPIC_AUTHORIZATION_FAILED instead of naming the topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from rivven_kproto.broker.security.acls import ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share.coordinator import describe_members
from rivven_kproto.broker.share.group import ASSIGNOR
from rivven_kproto.codec.acls import GROUP_OPERATIONS
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.share_group_describe import (
    ShareDescribedAssignment,
    ShareDescribedGroup,
    ShareDescribedMember,
    ShareDescribedTopicPartitions,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import share_coordinator

API_KEY = ShareGroupDescribeRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")
HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."
NOT_REQUESTED = -(2**31)


def handle(ctx: RequestContext, request: ShareGroupDescribeRequest, version: int) -> ShareGroupDescribeResponse:
    ids = {name: t.meta.topic_id for name, t in ctx.broker.topics.items()}
    groups = []
    for group_id in request.group_ids:
        operations = (ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_OPERATIONS)
                      if request.include_authorized_operations else NOT_REQUESTED)
        if not ctx.broker.share_enabled:
            groups.append(_error(group_id, Errors.UNSUPPORTED_VERSION, "Share groups are not enabled."))
            continue
        refused = ctx.refusal(GROUP, group_id)
        if refused is not None:
            groups.append(_error(group_id, refused, None))
            continue
        coordinator = share_coordinator(ctx.broker, group_id)
        if coordinator is None:
            groups.append(_error(group_id, Errors.NOT_COORDINATOR, None))
            continue
        group = coordinator.group(group_id)
        if group is None:
            groups.append(_error(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
            continue
        members = describe_members(group)
        assignments = {m.member_id: coordinator.assignment(group, m.member_id) for m in members}
        named = {topic for assignment in assignments.values() for topic in assignment}
        refused = next((e for e in (ctx.refusal(TOPIC, topic) for topic in sorted(named)) if e is not None), None)
        if refused is not None:
            groups.append(_error(group_id, refused, HIDDEN_TOPICS))
            continue
        groups.append(ShareDescribedGroup(
            error_code=Errors.NONE, group_id=group_id, group_state=group.state, group_epoch=group.epoch,
            assignment_epoch=group.epoch, assignor_name=ASSIGNOR,
            members=[
                ShareDescribedMember(
                    member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch, client_id=m.client_id,
                    client_host=m.client_host, subscribed_topic_names=list(m.topics),
                    assignment=_assignment(assignments[m.member_id], ids),
                )
                for m in members
            ],
            authorized_operations=operations,
        ))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _error(group_id: str, error: Errors, message: str | None) -> ShareDescribedGroup:
    return ShareDescribedGroup(error_code=error, error_message=message, group_id=group_id, group_state="",
                               group_epoch=0, assignment_epoch=0, assignor_name="", members=[])


def _assignment(assignment: Mapping[str, tuple[int, ...]], ids: Mapping[str, uuid.UUID]) -> ShareDescribedAssignment:
    return ShareDescribedAssignment(topic_partitions=[
        ShareDescribedTopicPartitions(topic_id=ids.get(topic, uuid.UUID(int=0)), topic_name=topic,
                                      partitions=list(parts))
        for topic, parts in sorted(assignment.items())
    ])
