"""ConsumerGroupDescribe (69), v0-1: a KIP-848 group's epochs, assignor and members, each with
its current and target assignment (topic ids and names).

An unknown group, or a classic one, answers GROUP_ID_NOT_FOUND, as Kafka does. Authorized
operations are computed as for DescribeGroups; v1's member type is 1 for a consumer-protocol
member and 0 for a classic-protocol one (a classic group upgraded online, KIP-848 migration).

As Kafka 4.0 (KAFKA-18813), a group with a member assigned (or to be assigned) a partition of a
topic the caller may not Describe answers TOPIC_AUTHORIZATION_FAILED instead of naming the topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from rivven_kproto.broker.security.acls import ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.acls import GROUP_OPERATIONS
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedAssignment,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
)

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = ConsumerGroupDescribeRequest.API_KEY
ROUTE = LOCAL
GROUP = rule(API_KEY).check("group")
TOPIC = rule(API_KEY).check("topic")
NOT_REQUESTED = -(2**31)
CONSUMER_MEMBER = 1
CLASSIC_MEMBER = 0
HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest, version: int) -> ConsumerGroupDescribeResponse:
    ids = {name: t.meta.topic_id for name, t in ctx.broker.topics.items()}
    groups = []
    for group_id in request.group_ids:
        operations = (ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_OPERATIONS)
                      if request.include_authorized_operations else NOT_REQUESTED)
        if (refused := ctx.refusal(GROUP, group_id)) is not None:
            groups.append(_error(group_id, refused, None))
            continue
        coordinator = ctx.broker.group_coordinator(group_id)
        if coordinator is None:  # its shard is another broker's
            groups.append(_error(group_id, Errors.NOT_COORDINATOR, None))
            continue
        group = coordinator.consumer_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group." if group_id in coordinator.groups
                       else f"Group {group_id} not found.")
            groups.append(_error(group_id, Errors.GROUP_ID_NOT_FOUND, message))
            continue
        named = {topic for m in group.members.values() for topic in m.current.assigned}
        named |= {topic for target in group.target.values() for topic in target}
        if (refused := next(filter(None, (ctx.refusal(TOPIC, topic) for topic in sorted(named))), None)) is not None:
            groups.append(_error(group_id, refused, HIDDEN_TOPICS))
            continue
        groups.append(DescribedConsumerGroup(
            error_code=Errors.NONE, group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
            assignment_epoch=group.target_epoch, assignor_name=group.preferred_assignor("uniform"),
            members=[
                DescribedConsumerGroupMember(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                    client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_names),
                    subscribed_topic_regex=m.regex, assignment=_assignment(m.current.assigned, ids),
                    target_assignment=_assignment(group.target.get(m.member_id, {}), ids),
                    member_type=-1 if version < 1 else CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER,
                )
                for m in group.members.values()
            ],
            authorized_operations=operations,
        ))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _error(group_id: str, error: Errors, message: str | None) -> DescribedConsumerGroup:
    return DescribedConsumerGroup(error_code=error, error_message=message, group_id=group_id, group_state="",
                                  group_epoch=0, assignment_epoch=0, assignor_name="", members=[])


def _assignment(assignment: Mapping[str, frozenset[int]], ids: Mapping[str, uuid.UUID]) -> DescribedAssignment:
    return DescribedAssignment(topic_partitions=[
        DescribedTopicPartitions(topic_id=ids.get(topic, uuid.UUID(int=0)), topic_name=topic, partitions=sorted(parts))
        for topic, parts in sorted(assignment.items())
    ])
