"""Share groups (KIP-932) for the handlers: their coordinator here, and their ListGroups entries
(protocol type and group type "share", states Empty/Stable)."""

from __future__ import annotations

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareCoordinator
from rivven_kproto.codec.messages.list_groups import ListedGroup

from ..context import RequestContext

SHARE_TYPE = "share"
LISTED = rule(16).check("group")  # ListGroups: Describe on the group, or on the Cluster for every group


def share_coordinator(broker: Broker, group_id: str) -> ShareCoordinator | None:
    """The share coordinator of this group here (None: another broker's shard, nobody's now, this
    broker's claims may have lapsed, or share groups are off)."""
    return broker.shards[broker.shard_of(group_id)].share if broker.coordinates(group_id) else None


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
