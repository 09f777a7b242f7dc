"""Per-share-group delivery counters since the broker started (soft state, exported as metrics):
records acquired, redelivered (acquired again), acknowledged by type, archived (rejected or past
the delivery-count limit) and lock expiries (records whose acquisition lock ran out)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .partition import AckType, Acquired

ACK_NAMES = {AckType.ACCEPT: "accept", AckType.RELEASE: "release", AckType.REJECT: "reject"}


@dataclass
class ShareStats:
    acquired: int = 0
    redelivered: int = 0
    acknowledged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ACK_NAMES.values(), 0))
    archived: int = 0
    lock_expiries: int = 0

    def note_acquired(self, taken: Iterable[Acquired]) -> None:
        for a in taken:
            size = a.last - a.first + 1
            self.acquired += size
            if a.count > 1:
                self.redelivered += size

    def note_acknowledged(self, by_type: dict[AckType, int], archived: int) -> None:
        for ack, count in by_type.items():
            name = ACK_NAMES.get(ack)
            if name is not None:
                self.acknowledged[name] += count
        self.archived += archived
