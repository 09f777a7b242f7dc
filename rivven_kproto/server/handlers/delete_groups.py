"""DeleteGroups (42), v0-2: delete Empty groups together with their committed offsets.

GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP while it has members, as Kafka. Members
whose session deadline has passed are expired first, so a deletion right after a session timeout
never races the timer that expires them. A share group (KIP-932) is deleted by its share
coordinator, with its share-partitions' state, under the same rules (Kafka 4.2 deletes share
groups through DeleteGroups too).
"""

from __future__ import annotations

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareCoordinator
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import share_coordinator

API_KEY = DeleteGroupsRequest.API_KEY
ROUTE = LOCAL
GROUP = rule(API_KEY).check("group")


def handle(ctx: RequestContext, request: DeleteGroupsRequest, version: int) -> DeleteGroupsResponse:
    refusals = {g: ctx.refusal(GROUP, g) for g in request.groups_names}
    allowed = [g for g in request.groups_names if refusals[g] is None]
    denied = [(g, refused) for g, refused in refusals.items() if refused is not None]
    local = [g for g in allowed if ctx.broker.coordinates(g)]
    elsewhere = [(g, Errors.NOT_COORDINATOR) for g in allowed if g not in local]  # another broker's shard
    results: list[tuple[str, Errors]] = []
    for group_id in local:
        share = share_coordinator(ctx.broker, group_id)
        if share is not None and share.group(group_id) is not None:
            results.append((group_id, _delete_share_group(share, group_id)))
            continue
        coordinator = ctx.groups_for(group_id)
        coordinator.expire_due(group_id, ctx.now_ms)  # a session past its deadline is over, timer or not
        results.extend(coordinator.delete_groups([group_id]))
    results += elsewhere + denied
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[DeletableGroupResult(group_id=group_id, error_code=error) for group_id, error in results],
    )


def _delete_share_group(share: ShareCoordinator, group_id: str) -> Errors:
    try:
        return share.delete_group(group_id)
    except KafkaError as exc:  # the share coordinator's log refused the tombstone
        return exc.error
