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
    return released


def share_groups_here(broker: Broker) -> bool:
    """Share groups are served and this broker coordinates at least one (their locks need a clock)."""
    return broker.share_enabled and any(shard.share is not None and shard.share.groups for shard in broker.shards.values())
