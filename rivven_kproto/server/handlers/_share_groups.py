"""Share groups (KIP-932) for the handlers: their coordinator here, and their ListGroups entries
(protocol type and group type "share", states Empty/Stable)."""

from __future__ import annotations

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.security.authorization_rules import Check, rule
from rivven_kproto.broker.share import ShareCoordinator, SharePartitions
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.list_groups import ListedGroup

from ..context import RequestContext

SHARE_TYPE = "share"
LISTED = rule(16).check("group")  # ListGroups: Describe on the group, or on the Cluster for every group


def share_coordinator(broker: Broker, group_id: str) -> ShareCoordinator | None:
    """The share coordinator of this group here (None: another broker's shard, nobody's now, this
    broker's claims may have lapsed, or share groups are off)."""
    return broker.shards[broker.shard_of(group_id)].share if broker.coordinates(group_id) else None


def offsets_unserved(broker: Broker) -> str | None:
    """Why Alter/DeleteShareGroupOffsets are not served here (None: they are): share groups off."""
    return None if broker.share_enabled else "Share groups are not enabled on this broker."


def member_coordinator(ctx: RequestContext, group_id: str, member_id: str,
                       check: Check) -> SharePartitions | tuple[Errors, str | None]:
    """The checks a member's ShareFetch and ShareAcknowledge start with, in this order: share groups
    enabled, group and member ids given, the group's check from the table, and (on the native log)
    this broker coordinating the group. Who keeps the share partitions here (the group's
    coordinator; on PostgreSQL the partition leaders' ``LeaderShares``), or the (error, message)."""
    if not ctx.broker.share_enabled:
        return Errors.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker."
    if not group_id or not member_id:
        return Errors.INVALID_REQUEST, "GroupId and MemberId are required."
    refused = ctx.refusal(check, group_id)
    if refused is not None:
        return refused, None
    if ctx.broker.leader_shares is not None:  # PostgreSQL: the partitions' leader keeps them
        return ctx.broker.leader_shares
    coordinator = share_coordinator(ctx.broker, group_id)
    return coordinator if coordinator is not None else (Errors.NOT_COORDINATOR, None)


def listed_share_groups(ctx: RequestContext, states: list[str], types: set[str], version: int) -> list[ListedGroup]:
    """The share groups of the shards here that pass the filters and the client may describe."""
    if types and SHARE_TYPE not in types:
        return []
    wanted_states = {s.lower() for s in states}
    return [
        ListedGroup(group_id=group_id, protocol_type=SHARE_TYPE, group_state=state if version >= 4 else "",
                    group_type=SHARE_TYPE if version >= 5 else "")
        for shard in ctx.broker.shards.values() if shard.share is not None
        for group_id, state in shard.share.listing()
        if (not wanted_states or state.lower() in wanted_states)
        and ctx.permits(LISTED, group_id)
    ]
