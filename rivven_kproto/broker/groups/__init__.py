"""The group coordinator (classic and KIP-848 consumer groups) and the durable store of committed offsets.

``coordinator.GroupCoordinator`` is the entry point; ``membership`` holds the classic rebalance
protocol, ``group`` one classic group's state, ``offsets`` the committed offsets, ``records`` the
records of the durable log and ``consumer_protocol`` the pure decoder of the consumer protocol's
subscription and assignment bytes. KIP-848: ``consumer_coordinator`` (the coordinator's half for
consumer groups), ``consumer_membership`` (ConsumerGroupHeartbeat's rules), ``consumer_group``
(one group), ``assignors`` and ``reconciliation`` (pure). KIP-848 online migration: ``migration``
(classic <-> consumer group conversions, pure) and ``classic_members`` (classic-protocol members
inside a consumer group).
"""

from .api import Awaiting, JoinParams, JoinResult, LeavingMember, SyncParams, SyncResult
from .config import GroupConfig
from .coordinator import GroupCoordinator

__all__ = [
    "Awaiting",
    "GroupConfig",
    "GroupCoordinator",
    "JoinParams",
    "JoinResult",
    "LeavingMember",
    "SyncParams",
    "SyncResult",
]
