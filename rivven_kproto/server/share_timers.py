"""The share coordinators' clock: member session expiry and acquisition-lock expiry (KIP-932)."""

from __future__ import annotations

import logging

from rivven_kproto.broker.broker import Broker

log = logging.getLogger(__name__)


def tick_share_groups(broker: Broker, now_ms: int) -> bool:
    """Tick every share coordinator here; True when records may have become available again
    (parked share fetches should look again)."""
    released = False
    for shard in list(broker.shards.values()):
        share = shard.share
        if share is None:
            continue
        try:
            share.tick(now_ms)
        except OSError as exc:  # a full disk: the next tick retries
            log.warning("share group timers postponed: %s", exc)
        released = share.take_changed() or released
    if broker.leader_shares is not None:  # PostgreSQL: the share partitions of the partitions led here
        try:
            released = broker.leader_shares.tick(now_ms) or released
        except OSError as exc:
            log.warning("share partition timers postponed: %s", exc)
    return released


def share_members_here(broker: Broker) -> bool:
    """A share group this broker coordinates has members, or (PostgreSQL) this leader keeps share
    partitions: their sessions and the acquisition locks of their records need the clock (an
    empty group holds no lock: its records were released)."""
    if broker.leader_shares is not None and broker.leader_shares.holds_locks():
        return True
    return broker.share_enabled and any(
        group.members for shard in broker.shards.values() if shard.share is not None for group in shard.share.groups.values())
