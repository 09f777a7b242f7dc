"""The group coordinator (classic consumer groups) and the durable store of committed offsets.

``coordinator.GroupCoordinator`` is the entry point; ``membership`` holds the rebalance protocol,
``group`` one group's state, ``offsets`` the committed offsets, ``records``/``wal`` the durable log
(its on-disk format is documented in ``wal.py``) and ``consumer_protocol`` the pure decoder of the
consumer protocol's subscription and assignment bytes.
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
