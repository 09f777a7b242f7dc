"""DeleteGroups (42), v0-2: delete Empty groups together with their committed offsets.

GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP while it has members, as Kafka. Members
whose session deadline has passed are expired first, so a deletion right after a session timeout
never races the timer that expires them. A share group (KIP-932) is deleted by its share
coordinator, with its share-partitions' state, under the same rules (Kafka 4.2 deletes share
groups through DeleteGroups too). On PostgreSQL the partitions' leaders forget its state first.
"""

from __future__ import annotations

from typing import Any

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
from ..share_offsets import forget_group, kept_by_leaders
from ._share_groups import share_coordinator

API_KEY = DeleteGroupsRequest.API_KEY
ROUTE = LOCAL
GROUP = rule(API_KEY).check("group")


async def prepare(ctx: RequestContext, request: DeleteGroupsRequest, limiter: Any) -> None:
    """On PostgreSQL an empty share group's state is in its partitions' share-state logs, kept by
    their leaders: they forget it first (``server/share_offsets.py``), so a group made again with
    the id starts afresh; a group whose state could not all be forgotten stays (its error is the
    answer, the client may retry)."""
    if not kept_by_leaders(ctx):
        return
    failed: list[tuple[str, Errors]] = []
    for group_id in request.groups_names:
        if ctx.refusal(GROUP, group_id) is not None or not ctx.broker.coordinates(group_id):
            continue
        share = share_coordinator(ctx.broker, group_id)
        group = share.group(group_id) if share is not None else None
        if group is not None and not group.members:
            error = await forget_group(ctx, group_id, limiter)
            if error is not Errors.NONE:
                failed.append((group_id, error))
    if failed:
        ctx.forwarded_answer = _response(failed)


def _response(results: list[tuple[str, Errors]]) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[DeletableGroupResult(group_id=group_id, error_code=error) for group_id, error in results],
    )


def handle(ctx: RequestContext, request: DeleteGroupsRequest, version: int) -> DeleteGroupsResponse:
    failed = {r.group_id: Errors(r.error_code) for r in ctx.forwarded_answer.results} if isinstance(
        ctx.forwarded_answer, DeleteGroupsResponse) else {}
    refusals = {g: ctx.refusal(GROUP, g) for g in request.groups_names}
    allowed = [g for g in request.groups_names if refusals[g] is None]
    denied = [(g, refused) for g, refused in refusals.items() if refused is not None]
    local = [g for g in allowed if ctx.broker.coordinates(g)]
    elsewhere = [(g, Errors.NOT_COORDINATOR) for g in allowed if g not in local]  # another broker's shard
    results: list[tuple[str, Errors]] = []
    for group_id in local:
        if group_id in failed:  # its share state is not all forgotten yet: it stays
            results.append((group_id, failed[group_id]))
            continue
        share = share_coordinator(ctx.broker, group_id)
        if share is not None and share.group(group_id) is not None:
            results.append((group_id, _delete_share_group(share, group_id)))
            continue
        coordinator = ctx.groups_for(group_id)
        coordinator.expire_due(group_id, ctx.now_ms)  # a session past its deadline is over, timer or not
        results.extend(coordinator.delete_groups([group_id]))
    return _response(results + elsewhere + denied)


def _delete_share_group(share: ShareCoordinator, group_id: str) -> Errors:
    try:
        return share.delete_group(group_id)
    except KafkaError as exc:  # the share coordinator's log refused the tombstone
        return exc.error
